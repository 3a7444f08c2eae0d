#!/usr/bin/env python3
"""Reproduce the classification experiment of Lakshminarayanan, Roy & Teh (2014),
"Mondrian Forests: Efficient Online Random Forests", section 7 / Figure 3.

Protocol (paper section 7): the training set is shuffled with the seed and cut into
100 mini-batches of floor(N/100) points (the last one takes the remainder). After each
mini-batch the test accuracy is measured.

Methods
  MF       our Mondrian forest, through the `mondrian` CLI (`curve` and `eval`).
  RF       sklearn RandomForestClassifier(n_estimators=100), refitted from scratch on the
           cumulative data (n_jobs=1).
  ERT-sqrt sklearn ExtraTreesClassifier(n_estimators=100, max_features='sqrt'), refitted.
  ERT-1    sklearn ExtraTreesClassifier(n_estimators=100, max_features=1), refitted.
  AMF      river.forest.AMFClassifier(n_estimators=10, defaults), one learn_one per point.

Outputs under --out: results.json (raw), summary.md, accuracy_vs_fraction.png,
accuracy_vs_time.png.  `--summarize-only` rebuilds the last three from results.json.

Example (full experiment, from the repository root):
  python3 experiments/classification/run.py --datasets usps,satimage,letter,dna --seeds 5
Smoke test:
  python3 experiments/classification/run.py --quick
"""
from __future__ import annotations

import os

# Keep numerical libraries on one core: the machine has 2 cores shared with other work,
# and the baselines are timed single-threaded.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import datetime as _dt
import gzip
import importlib.metadata
import json
import math
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEFAULT_DATA_DIR = REPO_ROOT / ".." / "shared" / "data" / "classification"
DEFAULT_BINARY = REPO_ROOT / "target" / "release" / "mondrian"
DEFAULT_OUT = HERE / "results"
DEFAULT_QUICK_OUT = HERE / "results-quick"
CACHE_DIR = HERE / ".cache"

ALL_DATASETS = ["usps", "satimage", "letter", "dna"]
DEFAULT_PERCENTS = [1, 2, 5, 10, 20, 30, 50, 70, 100]
DEFAULT_FULL_RF = ["letter", "satimage"]
# Paper, Table 1: average depth of the forests trained on the full training data (λ = ∞).
PAPER_DEPTH = {"usps": (19.1, 1.3), "satimage": (17.4, 1.6), "letter": (23.2, 1.8), "dna": (12.0, 0.3)}
PAPER_N_TRAIN = {"usps": 7291, "satimage": 3104, "letter": 15000, "dna": 1400}

BASELINES = {
    "rf": "Breiman RF (sklearn)",
    "et_sqrt": "ERT-sqrt (sklearn ExtraTrees, max_features='sqrt')",
    "et_1": "ERT-1 (sklearn ExtraTrees, max_features=1)",
}
SHORT = {"mf": "MF", "rf": "RF", "et_sqrt": "ERT-sqrt", "et_1": "ERT-1", "amf": "AMF"}
COLORS = {"mf": "tab:red", "rf": "tab:blue", "et_sqrt": "tab:green", "et_1": "tab:olive", "amf": "tab:purple"}

LOG_EPS = 1e-15  # probability floor used for the log loss of the Python-side methods

CURVE_KEYS = ["n_train", "n_test", "trees", "steps", "depth_mean", "depth_std", "n_nodes",
              "bytes_per_node", "model_bytes"]
STEP_KEYS = ["n_seen", "fraction", "accuracy", "log_loss", "train_seconds", "predict_seconds"]
EVAL_KEYS = ["accuracy", "log_loss", "train_seconds", "predict_seconds", "n_train", "n_test", "trees"]


def log(msg: str) -> None:
    print(f"[{_dt.datetime.now().strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------- arguments

def csv_list(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Mondrian forest vs RF / ExtraTrees / AMF on usps, satimage, letter, dna "
                    "(Lakshminarayanan et al. 2014, section 7).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--datasets", default=",".join(ALL_DATASETS),
                   help="comma-separated subset of " + ",".join(ALL_DATASETS))
    p.add_argument("--seeds", type=int, default=1,
                   help="number of random initialisations; seeds 1..N are used (the paper used 5)")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                   help="directory with {name}_{train,test}.csv[.gz] (default: ../shared/data/"
                        "classification next to the repository root)")
    p.add_argument("--mondrian", type=Path, default=DEFAULT_BINARY,
                   help="path to the mondrian CLI binary (default: target/release/mondrian in the repo)")
    p.add_argument("--out", type=Path, default=None,
                   help=f"output directory (default: {DEFAULT_OUT.relative_to(REPO_ROOT)}, or "
                        f"{DEFAULT_QUICK_OUT.relative_to(REPO_ROOT)} with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="tiny smoke run: subsample to 400 train / 300 test points, 10 batches, "
                        "10 trees; numbers are meaningless")
    p.add_argument("--full-rf-refit", default=",".join(DEFAULT_FULL_RF),
                   help="datasets on which RF is refitted at ALL mini-batch steps (honest total of the "
                        "refit protocol); 'all' or 'none' also accepted. Elsewhere the total is "
                        "interpolated from the evaluated steps and marked as an estimate")
    p.add_argument("--eval-percents", default=",".join(map(str, DEFAULT_PERCENTS)),
                   help="percent of the training data at which the refitted baselines and AMF are "
                        "evaluated (100 is always added)")
    p.add_argument("--batches", type=int, default=None, help="number of mini-batches (default 100; 10 with --quick)")
    p.add_argument("--trees", type=int, default=None,
                   help="trees for MF and the sklearn baselines (default 100; 10 with --quick)")
    p.add_argument("--amf-trees", type=int, default=10, help="n_estimators of river AMFClassifier")
    p.add_argument("--amf-test-subsample", type=int, default=500,
                   help="size of the fixed random test subsample used for AMF at intermediate steps")
    p.add_argument("--river-max-points", default="",
                   help="cap the AMF stream at the first N shuffled points: 'N' for all datasets or "
                        "'usps=N,letter=M'")
    p.add_argument("--river-time-budget", type=float, default=600.0,
                   help="stop the AMF stream once its cumulative learn time exceeds this many seconds "
                        "(recorded as a cap in the outputs); 0 disables")
    p.add_argument("--no-rescale", action="store_true",
                   help="do not min-max rescale features to [0,1] (the paper rescales; trees are "
                        "invariant, MF split-dimension choice and AMF are not)")
    p.add_argument("--max-train", type=int, default=None, help="subsample the training set (debugging)")
    p.add_argument("--max-test", type=int, default=None, help="subsample the test set (debugging)")
    p.add_argument("--curve-threads", type=int, default=None,
                   help="if set, pass --threads N to `mondrian curve` (default: CLI's own default)")
    p.add_argument("--mf-timeout", type=float, default=None, help="timeout in seconds per mondrian CLI call")
    p.add_argument("--skip-mondrian", action="store_true", help="do not run the mondrian CLI")
    p.add_argument("--skip-baselines", action="store_true", help="do not run the sklearn baselines")
    p.add_argument("--skip-amf", action="store_true", help="do not run river AMF")
    p.add_argument("--summarize-only", action="store_true",
                   help="only rebuild summary.md and the plots from OUT/results.json")
    a = p.parse_args(argv)

    a.datasets = csv_list(a.datasets)
    bad = [d for d in a.datasets if d not in ALL_DATASETS]
    if bad:
        p.error(f"unknown dataset(s) {bad}; choose from {ALL_DATASETS}")
    if a.seeds < 1:
        p.error("--seeds must be >= 1")
    frr = a.full_rf_refit.strip().lower()
    a.full_rf_refit = (set(ALL_DATASETS) if frr == "all" else set() if frr in ("none", "")
                       else set(csv_list(frr)))
    a.eval_percents = sorted({float(x) for x in csv_list(a.eval_percents)} | {100.0})
    if any(not (0 < x <= 100) for x in a.eval_percents):
        p.error("--eval-percents must be in (0, 100]")
    if a.quick:
        a.batches = a.batches or 10
        a.trees = a.trees or 10
        a.max_train = a.max_train or 400
        a.max_test = a.max_test or 300
    a.batches = a.batches or 100
    a.trees = a.trees or 100
    if a.batches < 1:
        p.error("--batches must be >= 1")
    caps: dict[str, int] = {}
    for item in csv_list(a.river_max_points):
        if "=" in item:
            k, v = item.split("=", 1)
            caps[k.strip()] = int(v)
        else:
            for d in ALL_DATASETS:
                caps[d] = int(item)
    a.river_max_points = caps
    if a.out is None:
        a.out = DEFAULT_QUICK_OUT if a.quick else DEFAULT_OUT
    a.out = a.out.resolve()
    a.data_dir = a.data_dir.resolve()
    a.mondrian = a.mondrian.resolve() if (os.sep in str(a.mondrian) or a.mondrian.exists()) else a.mondrian
    return a


