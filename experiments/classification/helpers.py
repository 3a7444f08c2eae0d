"""What the classification experiment shares: its paths and names, logging, the data (CSV
loading and writing, the rescaled and subsampled `Dataset`, mini-batch ends, scoring), calls
of the mondrian CLI, and the bookkeeping of a run (versions, machine, git revision, command
line, JSON). Used by run.py, by report.py and by experiments/python_api/bench.py (which loads
this file by path)."""
from __future__ import annotations

import datetime as _dt
import gzip
import importlib.metadata
import json
import os
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