# ----------------------------------------------------------------------------- data

def find_file(data_dir: Path, name: str, split: str) -> Path:
    for ext in (".csv", ".csv.gz"):
        f = data_dir / f"{name}_{split}{ext}"
        if f.exists():
            return f
    raise FileNotFoundError(f"no {name}_{split}.csv or {name}_{split}.csv.gz in {data_dir}")


def load_csv(path: Path):
    """CSV with one header row, label (int 0..K-1) in the last column."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        header = f.readline().strip().split(",")
    arr = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    X = np.ascontiguousarray(arr[:, :-1])
    yf = arr[:, -1]
    y = yf.astype(np.int64)
    if not np.array_equal(y, yf) or y.min() < 0:
        raise ValueError(f"{path}: labels in the last column must be non-negative integers")
    return header, X, y


def write_csv(path: Path, header, X, y) -> None:
    """Plain CSV, header row, label last; features with 9 significant digits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(",".join(header) + "\n")
        for row, lab in zip(X.tolist(), y.tolist()):
            f.write(",".join(f"{v:.9g}" for v in row))
            f.write(f",{lab}\n")
    tmp.replace(path)


class Dataset:
    def __init__(self, name, args):
        self.name = name
        self.train_src = find_file(args.data_dir, name, "train")
        self.test_src = find_file(args.data_dir, name, "test")
        self.header, X, y = load_csv(self.train_src)
        _, Xt, yt = load_csv(self.test_src)
        if X.shape[1] != Xt.shape[1]:
            raise ValueError(f"{name}: train has {X.shape[1]} features, test {Xt.shape[1]}")
        self.n_train_full, self.n_test_full = len(y), len(yt)
        rng = np.random.default_rng(0)  # fixed subsample for --max-train/--max-test (not the seed)
        if args.max_train and args.max_train < len(y):
            idx = np.sort(rng.choice(len(y), args.max_train, replace=False))
            X, y = X[idx], y[idx]
        if args.max_test and args.max_test < len(yt):
            idx = np.sort(rng.choice(len(yt), args.max_test, replace=False))
            Xt, yt = Xt[idx], yt[idx]
        self.rescaled = not args.no_rescale
        if self.rescaled:
            # Paper section 7: each feature rescaled to [0,1] with (x - min) / (max - min).
            # min/max from the training set only (test values may fall slightly outside).
            lo, hi = X.min(axis=0), X.max(axis=0)
            rng_ = np.where(hi > lo, hi - lo, 1.0)
            X = (X - lo) / rng_
            Xt = (Xt - lo) / rng_
        self.X, self.y, self.Xt, self.yt = X, y, Xt, yt
        self.n_classes = int(max(y.max(), yt.max())) + 1
        self.n_features = X.shape[1]
        self.subsampled = len(y) != self.n_train_full or len(yt) != self.n_test_full
        # Files handed to the mondrian CLI: plain CSV, same preprocessing as the Python side.
        if not self.rescaled and not self.subsampled and self.train_src.suffix != ".gz":
            self.train_csv, self.test_csv = self.train_src, self.test_src
        else:
            tag = ("scaled01v1" if self.rescaled else "raw") + (
                f"_sub{len(y)}x{len(yt)}" if self.subsampled else "")
            self.train_csv = CACHE_DIR / f"{name}_train_{tag}.csv"
            self.test_csv = CACHE_DIR / f"{name}_test_{tag}.csv"
            for path, A, b, src in ((self.train_csv, X, y, self.train_src), (self.test_csv, Xt, yt, self.test_src)):
                if not path.exists() or path.stat().st_mtime < src.stat().st_mtime:
                    write_csv(path, self.header, A, b)
            # The Python-side methods read exactly the values the CLI reads (9 significant digits).
            _, X, y = load_csv(self.train_csv)
            _, Xt, yt = load_csv(self.test_csv)
            self.X, self.y, self.Xt, self.yt = X, y, Xt, yt

    def info(self):
        return dict(name=self.name, train_source=str(self.train_src), test_source=str(self.test_src),
                    train_csv_for_cli=str(self.train_csv), test_csv_for_cli=str(self.test_csv),
                    n_train=int(len(self.y)), n_test=int(len(self.yt)),
                    n_train_file=self.n_train_full, n_test_file=self.n_test_full,
                    n_features=int(self.n_features), n_classes=int(self.n_classes),
                    rescaled_01=self.rescaled, subsampled=self.subsampled,
                    class_counts_train=np.bincount(self.y, minlength=self.n_classes).tolist())


def batch_ends(n: int, n_batches: int) -> list[int]:
    """Cumulative sizes after each mini-batch: floor(N/B) per batch, the last takes the remainder."""
    b = n // n_batches
    if b < 1:
        raise ValueError(f"{n} training points cannot be split into {n_batches} non-empty mini-batches")
    return [k * b for k in range(1, n_batches)] + [n]


def eval_steps(percents, n_batches: int) -> list[int]:
    """1-based mini-batch indices at which the subset evaluations happen."""
    return sorted({min(n_batches, max(1, int(round(p * n_batches / 100.0)))) for p in percents} | {n_batches})


def score(proba_full: np.ndarray, y: np.ndarray):
    """accuracy and mean log loss (probabilities floored at LOG_EPS) from a (n, K) matrix."""
    acc = float(np.mean(proba_full.argmax(axis=1) == y))
    s = proba_full.sum(axis=1, keepdims=True)
    s[s == 0] = 1.0
    p_true = (proba_full / s)[np.arange(len(y)), y]
    ll = float(np.mean(-np.log(np.maximum(p_true, LOG_EPS))))
    return acc, ll


# ----------------------------------------------------------------------------- mondrian CLI

def check_binary(path: Path) -> str | None:
    p = Path(path)
    if p.is_file() and os.access(p, os.X_OK):
        return None
    found = shutil.which(str(path)) if os.sep not in str(path) else None
    if found:
        return None
    return (f"error: mondrian binary not found or not executable: {path}\n"
            f"  Build it first (from {REPO_ROOT}): cargo build --release\n"
            f"  or point to it with --mondrian PATH, or run only the baselines with --skip-mondrian.")


def run_cli(cmd: list[str], expect: list[str], timeout):
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(command=shlex.join(cmd), error=f"timed out after {timeout} s")
    wall = time.perf_counter() - t0
    rec = dict(command=shlex.join(cmd), wall_seconds=wall, returncode=proc.returncode)
    if proc.stderr.strip():
        rec["stderr_tail"] = proc.stderr.strip()[-2000:]
    if proc.returncode != 0:
        rec["error"] = f"exit status {proc.returncode}"
        return rec
    out = proc.stdout.strip()
    obj = None
    try:
        obj = json.loads(out)
    except json.JSONDecodeError:
        for line in reversed(out.splitlines()):  # tolerate log lines before the JSON object
            try:
                obj = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    if not isinstance(obj, dict):
        rec["error"] = "stdout is not a JSON object"
        rec["stdout_head"] = out[:2000]
        return rec
    missing = [k for k in expect if k not in obj]
    if missing:
        rec["warning"] = f"missing keys {missing}"
    rec["result"] = obj
    return rec


def run_mondrian(ds: Dataset, seed: int, args) -> dict:
    b = str(args.mondrian)
    common = ["--train", str(ds.train_csv), "--test", str(ds.test_csv), "--trees", str(args.trees),
              "--lifetime", "inf", "--seed", str(seed)]
    curve = [b, "curve", "--train", str(ds.train_csv), "--test", str(ds.test_csv),
             "--batches", str(args.batches), "--trees", str(args.trees), "--lifetime", "inf",
             "--seed", str(seed), "--json"]
    if args.curve_threads:
        curve += ["--threads", str(args.curve_threads)]
    jobs = {
        "curve": (curve, CURVE_KEYS),
        "eval_online": ([b, "eval", *common, "--online", "--json"], EVAL_KEYS),
        "eval_batch": ([b, "eval", *common, "--json"], EVAL_KEYS),
        "eval_batch_1thread": ([b, "eval", *common, "--threads", "1", "--json"], EVAL_KEYS),
    }
    res = {}
    for key, (cmd, keys) in jobs.items():
        log(f"  MF {key}: {shlex.join(cmd)}")
        rec = run_cli(cmd, keys, args.mf_timeout)
        if "error" in rec:
            log(f"  !! MF {key} failed: {rec['error']} {rec.get('stderr_tail', '')[-500:]}")
        else:
            r = rec["result"]
            if key == "curve":
                steps = r.get("steps") or []
                probs = []
                if len(steps) != args.batches:
                    probs.append(f"{len(steps)} steps, expected {args.batches}")
                if steps and steps[-1].get("n_seen") != len(ds.y):
                    probs.append(f"last n_seen {steps[-1].get('n_seen')} != n_train {len(ds.y)}")
                if steps and any(k not in steps[0] for k in STEP_KEYS):
                    probs.append(f"step keys {sorted(steps[0])} lack some of {STEP_KEYS}")
                if probs:
                    rec["warning"] = "; ".join(filter(None, [rec.get("warning"), *probs]))
                if steps:
                    log(f"     final acc {steps[-1].get('accuracy'):.4f}, cumulative train "
                        f"{steps[-1].get('train_seconds'):.2f}s (wall {rec['wall_seconds']:.1f}s)")
            else:
                log(f"     acc {r.get('accuracy'):.4f}, train {r.get('train_seconds'):.3f}s, "
                    f"predict {r.get('predict_seconds'):.3f}s")
            if rec.get("warning"):
                log(f"  !! MF {key}: {rec['warning']}")
        res[key] = rec
    return res


# ----------------------------------------------------------------------------- baselines

def make_baseline(name: str, trees: int, seed: int):
    from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
    if name == "rf":
        return RandomForestClassifier(n_estimators=trees, n_jobs=1, random_state=seed)
    if name == "et_sqrt":
        return ExtraTreesClassifier(n_estimators=trees, max_features="sqrt", n_jobs=1, random_state=seed)
    if name == "et_1":
        return ExtraTreesClassifier(n_estimators=trees, max_features=1, n_jobs=1, random_state=seed)
    raise KeyError(name)


def full_proba(model, X, K):
    p = model.predict_proba(X)
    out = np.zeros((len(X), K))
    out[:, model.classes_.astype(int)] = p
    return out


def cumulative_refit_seconds(ends: list[int], records: list[dict]) -> tuple[list[float], bool]:
    """Cumulative fit time of refitting at every one of the mini-batch steps.
    Measured if every step was fitted; otherwise fit time is interpolated linearly in n
    between the measured steps (anchored at t(0)=0) and the result is an estimate."""
    measured = {r["step"]: r["fit_seconds"] for r in records}
    if all(s in measured for s in range(1, len(ends) + 1)):
        per = [measured[s] for s in range(1, len(ends) + 1)]
        return np.cumsum(per).tolist(), True
    ns = [0] + [r["n_seen"] for r in records]
    ts = [0.0] + [r["fit_seconds"] for r in records]
    per = [measured.get(s, float(np.interp(n, ns, ts))) for s, n in enumerate(ends, start=1)]
    return np.cumsum(per).tolist(), False


def run_baselines(ds: Dataset, seed: int, args) -> dict:
    perm = np.random.default_rng(seed).permutation(len(ds.y))
    X, y = ds.X[perm], ds.y[perm]
    ends = batch_ends(len(y), args.batches)
    sub = eval_steps(args.eval_percents, args.batches)
    full_rf = ds.name in args.full_rf_refit
    rf_steps = list(range(1, args.batches + 1)) if full_rf else sub
    recs = {m: [] for m in BASELINES}
    t_start = time.perf_counter()
    for step in sorted(set(sub) | set(rf_steps)):
        n = ends[step - 1]
        for m in BASELINES:
            if (m == "rf" and step not in rf_steps) or (m != "rf" and step not in sub):
                continue
            model = make_baseline(m, args.trees, seed)
            t0 = time.perf_counter()
            model.fit(X[:n], y[:n])
            fit_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            proba = full_proba(model, ds.Xt, ds.n_classes)
            pred_s = time.perf_counter() - t0
            acc, ll = score(proba, ds.yt)
            recs[m].append(dict(step=step, n_seen=n, fraction=n / len(y), accuracy=acc, log_loss=ll,
                                fit_seconds=fit_s, predict_seconds=pred_s, in_subset=step in sub))
        if step in sub:
            log(f"  baselines step {step:3d}/{args.batches} n={n:6d}: " + ", ".join(
                f"{SHORT[m]} {recs[m][-1]['accuracy']:.4f} ({recs[m][-1]['fit_seconds']:.2f}s)"
                for m in BASELINES if recs[m] and recs[m][-1]["step"] == step)
                + f"  [elapsed {time.perf_counter() - t_start:.0f}s]")
    out = {"permutation": "numpy.random.default_rng(seed).permutation(n_train)", "batch_ends": ends,
           "subset_steps": sub, "rf_all_steps": full_rf, "methods": {}}
    for m, rs in recs.items():
        cum, measured = cumulative_refit_seconds(ends, rs)
        out["methods"][m] = dict(
            label=BASELINES[m], records=rs, final=rs[-1],
            refit_protocol_total_seconds=cum[-1], refit_protocol_total_measured=measured,
            refit_protocol_cumulative_seconds=cum,
            fit_seconds_at_evaluated_steps_total=float(sum(r["fit_seconds"] for r in rs)))
    out["wall_seconds"] = time.perf_counter() - t_start
    return out


# ----------------------------------------------------------------------------- river AMF

def run_amf(ds: Dataset, seed: int, args) -> dict:
    from river.forest import AMFClassifier
    perm = np.random.default_rng(seed).permutation(len(ds.y))
    names = ds.header[:-1]
    Xs = ds.X[perm].tolist()
    ys = ds.y[perm].tolist()
    train_dicts = [dict(zip(names, row)) for row in Xs]  # built outside the timed loop
    test_dicts = [dict(zip(names, row)) for row in ds.Xt.tolist()]
    sub_idx = np.sort(np.random.default_rng(0).choice(
        len(ds.yt), min(args.amf_test_subsample, len(ds.yt)), replace=False))
    ends = batch_ends(len(ys), args.batches)
    steps = eval_steps(args.eval_percents, args.batches)
    cap_pts = args.river_max_points.get(ds.name)
    limit = min(len(ys), cap_pts) if cap_pts else len(ys)
    budget = args.river_time_budget if args.river_time_budget and args.river_time_budget > 0 else math.inf

    def evaluate(idx):
        t0 = time.perf_counter()
        probs = [model.predict_proba_one(test_dicts[i]) for i in idx]
        dt = time.perf_counter() - t0
        P = np.zeros((len(idx), ds.n_classes))
        for r, pd_ in enumerate(probs):
            for c, v in pd_.items():
                P[r, int(c)] = v
        acc, ll = score(P, ds.yt[idx])
        return acc, ll, dt

    model = AMFClassifier(n_estimators=args.amf_trees, seed=seed)
    learn_s = 0.0
    i = 0
    records = []
    cap_reason = f"--river-max-points {cap_pts}" if cap_pts and cap_pts < len(ys) else None
    t_start = time.perf_counter()
    for step in steps:
        target = min(ends[step - 1], limit)
        while i < target:
            j = min(target, i + 256)
            t0 = time.perf_counter()
            for k in range(i, j):
                model.learn_one(train_dicts[k], ys[k])
            learn_s += time.perf_counter() - t0
            i = j
            if learn_s > budget and i < len(ys):
                cap_reason = f"time budget {budget:g} s (--river-time-budget)"
                limit = i
                break
        if i < ends[step - 1]:
            break  # capped before reaching this step
        final = i == len(ys)
        idx = np.arange(len(ds.yt)) if final else sub_idx
        acc, ll, pred_s = evaluate(idx)
        records.append(dict(step=step, n_seen=i, fraction=i / len(ys), accuracy=acc, log_loss=ll,
                            learn_seconds=learn_s, predict_seconds=pred_s, n_test_evaluated=len(idx),
                            full_test=bool(final)))
        log(f"  AMF step {step:3d} n={i:6d}: acc {acc:.4f} on {len(idx)} test pts, "
            f"learn {learn_s:.1f}s")
    capped = i < len(ys)
    if capped:
        acc, ll, pred_s = evaluate(np.arange(len(ds.yt)))
        records.append(dict(step=None, n_seen=i, fraction=i / len(ys), accuracy=acc, log_loss=ll,
                            learn_seconds=learn_s, predict_seconds=pred_s, n_test_evaluated=len(ds.yt),
                            full_test=True))
        log(f"  AMF CAPPED at {i}/{len(ys)} points ({cap_reason}): acc {acc:.4f} on the full test set")
    final = records[-1]
    return dict(n_estimators=args.amf_trees, settings="river.forest.AMFClassifier defaults",
                seed=seed, records=records, final=final, n_learned=i, n_train=len(ys),
                capped=capped, cap_reason=cap_reason if capped else None,
                learn_seconds=learn_s,
                throughput_points_trees_per_s=i * args.amf_trees / learn_s if learn_s > 0 else None,
                predict_seconds_full_test=final["predict_seconds"],
                test_subsample_size=int(len(sub_idx)),
                wall_seconds=time.perf_counter() - t_start)


# ----------------------------------------------------------------------------- bookkeeping

def versions() -> dict:
    v = {"python": platform.python_version()}
    for pkg in ("numpy", "scikit-learn", "river", "matplotlib", "pandas", "scipy"):
        try:
            v[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            v[pkg] = None
    return v


def machine() -> dict:
    cpu = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return dict(platform=platform.platform(), cpu=cpu, logical_cores=os.cpu_count(), memory=mem,
                hostname=platform.node())


def git_rev() -> str | None:
    try:
        rev = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (rev or "no commits") + (" (dirty)" if dirty else "")
    except Exception:
        return None


def binary_version(path) -> str | None:
    try:
        r = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=20)
        return (r.stdout.strip() or r.stderr.strip())[:200] if r.returncode == 0 else None
    except Exception:
        return None


def command_line() -> str:
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(REPO_ROOT)
        prefix = ""
        if Path.cwd().resolve() != REPO_ROOT:
            prefix = f"cd {REPO_ROOT} && "
    except ValueError:
        prefix = ""
    return prefix + shlex.join(["python3", str(script), *sys.argv[1:]])


def save_json(obj, path: Path) -> None:
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, default=lambda o: o.item() if hasattr(o, "item") else str(o))
    tmp.replace(path)


# ----------------------------------------------------------------------------- summary

def _ms(vals, fmt="{:.4f}"):
    vals = [v for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return "–"
    if len(vals) == 1:
        return fmt.format(vals[0])
    return f"{fmt.format(float(np.mean(vals)))} ± {fmt.format(float(np.std(vals, ddof=1)))}"


def _mean(vals):
    vals = [v for v in vals if v is not None]
    return float(np.mean(vals)) if vals else None


def _ratio(a, b, fmt="{:.2f}"):
    if a is None or b is None or b == 0:
        return "–"
    return fmt.format(a / b) + "×"


def _get(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _fmt_s(v):
    if v is None:
        return "–"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def dataset_summary(name: str, D: dict, meta: dict) -> list[str]:
    info = D["info"]
    seeds = D.get("seeds", {})
    S = list(seeds.values())
    L = [f"## {name}", ""]
    L.append(f"N_train = {info['n_train']}, N_test = {info['n_test']}, D = {info['n_features']}, "
             f"K = {info['n_classes']}; seeds: {', '.join(seeds)}"
             + ("; **subsampled (quick/debug run)**" if info.get("subsampled") else ""))
    if name == "satimage":
        L.append("")
        L.append(f"Note: our satimage training file has {info['n_train_file']} rows (LIBSVM tr+val), "
                 f"whereas the paper used the {PAPER_N_TRAIN['satimage']}-row `tr` subset.")
    L.append("")

    def mf(key, *path):
        return [_get(s, "mf", key, "result", *path) for s in S]

    curve_last = [(_get(s, "mf", "curve", "result", "steps") or [{}])[-1] for s in S]
    bl = lambda m, *p: [_get(s, "baselines", "methods", m, *p) for s in S]
    amf = lambda *p: [_get(s, "amf", *p) for s in S]
    amf_capped = any(a for a in amf("capped"))

    # --- accuracy table
    L += ["### Final test accuracy (100 % of the training data)", "",
          "| method | accuracy | log loss | train s | predict s (test set) |",
          "|---|---|---|---|---|"]
    rows = [
        (f"MF, {meta['config']['batches']} mini-batches (`curve`, last step)", [c.get("accuracy") for c in curve_last],
         [c.get("log_loss") for c in curve_last], [c.get("train_seconds") for c in curve_last],
         [c.get("predict_seconds") for c in curve_last]),
        ("MF online, one point at a time (`eval --online`)", mf("eval_online", "accuracy"),
         mf("eval_online", "log_loss"), mf("eval_online", "train_seconds"), mf("eval_online", "predict_seconds")),
        ("MF batch (`eval`, CLI default threads)", mf("eval_batch", "accuracy"), mf("eval_batch", "log_loss"),
         mf("eval_batch", "train_seconds"), mf("eval_batch", "predict_seconds")),
        ("MF batch, 1 thread (`eval --threads 1`)", mf("eval_batch_1thread", "accuracy"),
         mf("eval_batch_1thread", "log_loss"), mf("eval_batch_1thread", "train_seconds"),
         mf("eval_batch_1thread", "predict_seconds")),
    ]
    for m in BASELINES:
        rows.append((BASELINES[m] + ", n_jobs=1", bl(m, "final", "accuracy"), bl(m, "final", "log_loss"),
                     bl(m, "final", "fit_seconds"), bl(m, "final", "predict_seconds")))
    n_amf = _mean(amf("n_learned"))
    amf_label = f"AMF (river, {meta['config']['amf_trees']} trees, defaults)"
    if amf_capped:
        amf_label += f" — **stream capped at {n_amf:.0f} of {info['n_train']} points**"
    rows.append((amf_label, amf("final", "accuracy"), amf("final", "log_loss"), amf("learn_seconds"),
                 amf("predict_seconds_full_test")))
    for lab, a, ll, tr, pr in rows:
        L.append(f"| {lab} | {_ms(a)} | {_ms(ll, '{:.3f}')} | {_ms(tr, '{:.3g}')} | {_ms(pr, '{:.3g}')} |")
    L.append("")

    # --- speed table
    mf_on_tp = [(_get(s, "mf", "eval_online", "result", "n_train") or 0) *
                (_get(s, "mf", "eval_online", "result", "trees") or 0) /
                _get(s, "mf", "eval_online", "result", "train_seconds")
                if _get(s, "mf", "eval_online", "result", "train_seconds") else None for s in S]
    amf_tp = amf("throughput_points_trees_per_s")
    mf_proto = [c.get("train_seconds") for c in curve_last]
    rf_proto = bl("rf", "refit_protocol_total_seconds")
    rf_measured = all(bl("rf", "refit_protocol_total_measured") or [False])
    mf_b1 = mf("eval_batch_1thread", "train_seconds")
    et1_fit = bl("et_1", "final", "fit_seconds")
    mf_p1 = mf("eval_batch_1thread", "predict_seconds")
    et1_pred = bl("et_1", "final", "predict_seconds")
    rf_pred = bl("rf", "final", "predict_seconds")
    nb = meta["config"]["batches"]
    L += ["### Speed", "",
          "| comparison | MF | other | ratio |", "|---|---|---|---|",
          f"| learn throughput, points×trees/s: MF online (`eval --online`) vs AMF"
          f"{' (capped stream)' if amf_capped else ''} | {_ms(mf_on_tp, '{:.3g}')} | {_ms(amf_tp, '{:.3g}')} | "
          f"MF/AMF = {_ratio(_mean(mf_on_tp), _mean(amf_tp))} |",
          f"| {nb}-mini-batch protocol, total training s: MF (`curve`, cumulative) vs RF refitted from scratch "
          f"at all {nb} steps ({'measured' if rf_measured else '**estimated** by interpolating the refit times at the evaluated steps'}) "
          f"| {_ms(mf_proto, '{:.3g}')} | {_ms(rf_proto, '{:.3g}')} | RF/MF = {_ratio(_mean(rf_proto), _mean(mf_proto))} |",
          f"| batch fit on 100 % of the data, 1 thread, s: MF (`eval --threads 1`) vs ERT-1 (n_jobs=1) "
          f"| {_ms(mf_b1, '{:.3g}')} | {_ms(et1_fit, '{:.3g}')} | MF/ERT-1 = {_ratio(_mean(mf_b1), _mean(et1_fit))} |",
          f"| predict the test set, s: MF (`eval --threads 1`) vs ERT-1 `predict_proba` (n_jobs=1) "
          f"| {_ms(mf_p1, '{:.3g}')} | {_ms(et1_pred, '{:.3g}')} | MF/ERT-1 = {_ratio(_mean(mf_p1), _mean(et1_pred))} |",
          f"| predict the test set, s: MF (`eval --threads 1`) vs RF `predict_proba` (n_jobs=1) "
          f"| {_ms(mf_p1, '{:.3g}')} | {_ms(rf_pred, '{:.3g}')} | MF/RF = {_ratio(_mean(mf_p1), _mean(rf_pred))} |",
          ""]
    et_tot = {m: bl(m, "refit_protocol_total_seconds") for m in BASELINES}
    L.append("Refit-protocol totals (sum of the fit times of refitting at every one of the "
             f"{nb} steps): " + "; ".join(
                 f"{SHORT[m]} {_ms(v, '{:.3g}')} s ({'measured' if all(bl(m, 'refit_protocol_total_measured') or [False]) else 'estimated'})"
                 for m, v in et_tot.items()) + ".")
    L.append("")

    # --- tree statistics
    pd_ = PAPER_DEPTH.get(name)
    cr = lambda k: [_get(s, "mf", "curve", "result", k) for s in S]
    dm, dsd = cr("depth_mean"), cr("depth_std")
    L += ["### MF tree statistics (after 100 % of the data, `curve`)", "",
          "| quantity | ours | paper (Table 1) |", "|---|---|---|",
          f"| depth (CLI `depth_mean` ± `depth_std`) | {_fmt_depth(dm, dsd)} | "
          f"{f'{pd_[0]} ± {pd_[1]}' if pd_ else '–'}"
          f"{f' (N_train = {PAPER_N_TRAIN[name]})' if name == 'satimage' else ''} |",
          f"| nodes (whole forest) | {_ms(cr('n_nodes'), '{:.0f}')} | – |",
          f"| bytes per node | {_ms(cr('bytes_per_node'), '{:.1f}')} | – |",
          f"| model size | {_ms([v / 2**20 if v else None for v in cr('model_bytes')], '{:.1f}')} MiB | – |",
          ""]

    # --- accuracy vs fraction
    steps = D.get("_agg", {})
    if steps:
        L += ["### Test accuracy vs fraction of training data", "",
              "| fraction | n seen | " + " | ".join(SHORT[m] for m in steps["methods"]) + " |",
              "|---|---|" + "---|" * len(steps["methods"])]
        for row in steps["table"]:
            L.append(f"| {row['fraction']:.0%} | {row['n_seen']} | " +
                     " | ".join("–" if row.get(m) is None else f"{row[m]:.4f}" for m in steps["methods"]) + " |")
        L.append("")
        if any(s.get("amf") for s in S) and meta["config"]["amf_test_subsample"] < info["n_test"]:
            L.append(f"AMF at intermediate fractions is scored on a fixed random subsample of "
                     f"{meta['config']['amf_test_subsample']} test points; at the end on the full test set.")
            L.append("")

    errs = []
    for sd, s in seeds.items():
        for k, rec in (s.get("mf") or {}).items():
            if rec.get("error"):
                errs.append(f"seed {sd}, MF {k}: {rec['error']} (`{rec['command']}`)")
            if rec.get("warning"):
                errs.append(f"seed {sd}, MF {k}: warning: {rec['warning']}")
        if _get(s, "amf", "capped"):
            errs.append(f"seed {sd}: AMF stream capped at {s['amf']['n_learned']} of {s['amf']['n_train']} "
                        f"points ({s['amf']['cap_reason']}); its final accuracy and throughput refer to that prefix.")
    if errs:
        L += ["Problems:", ""] + [f"- {e}" for e in errs] + [""]
    return L


def _fmt_depth(m, s):
    m = [v for v in m if v is not None]
    s = [v for v in s if v is not None]
    if not m:
        return "–"
    return f"{np.mean(m):.1f} ± {np.mean(s):.1f}" + (f" (mean over {len(m)} seeds)" if len(m) > 1 else "")


def aggregate_curves(D: dict, n_batches: int) -> dict:
    """Mean over seeds of accuracy and cumulative training time at each evaluated step."""
    S = list(D.get("seeds", {}).values())
    curves = {}
    # MF: every step of `curve`
    pts = {}
    for s in S:
        for st in _get(s, "mf", "curve", "result", "steps") or []:
            pts.setdefault(st.get("n_seen"), []).append((st.get("fraction"), st.get("accuracy"),
                                                        st.get("train_seconds")))
    if pts:
        curves["mf"] = dict(est=False, pts=[(n, _mean([v[0] for v in vs]), _mean([v[1] for v in vs]),
                                             _mean([v[2] for v in vs])) for n, vs in sorted(pts.items())])
    for m in BASELINES:
        pts, est = {}, False
        for s in S:
            bm = _get(s, "baselines", "methods", m)
            if not bm:
                continue
            cum = bm["refit_protocol_cumulative_seconds"]
            est |= not bm["refit_protocol_total_measured"]
            for r in bm["records"]:
                pts.setdefault(r["n_seen"], []).append((r["fraction"], r["accuracy"], cum[r["step"] - 1]))
        if pts:
            curves[m] = dict(est=est, pts=[(n, _mean([v[0] for v in vs]), _mean([v[1] for v in vs]),
                                            _mean([v[2] for v in vs])) for n, vs in sorted(pts.items())])
    pts = {}
    for s in S:
        for r in _get(s, "amf", "records") or []:
            pts.setdefault(r["n_seen"], []).append((r["fraction"], r["accuracy"], r["learn_seconds"]))
    if pts:
        curves["amf"] = dict(est=False, pts=[(n, _mean([v[0] for v in vs]), _mean([v[1] for v in vs]),
                                              _mean([v[2] for v in vs])) for n, vs in sorted(pts.items())])
    # table at the fractions where the baselines were evaluated
    sub_ns = sorted({r["n_seen"] for s in S for m in BASELINES
                     for r in (_get(s, "baselines", "methods", m, "records") or []) if r.get("in_subset", True)})
    if not sub_ns and "mf" in curves:
        sub_ns = [p[0] for p in curves["mf"]["pts"]]
    amf_ns = {p[0] for p in curves.get("amf", {}).get("pts", [])}
    all_ns = sorted(set(sub_ns) | amf_ns)
    n_train = D["info"]["n_train"]
    table = []
    for n in all_ns:
        row = dict(n_seen=n, fraction=n / n_train)
        for m, c in curves.items():
            hit = [p for p in c["pts"] if p[0] == n]
            row[m] = hit[0][2] if hit else None
        table.append(row)
    return dict(curves=curves, methods=list(curves), table=table)


def make_plots(results: dict, out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [d for d in results["datasets"] if results["datasets"][d].get("_agg", {}).get("curves")]
    if not names:
        return []
    files = []
    for kind in ("fraction", "time"):
        fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
        for ax, name in zip(axes[0], names):
            curves = results["datasets"][name]["_agg"]["curves"]
            for m, c in curves.items():
                pts = c["pts"]
                xs = [p[1] if kind == "fraction" else p[3] for p in pts]
                ys = [p[2] for p in pts]
                keep = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None and
                        (kind == "fraction" or x > 0)]
                if not keep:
                    continue
                xs, ys = zip(*keep)
                label = SHORT[m]
                style = "-"
                if kind == "time" and c["est"]:
                    style, label = "--", label + " (est. time)"
                marker = None if len(xs) > 20 else "o"
                ax.plot(xs, ys, style, color=COLORS[m], marker=marker, ms=3.5, lw=1.6, label=label)
            ax.set_title(name)
            ax.set_ylabel("test accuracy")
            ax.grid(alpha=0.3)
            if kind == "fraction":
                ax.set_xlabel("fraction of training data")
                ax.set_xlim(0, 1.02)
            else:
                ax.set_xscale("log")
                ax.set_xlabel("cumulative training time (s, log scale)")
            ax.legend(fontsize=7, loc="lower right")
        mode = " (QUICK SMOKE RUN — not a result)" if results["meta"]["config"].get("quick") else ""
        fig.suptitle(("Test accuracy vs fraction of training data" if kind == "fraction" else
                      "Test accuracy vs cumulative training time") + mode, fontsize=10)
        fig.tight_layout()
        fname = "accuracy_vs_fraction.png" if kind == "fraction" else "accuracy_vs_time.png"
        fig.savefig(out / fname, dpi=120)
        plt.close(fig)
        files.append(fname)
    return files


def write_summary(results: dict, out: Path) -> None:
    meta = results["meta"]
    cfg = meta["config"]
    for name, D in results["datasets"].items():
        D["_agg"] = aggregate_curves(D, cfg["batches"])
    plots = make_plots(results, out)
    mach = meta["machine"]
    v = meta["versions"]
    L = ["# Mondrian forest classification experiment",
         "",
         "Reproduction of Lakshminarayanan, Roy & Teh (2014), *Mondrian Forests: Efficient Online Random "
         "Forests*, section 7 and Figure 3.",
         ""]
    if cfg.get("quick"):
        L += ["> **QUICK SMOKE RUN**: subsampled data, few trees and batches. The numbers below only show "
              "that the pipeline works; they are not results.", ""]
    L += ["Produced by:", "", "```", meta["command"], "```", "",
          f"- machine: {mach['cpu']}, {mach['logical_cores']} logical cores (2 cores, shared with other work), "
          f"{mach['memory']} RAM, {mach['platform']}",
          f"- software: Python {v['python']}, numpy {v['numpy']}, scikit-learn {v['scikit-learn']}, "
          f"river {v['river']}, matplotlib {v['matplotlib']}; mondrian binary `{cfg['mondrian']}`"
          f"{' (' + meta['mondrian_version'] + ')' if meta.get('mondrian_version') else ''}; repo {meta.get('git')}",
          f"- started {meta['started']}, finished {meta.get('finished', '(unfinished)')}, "
          f"wall time {meta.get('wall_seconds', float('nan')) / 60:.1f} min",
          "",
          "## Protocol", "",
          f"- Seeds 1..{cfg['seeds']} (numbers are mean ± sample std over seeds when there is more than one; "
          "the paper used 5).",
          f"- The training set is shuffled with the seed and split into {cfg['batches']} mini-batches of "
          f"floor(N/{cfg['batches']}) points, the last taking the remainder. MF shuffles inside the CLI with its own "
          "RNG (`--seed S`); the Python-side methods use `numpy.random.default_rng(S).permutation(N)`: same batch "
          "sizes, different order.",
          f"- MF: `mondrian curve ... --batches {cfg['batches']} --trees {cfg['trees']} --lifetime inf` trains on "
          "batch 1 and extends the forest online with each later batch, scoring the test set after each; "
          "`eval --online` feeds one point at a time through partial_fit; `eval` is a batch fit (CLI default "
          "threads) and `eval --threads 1` the single-thread batch fit"
          + (f"; `curve` was run with `--threads {cfg['curve_threads']}`" if cfg.get("curve_threads") else
             "; `curve` ran with the CLI's default thread count") + ".",
          f"- RF / ERT-sqrt / ERT-1: scikit-learn, {cfg['trees']} trees, default settings otherwise, `n_jobs=1`, "
          "`random_state=S`, refitted from scratch on the cumulative data. Evaluated at "
          f"{', '.join(f'{p:g}' for p in cfg['eval_percents'])} % of the training data; RF additionally at all "
          f"{cfg['batches']} steps on: {', '.join(sorted(cfg['full_rf_refit'])) or 'none'} (there the refit-protocol "
          "total is measured; elsewhere it is estimated by linear interpolation of the measured fit times in n).",
          f"- AMF: `river.forest.AMFClassifier(n_estimators={cfg['amf_trees']}, seed=S)`, default settings, "
          "`learn_one` over the shuffled stream (features as dicts, built outside the timed loop), "
          "`predict_proba_one` on the test set; intermediate accuracies on a fixed random "
          f"{cfg['amf_test_subsample']}-point test subsample, the final one on the full test set. Throughput = "
          "points × trees / cumulative learn_one seconds."
          + (f" Stream time budget {cfg['river_time_budget']:.0f} s." if cfg.get("river_time_budget") else ""),
          "- Features are min–max rescaled to [0, 1] per feature with training-set min/max, as in the paper, for "
          "all methods (the CLI reads the rescaled copies in `experiments/classification/.cache/`)."
          if cfg.get("rescale", True) else "- Features used as stored (no rescaling).",
          "- Times are wall-clock seconds (`time.perf_counter` on the Python side; MF's `train_seconds` / "
          "`predict_seconds` as reported by the CLI). Training time excludes evaluation. Log loss on the Python "
          f"side floors probabilities at {LOG_EPS:g}.",
          "- Accuracy vs time plot: MF and AMF use cumulative training time; the refitted baselines use the "
          "cumulative fit time of refitting at every mini-batch up to that point (dashed = interpolated estimate).",
          "- Data: usps 7291/2007, satimage 4435/2000 (paper: 3104 train), letter 15000/5000, dna 1400/1186 "
          "(`dna_val` unused, as in the paper).",
          ""]
    for name, D in results["datasets"].items():
        L += dataset_summary(name, D, meta)
    if plots:
        L += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    (out / "summary.md").write_text("\n".join(L))
    for D in results["datasets"].values():
        D.pop("_agg", None)


# ----------------------------------------------------------------------------- main

def main(argv=None) -> int:
    args = parse_args(argv)
    res_path = args.out / "results.json"
    if args.summarize_only:
        results = json.loads(res_path.read_text())
        write_summary(results, args.out)
        log(f"wrote {args.out / 'summary.md'}")
        return 0

    if not args.skip_mondrian:
        msg = check_binary(args.mondrian)
        if msg:
            print(msg, file=sys.stderr)
            return 2
    if not args.data_dir.is_dir():
        print(f"error: data directory not found: {args.data_dir}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)

    t_all = time.perf_counter()
    results = {"meta": {
        "command": command_line(), "cwd": os.getcwd(), "argv": sys.argv,
        "started": _dt.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(), "versions": versions(), "git": git_rev(),
        "mondrian_version": None if args.skip_mondrian else binary_version(args.mondrian),
        "config": dict(datasets=args.datasets, seeds=args.seeds, seed_values=list(range(1, args.seeds + 1)),
                       data_dir=str(args.data_dir), mondrian=str(args.mondrian), quick=args.quick,
                       batches=args.batches, trees=args.trees, amf_trees=args.amf_trees,
                       amf_test_subsample=args.amf_test_subsample, eval_percents=args.eval_percents,
                       full_rf_refit=sorted(args.full_rf_refit), river_max_points=args.river_max_points,
                       river_time_budget=args.river_time_budget, rescale=not args.no_rescale,
                       max_train=args.max_train, max_test=args.max_test, curve_threads=args.curve_threads,
                       skip_mondrian=args.skip_mondrian, skip_baselines=args.skip_baselines,
                       skip_amf=args.skip_amf, log_eps=LOG_EPS),
    }, "datasets": {}}
    n_fail = 0
    for name in args.datasets:
        log(f"== {name}")
        ds = Dataset(name, args)
        D = results["datasets"][name] = {"info": ds.info(), "seeds": {}}
        log(f"   N_train={len(ds.y)} N_test={len(ds.yt)} D={ds.n_features} K={ds.n_classes} "
            f"(CLI files: {ds.train_csv.name}, {ds.test_csv.name})")
        for seed in range(1, args.seeds + 1):
            log(f"-- {name} seed {seed}")
            R = D["seeds"][str(seed)] = {}
            if not args.skip_mondrian:
                R["mf"] = run_mondrian(ds, seed, args)
                n_fail += sum(1 for r in R["mf"].values() if r.get("error"))
                save_json(results, res_path)
            if not args.skip_baselines:
                R["baselines"] = run_baselines(ds, seed, args)
                save_json(results, res_path)
            if not args.skip_amf:
                R["amf"] = run_amf(ds, seed, args)
                save_json(results, res_path)
    meta = results["meta"]
    meta["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    meta["wall_seconds"] = time.perf_counter() - t_all
    save_json(results, res_path)
    write_summary(results, args.out)
    log(f"wrote {res_path}, {args.out / 'summary.md'} and plots ({meta['wall_seconds'] / 60:.1f} min)")
    if n_fail:
        log(f"!! {n_fail} mondrian CLI call(s) failed; see results.json / summary.md")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
