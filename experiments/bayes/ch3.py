#!/usr/bin/env python
"""Thesis chapter 3 (top-down SMC for Bayesian decision trees), experiments E3.1-E3.6 of spec
`bayesian-trees.md` §5.2, run on `mondrian_ml.SMCTreeClassifier` and the spec's local
substitute data sets (§5.1: letter and satimage for pen-digits and magic-04, dna weakly for
madelon), each claim evaluated as a PASS/FAIL verdict on the means over seeds.

    python experiments/bayes/ch3.py              # all of E3.1-E3.6 -> results/
    python experiments/bayes/ch3.py --quick      # small settings  -> results/quick/
    python experiments/bayes/ch3.py --only e31,e36

Writes results/ch3.md (tables + verdict lines), results/ch3.json (every fit: settings, seed,
fit seconds, test mean log p(y|x), accuracy, log-evidence, posterior shape) and
results/ch3_*.png. Every fit runs on one thread (n_jobs=1, BLAS limited to one thread by
threadpoolctl), so the fit seconds of all methods are comparable. Fits are cached in a JSONL
file (--cache) so that an interrupted run resumes where it stopped.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.tree import DecisionTreeClassifier  # noqa: E402

from mondrian_ml import SMCTreeClassifier  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DATA = Path(os.environ.get("MONDRIAN_DATA", REPO.parent / "shared" / "data")) / "classification"

# The MCMC baseline (spec §3.11) and, for the E3.4 comparison, SMC from the same build:
# crates/mondrian/examples/mcmc_tree.rs, one JSON line per fit (one thread).
MCMC_BIN = Path(os.environ.get("MONDRIAN_MCMC_BIN",
                               REPO / "target" / "release" / "examples" / "mcmc_tree"))
CSV_DIR = Path(os.environ.get("BAYES_CH3_CSV", "/tmp/bayes_ch3_csv"))

# The common setup of §5.2 (α = 5, α_s = 0.95, β_s = 0.5, ESS threshold C/10, multinomial).
BASE = dict(alpha=5.0, alpha_split=0.95, beta_split=0.5, ess_threshold=0.1,
            resampler="multinomial", min_samples_split=2, island_weighting="equal")
EXPANSIONS = {"breadth_first": "node-wise (breadth-first)", "layer_wise": "layer-wise"}


# ============================================================================ bookkeeping

def log(*a):
    print(f"[{_dt.datetime.now().strftime('%H:%M:%S')}]", *a, flush=True)


def now():
    return _dt.datetime.now().isoformat(timespec="seconds")


def command_line():
    return " ".join(shlex.quote(a) for a in [Path(sys.executable).name] + sys.argv)


def versions():
    out = {"python": platform.python_version(), "machine": platform.machine(),
           "cpus": os.cpu_count()}
    for pkg in ["mondrian-ml", "numpy", "scipy", "scikit-learn", "matplotlib", "threadpoolctl"]:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    try:
        out["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                    capture_output=True, text=True).stdout.strip()
        out["git_crates_dirty"] = bool(subprocess.run(
            ["git", "status", "--porcelain", "--", "crates"], cwd=REPO, capture_output=True,
            text=True).stdout.strip())
    except OSError:
        out["git"] = None
    return out


def save_json(path, obj):
    def default(o):
        if isinstance(o, np.integer):
            return int(o)
        if isinstance(o, np.floating):
            return float(o)
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, Path):
            return str(o)
        raise TypeError(type(o))

    Path(path).write_text(json.dumps(obj, indent=1, default=default) + "\n")


def md_table(header, rows):
    lines = ["| " + " | ".join(str(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


VERDICTS = []  # (experiment, data, ok, text) for the summary table


def verdict(exp, data, ok, text):
    VERDICTS.append(dict(experiment=exp, data=data, ok=bool(ok), text=text))
    return f"- **{'PASS' if ok else 'FAIL'}** ({data}): {text}"


def ms(values, fmt="{:.3f}"):
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return "–"
    if len(v) == 1:
        return fmt.format(v[0])
    return (fmt + "±" + fmt).format(v.mean(), v.std(ddof=1))


# ============================================================================ data

def _load(name):
    arr = np.loadtxt(DATA / name, delimiter=",", skiprows=1, dtype=np.float64)
    return np.ascontiguousarray(arr[:, :-1]), arr[:, -1].astype(np.int64)


_CACHE = {}
# With a training subsample, letter's test set is also a fixed random subset (rng 1) of this size.
TEST_SUB = {"letter": 2000}


def dataset(name, subsample=None):
    """Train/test of a §5.1 substitute. Predefined splits (the data folder's, the Mondrian
    forest paper's): letter 15000/5000, satimage 4435/2000, dna 1400/1186 (dna_val unused),
    usps 7291/2007. ``subsample`` keeps a fixed random subset of the training rows (rng 0, the
    same for every seed)."""
    key = (name, subsample)
    if key not in _CACHE:
        if name == "usps":
            import gzip
            with gzip.open(DATA / "usps_train.csv.gz", "rt") as fh:
                arr = np.loadtxt(fh, delimiter=",", skiprows=1)
            Xtr, ytr = np.ascontiguousarray(arr[:, :-1]), arr[:, -1].astype(np.int64)
        else:
            Xtr, ytr = _load(f"{name}_train.csv")
        Xte, yte = _load(f"{name}_test.csv")
        if subsample is not None and subsample < len(ytr):
            idx = np.sort(np.random.default_rng(0).choice(len(ytr), subsample, replace=False))
            Xtr, ytr = np.ascontiguousarray(Xtr[idx]), ytr[idx]
            if name in TEST_SUB:  # prediction with thousands of trees is the slow part
                idx = np.sort(np.random.default_rng(1).choice(len(yte), TEST_SUB[name],
                                                              replace=False))
                Xte, yte = np.ascontiguousarray(Xte[idx]), yte[idx]
        _CACHE[key] = (Xtr, ytr, Xte, yte)
    return _CACHE[key]


def data_label(name, subsample):
    return name if subsample is None else f"{name}[{subsample}]"


# ============================================================================ fits (cached)

class Runner:
    """Runs and caches fits. A record holds the settings, fit seconds, the test mean
    log p(y|x) (natural log, per test row, spec A7), accuracy and, for SMC, log Ẑ and the
    posterior shape."""

    def __init__(self, cache_path):
        self.path = Path(cache_path)
        self.records = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                if line.strip():
                    r = json.loads(line)
                    self.records[r["key"]] = r
        self.fresh = 0

    def _store(self, rec):
        self.records[rec["key"]] = rec
        with open(self.path, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        self.fresh += 1

    def smc(self, data, subsample, seed, proposal, expansion, C, I=1, **over):
        p = dict(BASE, **over)
        key = json.dumps(["smc", data, subsample, seed, proposal, expansion, C, I,
                          sorted(p.items())])
        if key in self.records:
            return self.records[key]
        Xtr, ytr, Xte, yte = dataset(data, subsample)
        model = SMCTreeClassifier(n_particles=C, n_islands=I, proposal=proposal,
                                  expansion=expansion, random_state=seed, n_jobs=1, **p)
        t0 = time.perf_counter()
        model.fit(Xtr, ytr)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        proba = model.predict_proba(Xte)  # one pass; log p(y|x) and the argmax from it
        pred_s = time.perf_counter() - t0
        col = np.searchsorted(model.classes_, yte)
        lp = float(np.mean(np.log(proba[np.arange(len(yte)), col])))
        acc = float(np.mean(model.classes_[np.argmax(proba, axis=1)] == yte))
        s = model.summary()
        rec = dict(key=key, kind="smc", data=data, subsample=subsample, seed=seed,
                   proposal=proposal, expansion=expansion, C=C, I=I, params=p,
                   fit_s=fit_s, predict_s=pred_s, lp=lp, acc=acc,
                   log_evidence=float(model.log_evidence_), n_train=len(ytr),
                   n_trees=int(s["n_trees"]), effective_trees=float(s["effective_trees"]),
                   mean_leaves=float(s["mean_leaves"]), mean_depth=float(s["mean_depth"]),
                   truncated=bool(s["truncated"]))
        self._store(rec)
        log(f"  smc {data_label(data, subsample)} s{seed} {proposal}/{expansion} C={C} I={I} "
            f"{ {k: v for k, v in over.items()} or ''} fit {fit_s:.2f}s lp {lp:.4f} acc {acc:.4f} "
            f"logZ {rec['log_evidence']:.1f}")
        return rec

    def cart(self, data, seed, criterion, min_samples_leaf):
        key = json.dumps(["cart", data, seed, criterion, min_samples_leaf])
        if key in self.records:
            return self.records[key]
        Xtr, ytr, Xte, yte = dataset(data)
        K = int(max(ytr.max(), yte.max())) + 1
        clf = DecisionTreeClassifier(criterion=criterion, min_samples_leaf=min_samples_leaf,
                                     random_state=seed)
        t0 = time.perf_counter()
        clf.fit(Xtr, ytr)
        # Leaf class counts from the training rows (tree_.value holds fractions in
        # scikit-learn >= 1.4, so they are recounted here).
        leaf_tr = clf.apply(Xtr)
        counts = np.zeros((clf.tree_.node_count, K))
        np.add.at(counts, (leaf_tr, ytr), 1.0)
        fit_s = time.perf_counter() - t0
        c = counts[clf.apply(Xte)]
        n = c.sum(axis=1, keepdims=True)
        rows = np.arange(len(yte))
        p_laplace = (c + 1.0) / (n + K)  # the brief's Laplace smoothing
        p_bayes = (c + BASE["alpha"] / K) / (n + BASE["alpha"])  # spec A3's shared-prior form
        raw = c / n
        rec = dict(key=key, kind="cart", data=data, seed=seed, criterion=criterion,
                   min_samples_leaf=min_samples_leaf, fit_s=fit_s,
                   acc=float(np.mean(np.argmax(c, axis=1) == yte)),
                   acc_sklearn=float(np.mean(clf.predict(Xte) == yte)),
                   lp=float(np.mean(np.log(p_laplace[rows, yte]))),
                   lp_a3=float(np.mean(np.log(p_bayes[rows, yte]))),
                   frac_zero_raw=float(np.mean(raw[rows, yte] == 0)),
                   n_leaves=int(clf.get_n_leaves()), depth=int(clf.get_depth()))
        self._store(rec)
        return rec


    def binary(self, data, subsample, seed, **args):
        """A fit by the `mcmc_tree` example binary: CGM MCMC (`iterations`, `points`) or SMC
        (`smc`, `islands`, `proposal`), with §5.2's α, α_s, β_s. fit_s is the sampler's
        seconds (prediction excluded), lp the test mean log p(y|x), acc the accuracy."""
        kind = "smc_bin" if "smc" in args else "mcmc"
        key = json.dumps([kind, data, subsample, seed, sorted(args.items())])
        if key in self.records:
            return self.records[key]
        train, test = csv_pair(data, subsample)
        cmd = [str(mcmc_binary()), str(train), str(test), "--seed", str(seed),
               "--alpha", str(BASE["alpha"]), "--alpha-s", str(BASE["alpha_split"]),
               "--beta-s", str(BASE["beta_split"])]
        for k, v in sorted(args.items()):
            cmd += [f"--{k}", str(v)]
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        out = json.loads(res.stdout)
        rec = dict(key=key, kind=kind, data=data, subsample=subsample, seed=seed, args=args,
                   fit_s=out["seconds"], lp=out["log_predictive"], acc=out["accuracy"],
                   wall_s=wall, out=out)
        self._store(rec)
        log(f"  {kind} {data_label(data, subsample)} s{seed} {args} sampler {out['seconds']:.2f}s "
            f"(wall {wall:.1f}s) lp {rec['lp']:.4f} acc {rec['acc']:.4f}")
        return rec


def mcmc_binary():
    """The example binary, built (release, -j 2) when missing."""
    if not MCMC_BIN.exists():
        subprocess.run(["cargo", "build", "--release", "-j", "2", "-p", "mondrian",
                        "--example", "mcmc_tree"], cwd=REPO, check=True)
    return MCMC_BIN


def csv_pair(name, subsample):
    """The train/test split of dataset() written as CSV (header, label last) for the binary."""
    CSV_DIR.mkdir(parents=True, exist_ok=True)
    lab = data_label(name, subsample).replace("[", "_").replace("]", "")
    paths = (CSV_DIR / f"{lab}_train.csv", CSV_DIR / f"{lab}_test.csv")
    if not all(p.exists() for p in paths):
        Xtr, ytr, Xte, yte = dataset(name, subsample)
        for p, X, y in zip(paths, (Xtr, Xte), (ytr, yte)):
            head = ",".join([f"x{i}" for i in range(X.shape[1])] + ["label"])
            tmp = p.with_suffix(".tmp")
            np.savetxt(tmp, np.column_stack([X, y]), delimiter=",", header=head,
                       comments="", fmt="%.17g")
            tmp.rename(p)
    return paths


def agg(recs, field):
    return np.array([r[field] for r in recs], dtype=float)


def curve(runner, data, sub, seeds, proposal, expansion, Cs, I=1, **over):
    """{C: [record per seed]}."""
    return {C: [runner.smc(data, sub, s, proposal, expansion, C, I, **over) for s in seeds]
            for C in Cs}


def mean_of(cur, field):
    return np.array([agg(cur[C], field).mean() for C in sorted(cur)])


def interp_logt(t_src, y_src, t):
    """Piecewise-linear interpolation of y against log time; None outside the range."""
    lt, ly = np.log(t_src), np.asarray(y_src)
    order = np.argsort(lt)
    lt, ly = lt[order], ly[order]
    if np.log(t) < lt[0] or np.log(t) > lt[-1]:
        return None
    return float(np.interp(np.log(t), lt, ly))


def per_time_compare(a, b, field="lp"):
    """For each point of curve b (mean fit time, mean metric) inside the time range of curve
    a, a's metric at that time (interpolated in log time) minus b's. Returns a list of
    (C_b, t_b, diff)."""
    ta, ya = mean_of(a, "fit_s"), mean_of(a, field)
    out = []
    for C in sorted(b):
        tb = agg(b[C], "fit_s").mean()
        yb = agg(b[C], field).mean()
        ia = interp_logt(ta, ya, tb)
        if ia is not None:
            out.append((C, tb, ia - yb))
    return out


def curve_rows(label, cur):
    rows = []
    for C in sorted(cur):
        rs = cur[C]
        rows.append([label, C, ms(agg(rs, "lp"), "{:.4f}"), ms(100 * agg(rs, "acc"), "{:.2f}"),
                     ms(agg(rs, "fit_s"), "{:.2f}"), f"{agg(rs, 'log_evidence').mean():.1f}",
                     f"{agg(rs, 'mean_depth').mean():.1f}", f"{agg(rs, 'mean_leaves').mean():.0f}",
                     f"{agg(rs, 'effective_trees').mean():.1f}"])
    return rows


CURVE_HEAD = ["method", "C", "test log p(y|x)", "accuracy %", "fit s (1 thread)",
              "log Ẑ", "depth", "leaves", "ESS trees"]


def plot_curves(ax_pairs, curves, title):
    """ax_pairs: ((ax_lp_time, ax_lp_C), (ax_acc_time, ax_acc_C)); curves: {label: cur}."""
    for (field, axes) in zip(["lp", "acc"], ax_pairs):
        for i, (label, cur) in enumerate(curves.items()):
            Cs = sorted(cur)
            m = mean_of(cur, field)
            sd = np.array([agg(cur[C], field).std() for C in Cs])
            t = mean_of(cur, "fit_s")
            style = dict(color=f"C{i}", marker="o", ms=3, label=label)
            axes[0].errorbar(t, m, yerr=sd, capsize=2, **style)
            axes[1].errorbar(Cs, m, yerr=sd, capsize=2, **style)
        for ax in axes:
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
        axes[0].set_xlabel("fit seconds (1 thread)")
        axes[1].set_xlabel("particles C")
        axes[0].set_ylabel("test mean log p(y|x)" if field == "lp" else "test accuracy")
    ax_pairs[0][0].set_title(title + ": vs runtime")
    ax_pairs[0][1].set_title(title + ": vs particles")
    ax_pairs[0][1].legend(fontsize=7)


# ============================================================================ experiments

def e31(cfg, R, sections, data_out):
    """E3.1 proposal x expansion on letter (pen-digits) and satimage (magic-04)."""
    body = [f"Design: {{optimal, prior}} × {{node-wise breadth-first, layer-wise}}, I = 1, "
            f"prior C ∈ {cfg['prior_C']}, optimal C ∈ {cfg['opt_C']}, seeds {cfg['seeds']} "
            "(mean ± sd over seeds; the sampler's random_state is the seed, the split is the "
            "data folder's fixed one). 'depth' is the posterior mean of the trees' maximum "
            "depth, 'leaves' the posterior mean leaf count, 'ESS trees' 1/Σw̄² over the "
            "distinct final trees.", ""]
    verdicts, out = [], {}
    fig, axs = plt.subplots(2, 2 * len(cfg["e31_data"]), figsize=(6.5 * len(cfg["e31_data"]), 7))
    for di, (name, sub) in enumerate(cfg["e31_data"]):
        lab = data_label(name, sub)
        log(f"E3.1 {lab}")
        cur = {}
        for prop, Cs in [("optimal", cfg["opt_C"]), ("prior", cfg["prior_C"])]:
            for exp in EXPANSIONS:
                cur[(prop, exp)] = curve(R, name, sub, cfg["seeds"], prop, exp, Cs)
        rows = []
        for (prop, exp), c in cur.items():
            rows += curve_rows(f"{prop}, {EXPANSIONS[exp]}", c)
        body += [f"### {lab}", "", md_table(CURVE_HEAD, rows), ""]
        pnw, plw = cur[("prior", "breadth_first")], cur[("prior", "layer_wise")]
        onw, olw = cur[("optimal", "breadth_first")], cur[("optimal", "layer_wise")]
        # (a) prior: node-wise beats layer-wise (C >= 100), smaller trees, larger variance.
        big = [C for C in sorted(pnw) if C >= 100]
        d_lp = [agg(pnw[C], "lp").mean() - agg(plw[C], "lp").mean() for C in big]
        d_acc = [agg(pnw[C], "acc").mean() - agg(plw[C], "acc").mean() for C in big]
        verdicts.append(verdict("E3.1a", lab, min(d_lp) > 0 and min(d_acc) > 0,
            "(a) prior proposal: node-wise beats layer-wise at every C ≥ 100 in mean log p "
            f"(gain {min(d_lp):+.3f} … {max(d_lp):+.3f} nats) and accuracy (gain "
            f"{100 * min(d_acc):+.1f} … {100 * max(d_acc):+.1f} points)."))
        dep = [(agg(plw[C], "mean_depth").mean(), agg(pnw[C], "mean_depth").mean()) for C in big]
        lea = [(agg(plw[C], "mean_leaves").mean(), agg(pnw[C], "mean_leaves").mean()) for C in big]
        shallower = sum(a < b for a, b in dep)
        fewer = sum(a < b for a, b in lea)
        verdicts.append(verdict("E3.1a", lab, shallower == len(big),
            "(a) layer-wise makes shallower trees (posterior mean max depth lower at every "
            f"C ≥ 100): lower at {shallower}/{len(big)} C (layer-wise "
            + ", ".join(f"{a:.1f}" for a, _ in dep) + " vs node-wise "
            + ", ".join(f"{b:.1f}" for _, b in dep) + f"); fewer leaves at {fewer}/{len(big)} C "
            f"(layer-wise {lea[-1][0]:.0f} vs node-wise {lea[-1][1]:.0f} at C = {big[-1]})."))
        sds = [(agg(plw[C], "lp").std(ddof=1), agg(pnw[C], "lp").std(ddof=1)) for C in sorted(pnw)]
        larger = sum(a > b for a, b in sds)
        verdicts.append(verdict("E3.1a", lab, larger > len(sds) / 2,
            "(a) layer-wise has larger variance across seeds: sd of log p larger at "
            f"{larger}/{len(sds)} C (median sd layer-wise {np.median([a for a, _ in sds]):.4f} "
            f"vs node-wise {np.median([b for _, b in sds]):.4f})."))
        # (b) optimal: both expansions alike (|Δ lp| <= 0.02 nats, |Δ acc| <= 1 point), C >= 10.
        Cs10 = [C for C in sorted(onw) if C >= 10]

        def excess(field, tol):
            """Largest |Δ mean| beyond max(tol, 2 SE of the difference of the means)."""
            worst, dmax = -np.inf, 0.0
            for C in Cs10:
                a, b = agg(onw[C], field), agg(olw[C], field)
                d = abs(a.mean() - b.mean())
                se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)) if len(a) > 1 else 0
                worst = max(worst, d - max(tol, 2 * se))
                dmax = max(dmax, d)
            return worst, dmax
        xlp, blp = excess("lp", 0.02)
        xacc, bacc = excess("acc", 0.01)
        verdicts.append(verdict("E3.1b", lab, xlp <= 0 and xacc <= 0,
            "(b) optimal proposal: node-wise and layer-wise alike at every C ≥ 10 "
            "(rule: |Δ mean| ≤ max(tolerance, 2 standard errors of the difference), "
            "tolerances 0.02 nats and 1 point): largest |Δ log p| "
            f"{blp:.4f}, largest |Δ acc| {100 * bacc:.2f} points."))
        # (c) optimal needs fewer particles: better at every common C; and the C prior needs.
        common = [C for C in sorted(onw) if C in pnw]
        better = [agg(onw[C], "lp").mean() > agg(pnw[C], "lp").mean() for C in common]
        o10 = agg(onw[10], "lp").mean() if 10 in onw else None
        reach = [C for C in sorted(pnw) if o10 is not None and agg(pnw[C], "lp").mean() >= o10]
        verdicts.append(verdict("E3.1c", lab, all(better),
            "(c) optimal needs fewer particles: node-wise optimal beats node-wise prior at "
            f"every common C {common} ({sum(better)}/{len(common)}); the prior "
            + (f"first matches optimal's C = 10 log p ({o10:.3f}) at C = {reach[0]}"
               if reach else f"does not reach optimal's C = 10 log p ({o10:.3f}) by C = "
               f"{max(pnw)}") + "."))
        # (d) per unit runtime, prior better: at each optimal point inside prior's time range.
        cmp_nw = per_time_compare(pnw, onw)
        cmp_lw = per_time_compare(plw, olw)
        wins = sum(d > 0 for _, _, d in cmp_nw)
        verdicts.append(verdict("E3.1d", lab, len(cmp_nw) > 0 and wins > len(cmp_nw) / 2,
            "(d) per unit runtime the prior is better (node-wise; prior's mean log p "
            "interpolated in log time at each optimal point's fit time): prior ahead at "
            f"{wins}/{len(cmp_nw)} comparable points ("
            + ", ".join(f"C={C} {t:.2f}s {d:+.3f}" for C, t, d in cmp_nw) + "); layer-wise: "
            f"prior ahead at {sum(d > 0 for _, _, d in cmp_lw)}/{len(cmp_lw)}."))
        # (e) optimal near its best already at C = 10.
        best = max(agg(onw[C], "lp").mean() for C in onw)
        besta = max(agg(onw[C], "acc").mean() for C in onw)
        a10 = agg(onw[10], "acc").mean()
        verdicts.append(verdict("E3.1e", lab, best - o10 <= 0.02 and besta - a10 <= 0.01,
            "(e) optimal saturates: at C = 10 within 0.02 nats and 1 point of its best over "
            f"C ∈ {sorted(onw)}: log p {o10:.4f} vs best {best:.4f} (gap {best - o10:.4f}), "
            f"accuracy {100 * a10:.2f} vs {100 * besta:.2f}."))
        plot_curves(((axs[0, 2 * di], axs[0, 2 * di + 1]), (axs[1, 2 * di], axs[1, 2 * di + 1])),
                    {f"{p}, {EXPANSIONS[e]}": c for (p, e), c in cur.items()}, lab)
        out[lab] = {f"{p}/{e}": {C: [r["key"] for r in rs] for C, rs in c.items()}
                    for (p, e), c in cur.items()}
    fig.suptitle("E3.1 (Figs. 3.2, 3.3): proposal × expansion, I = 1")
    fig.tight_layout()
    fig.savefig(cfg["out"] / "ch3_e31.png", dpi=110)
    plt.close(fig)
    sections.append(("E3.1 proposal × expansion (Figs. 3.2–3.3)", "\n".join(body), verdicts))
    data_out["e31"] = out


def e32(cfg, R, sections, data_out):
    """E3.2 irrelevant features (dna for madelon): optimal vs prior, node-wise."""
    name, sub = "dna", None
    log("E3.2 dna")
    cur = {"optimal": curve(R, name, sub, cfg["seeds"], "optimal", "breadth_first", cfg["opt_C"]),
           "prior": curve(R, name, sub, cfg["seeds"], "prior", "breadth_first", cfg["prior_C"])}
    rows = curve_rows("optimal, node-wise", cur["optimal"]) + curve_rows("prior, node-wise", cur["prior"])
    body = [f"dna (1400 train / 1186 test, D = 180 binary features, K = 3; the madelon "
            "substitute: few relevant features, though not the 4 % of madelon). Node-wise "
            f"breadth-first, I = 1, seeds {cfg['seeds']}.", "", md_table(CURVE_HEAD, rows), ""]
    common = [C for C in sorted(cur["optimal"]) if C in cur["prior"]]
    pp = [(agg(cur["optimal"][C], "lp").mean() - agg(cur["prior"][C], "lp").mean(),
           agg(cur["optimal"][C], "acc").mean() - agg(cur["prior"][C], "acc").mean()) for C in common]
    v = [verdict("E3.2", "dna", all(d > 0 for d, _ in pp),
                 f"optimal beats prior per particle at every common C {common}: log p gain "
                 + ", ".join(f"{d:+.3f}" for d, _ in pp) + "; accuracy gain "
                 + ", ".join(f"{100 * a:+.1f}" for _, a in pp) + " points.")]
    # per unit runtime: optimal's curve interpolated at each prior point's time (and reverse).
    cmp = per_time_compare(cur["optimal"], cur["prior"])
    wins = sum(d > 0 for _, _, d in cmp)
    # prior points faster than any optimal fit: compare with optimal's fastest point.
    t_o_min = mean_of(cur["optimal"], "fit_s").min()
    lp_o_min = mean_of(cur["optimal"], "lp")[0]
    slower_prior = [C for C in sorted(cur["prior"]) if agg(cur["prior"][C], "fit_s").mean() >= t_o_min]
    beyond = [C for C in slower_prior if agg(cur["prior"][C], "fit_s").mean() > mean_of(cur["optimal"], "fit_s").max()]
    beyond_ok = all(agg(cur["prior"][C], "lp").mean() < mean_of(cur["optimal"], "lp").max() for C in beyond)
    v.append(verdict("E3.2", "dna", len(cmp) > 0 and wins == len(cmp) and beyond_ok,
                     "optimal beats prior per unit runtime: at each prior point inside "
                     "optimal's time range, optimal's log p (interpolated in log time) is "
                     f"higher at {wins}/{len(cmp)} ("
                     + ", ".join(f"C={C} {t:.2f}s {d:+.3f}" for C, t, d in cmp) + ")"
                     + (f"; prior points slower than every optimal fit (C ∈ {beyond}) stay below "
                        f"optimal's best: {beyond_ok}" if beyond else "")
                     + f". Optimal's cheapest point: C = {min(cur['optimal'])}, "
                     f"{t_o_min:.2f} s, log p {lp_o_min:.3f}."))
    fig, axs = plt.subplots(2, 2, figsize=(10, 7))
    plot_curves(((axs[0, 0], axs[0, 1]), (axs[1, 0], axs[1, 1])),
                {"optimal, node-wise": cur["optimal"], "prior, node-wise": cur["prior"]}, "dna")
    fig.suptitle("E3.2 (Fig. 3.4): irrelevant features, dna for madelon")
    fig.tight_layout()
    fig.savefig(cfg["out"] / "ch3_e32.png", dpi=110)
    plt.close(fig)
    sections.append(("E3.2 irrelevant features (Fig. 3.4)", "\n".join(body), v))
    data_out["e32"] = {k: {C: [r["key"] for r in rs] for C, rs in c.items()} for k, c in cur.items()}


def e33(cfg, R, sections, data_out):
    """E3.3 islands: total C fixed, I varied, prior proposal, node-wise."""
    Ct = cfg["island_C"]
    body = [f"Total C = {Ct}, prior proposal, node-wise, island weighting equal (each island "
            f"1/I), I ∈ {cfg['islands']}, seeds {cfg['island_seeds']}.", ""]
    v, out = [], {}
    fig, axs = plt.subplots(1, 2, figsize=(10, 4))
    for di, (name, sub) in enumerate(cfg["e33_data"]):
        lab = data_label(name, sub)
        log(f"E3.3 {lab}")
        res = {I: [R.smc(name, sub, s, "prior", "breadth_first", Ct, I) for s in cfg["island_seeds"]]
               for I in cfg["islands"]}
        rows = [[I, Ct // I, ms(agg(rs, "lp"), "{:.4f}"), ms(100 * agg(rs, "acc"), "{:.2f}"),
                 ms(agg(rs, "fit_s"), "{:.2f}"), f"{agg(rs, 'log_evidence').mean():.1f}",
                 f"{agg(rs, 'effective_trees').mean():.1f}"] for I, rs in res.items()]
        body += [f"### {lab}", "", md_table(["I", "C/I", "test log p(y|x)", "accuracy %",
                                              "fit s (1 thread)", "log Ẑ (mean of Ẑ_i)",
                                              "ESS trees"], rows), ""]
        lp = {I: agg(rs, "lp").mean() for I, rs in res.items()}
        acc = {I: agg(rs, "acc").mean() for I, rs in res.items()}
        mid = [I for I in lp if 5 <= I and Ct / I >= 100] or [max(lp)]
        ok = all(lp[I] > lp[1] for I in mid) and all(acc[I] > acc[1] for I in mid)
        v.append(verdict("E3.3", lab, ok,
                         f"I ∈ {mid} (C/I ≥ 100) beats I = 1 in log p and accuracy: log p "
                         + ", ".join(f"I={I} {lp[I]:.4f}" for I in mid) + f" vs I=1 {lp[1]:.4f}; "
                         "accuracy " + ", ".join(f"{100 * acc[I]:.1f}" for I in mid)
                         + f" vs {100 * acc[1]:.1f}."))
        small = [I for I in lp if Ct / I < 100]
        best_mid = max(lp[I] for I in mid)
        drop = {I: lp[I] - best_mid for I in small}
        v.append(verdict("E3.3", lab, small and all(d < -0.01 for d in drop.values()),
                         "performance drops when C/I < 100 (log p below the best of I ∈ "
                         f"{mid} by more than 0.01 nats at every I ∈ {small}): change "
                         + ", ".join(f"I={I} (C/I={Ct // I}) {d:+.4f}" for I, d in drop.items())
                         + "."))
        Is = sorted(res)
        for ax, field in zip(axs, ["lp", "acc"]):
            ax.errorbar(Is, [agg(res[I], field).mean() for I in Is],
                        yerr=[agg(res[I], field).std() for I in Is], marker="o", capsize=2,
                        label=lab)
        out[lab] = {I: [r["key"] for r in rs] for I, rs in res.items()}
    for ax, yl in zip(axs, ["test mean log p(y|x)", "test accuracy"]):
        ax.set_xscale("log")
        ax.set_xlabel(f"islands I (total C = {Ct})")
        ax.set_ylabel(yl)
        ax.axvline(Ct / 100, color="grey", ls=":", lw=1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("E3.3 (Fig. 3.5): islands, prior proposal; dotted line C/I = 100")
    fig.tight_layout()
    fig.savefig(cfg["out"] / "ch3_e33.png", dpi=110)
    plt.close(fig)
    sections.append(("E3.3 islands (Fig. 3.5)", "\n".join(body), v))
    data_out["e33"] = out


def mcmc_baseline(R, data, subsample, seed, n_iterations, points=60):
    """CGM (1998) MCMC over single trees (grow / prune / change / swap with the exact MH
    ratios, Dirichlet-multinomial leaves, predictions averaged over all iterations with no
    burn-in, start from the one-node tree; spec §3.11): `mondrian::bayes::McmcTreeClassifier`
    through the `mcmc_tree` example binary. The record's `out["curve"]` holds
    [iteration, sampler seconds, test mean log p] of the running average at about `points`
    iterations spaced geometrically."""
    return R.binary(data, subsample, seed, iterations=n_iterations, points=points)


def smc_binary(R, data, subsample, seed, C, I):
    """SMC (prior proposal, node-wise) from the same binary as the MCMC baseline."""
    return R.binary(data, subsample, seed, smc=C, islands=I, proposal="prior")


def mcmc_mean_curve(recs):
    """Mean over seeds of the sampler seconds and the test log p at each recorded iteration
    (every seed records the same iterations)."""
    its = [p[0] for p in recs[0]["out"]["curve"]]
    for r in recs:
        assert [p[0] for p in r["out"]["curve"]] == its
    t = np.mean([[p[1] for p in r["out"]["curve"]] for r in recs], axis=0)
    lp = np.array([[p[2] for p in r["out"]["curve"]] for r in recs])
    return np.array(its), t, lp.mean(axis=0), lp.min(axis=0), lp.max(axis=0)


def time_to_reach(t, y, level):
    """The first time the curve (t, y) reaches `level`, linear in log time between recorded
    points; None if it never does."""
    for k in range(len(y)):
        if y[k] >= level:
            if k == 0 or t[k - 1] <= 0:
                return float(t[k])
            f = (level - y[k - 1]) / (y[k] - y[k - 1])
            return float(np.exp(np.log(t[k - 1]) + f * (np.log(t[k]) - np.log(t[k - 1]))))
    return None


def e34(cfg, R, sections, data_out):
    """E3.4 SMC vs CGM MCMC (Fig. 3.6) and SMC's log-evidence vs C (Fig. 3.7)."""
    I = cfg["e34_islands"]
    body = [f"**SMC vs MCMC (Fig. 3.6).** CGM MCMC (§3.11: one tree, grow / prune / change / "
            "swap ¼ each with the exact §4.5 ratios, Dirichlet–multinomial leaves, start from "
            "the single leaf, predictions averaged over *all* iterations, no burn-in) against "
            f"SMC (prior proposal, node-wise, I = {I} islands run serially, C ∈ "
            f"{cfg['e34_smc_C']}), both from one build of the library through the "
            "`mcmc_tree` example binary on one thread, seeds "
            f"{cfg['e34_seeds'][0]}..{cfg['e34_seeds'][-1]}. MCMC iterations per data set: "
            + ", ".join(f"{data_label(n, s)} {cfg['e34_mcmc_iters'][n]}"
                        for n, s in cfg["e34_data"])
            + ". Seconds are sampler time (prediction and the held-out bookkeeping "
            "excluded). The MCMC curve is the mean over seeds of the running-average test "
            "log p at ~60 geometrically spaced iterations against the mean seconds there. "
            "**Time to equal test log p**: for each C, the first time the mean MCMC curve "
            "reaches SMC's mean test log p at that C (log-time interpolation), divided by "
            "SMC's mean fit seconds; '>' marks a lower bound when the chain never gets there "
            "(MCMC's whole run divided by SMC's time). The machine's 2 cores were shared with "
            "other jobs (load ≈ 6), so absolute seconds are inflated and noisy; the two "
            "methods ran interleaved under the same load.", ""]
    v, out = [], {}
    figm, axm = plt.subplots(1, len(cfg["e34_data"]), figsize=(5 * len(cfg["e34_data"]), 4))
    for di, (name, sub) in enumerate(cfg["e34_data"]):
        lab = data_label(name, sub)
        log(f"E3.4 MCMC {lab}")
        n_it = cfg["e34_mcmc_iters"][name]
        mc = [mcmc_baseline(R, name, sub, s, n_it) for s in cfg["e34_seeds"]]
        sm = {C: [smc_binary(R, name, sub, s, C, I) for s in cfg["e34_seeds"]]
              for C in cfg["e34_smc_C"]}
        its, t, lp, lo, hi = mcmc_mean_curve(mc)
        smc_t = {C: agg(sm[C], "fit_s").mean() for C in cfg["e34_smc_C"]}
        smc_lp = {C: agg(sm[C], "lp").mean() for C in cfg["e34_smc_C"]}
        rows, ratios = [], {}
        for C in cfg["e34_smc_C"]:
            rows.append([f"SMC C={C}, I={I}", ms(agg(sm[C], "lp"), "{:.4f}"),
                         ms(100 * agg(sm[C], "acc"), "{:.2f}"), ms(agg(sm[C], "fit_s"), "{:.2f}")])
        rows.append([f"MCMC {n_it} iterations (end of chain)", ms(agg(mc, "lp"), "{:.4f}"),
                     ms(100 * agg(mc, "acc"), "{:.2f}"), ms(agg(mc, "fit_s"), "{:.2f}")])
        # Levels: SMC's mean log p at each C, and the chain's own end-of-run mean log p.
        levels = [(f"SMC C={C}", smc_lp[C]) for C in cfg["e34_smc_C"]]
        levels.append(("MCMC end", float(lp[-1])))
        lrows = []
        for name_l, L in levels:
            tm = time_to_reach(t, lp, L)
            hit = [C for C in cfg["e34_smc_C"] if smc_lp[C] >= L]
            ts = min(smc_t[C] for C in hit) if hit else None
            cs = min(hit, key=lambda C: smc_t[C]) if hit else None
            if ts is None:
                ratio, kind = None, "SMC never"
            elif tm is None:
                ratio, kind = t[-1] / ts, "lower bound"
            else:
                ratio, kind = tm / ts, "reached"
            ratios[name_l] = (ratio, kind)
            lrows.append([name_l, f"{L:.4f}", f"{tm:.2f}" if tm is not None else f"> {t[-1]:.1f}",
                          f"{ts:.2f} (C={cs})" if ts is not None else "–",
                          "–" if ratio is None else ("> " if kind == "lower bound" else "")
                          + f"{ratio:.1f}×"])
        acc_rate = np.mean([r["out"]["acceptance"] for r in mc])
        leaves = np.mean([r["out"]["mean_leaves"] for r in mc])
        marks = [k for k in range(len(its)) if its[k] in (1000, 10000, 100000) or k == len(its) - 1]
        body += [f"### {lab}", "",
                 md_table(["method", "test log p(y|x)", "accuracy %", "fit s"], rows), "",
                 "Time to equal test log p (mean curves; SMC's time is that of its cheapest C "
                 "reaching the level):", "",
                 md_table(["level", "test log p", "MCMC s", "SMC s", "MCMC/SMC time"], lrows), "",
                 f"MCMC acceptance rate {acc_rate:.3f}, iteration-averaged leaves {leaves:.1f}; "
                 "mean curve: " + ", ".join(f"it {its[k]}: {t[k]:.2f} s, {lp[k]:.4f}"
                                             for k in range(0, len(its), max(1, len(its) // 8)))
                 + f", it {its[-1]}: {t[-1]:.2f} s, {lp[-1]:.4f}.", ""]
        concl = {k: r for k, (r, kind) in ratios.items()
                 if kind == "reached" or (kind == "lower bound" and r >= 10)}
        ok10 = (len(concl) >= 2 and all(r >= 10 for r in concl.values()))
        text = ", ".join(f"{k} " + ("n/a" if r is None else ("> " if kind == "lower bound" else "")
                                    + f"{r:.1f}×") for k, (r, kind) in ratios.items())
        v.append(verdict("E3.4", lab, ok10,
                         "SMC (prior, node-wise, I = 5) at least 10× faster than CGM MCMC at "
                         "equal test log p (rule: at every level the chain reaches, MCMC time ÷ "
                         "SMC time ≥ 10; a lower bound from a level the chain never reaches "
                         "counts if ≥ 10 and is inconclusive otherwise; ≥ 2 conclusive levels): "
                         + text + "."))
        if name in ("letter", "satimage"):
            med = float(np.median(list(concl.values()))) if concl else float("nan")
            v.append(verdict("E3.4", lab, bool(concl) and med >= 50,
                             "about two orders of magnitude on the pen-digits / magic-04 "
                             "stand-ins (rule: median over the conclusive levels ≥ 50; lower "
                             f"bounds enter as their bound): median {med:.1f}× over "
                             f"{len(concl)} levels."))
        ax = axm[di] if len(cfg["e34_data"]) > 1 else axm
        ax.plot(t, lp, color="C3", label=f"CGM MCMC (mean of {len(mc)} seeds)")
        ax.fill_between(t, lo, hi, color="C3", alpha=0.15, lw=0)
        ts = [agg(sm[C], "fit_s").mean() for C in cfg["e34_smc_C"]]
        ls = [agg(sm[C], "lp").mean() for C in cfg["e34_smc_C"]]
        ax.plot(ts, ls, "o-", color="C0", label=f"SMC prior, node-wise, I={I}")
        for C, x, y in zip(cfg["e34_smc_C"], ts, ls):
            ax.annotate(f"C={C}", (x, y), fontsize=7, textcoords="offset points", xytext=(3, -9))
        ax.set_xscale("log")
        ax.set_xlim(left=max(1e-3, t[t > 0].min() if (t > 0).any() else 1e-3))
        ax.set_ylim(bottom=max(min(ls) - 1.0, lp.min()))
        ax.set_xlabel("sampler seconds (1 thread)")
        ax.set_ylabel("test mean log p(y|x)")
        ax.set_title(lab)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        out[f"{lab} mcmc"] = dict(
            iterations=n_it, curve_iterations=its, curve_seconds=t, curve_lp=lp,
            ratios={k: dict(ratio=r, kind=kind) for k, (r, kind) in ratios.items()},
            mcmc=[r["key"] for r in mc], smc={C: [r["key"] for r in rs] for C, rs in sm.items()})
    figm.suptitle("E3.4 (Fig. 3.6): SMC vs CGM MCMC, test log p against sampler seconds")
    figm.tight_layout()
    figm.savefig(cfg["out"] / "ch3_e34_mcmc.png", dpi=110)
    plt.close(figm)
    body += ["**Training log-evidence (Fig. 3.7).** log Ẑ (nats, the SMC estimate, node-wise, "
             "I = 1; the same fits as E3.1/E3.2, seeds as there) against C. Per-row values "
             "divide by the training rows.", ""]
    fig, axs = plt.subplots(1, len(cfg["e34_data"]), figsize=(4.5 * len(cfg["e34_data"]), 3.8))
    for di, (name, sub) in enumerate(cfg["e34_data"]):
        lab = data_label(name, sub)
        cur = {p: curve(R, name, sub, cfg["seeds"], p, "breadth_first", Cs)
               for p, Cs in [("prior", cfg["prior_C"]), ("optimal", cfg["opt_C"])]}
        n = cur["prior"][min(cur["prior"])][0]["n_train"]
        allC = sorted(set(cur["prior"]) | set(cur["optimal"]))
        rows = []
        for C in allC:
            cells = [C]
            for p in ["prior", "optimal"]:
                cells.append(ms(agg(cur[p][C], "log_evidence"), "{:.1f}") if C in cur[p] else "–")
            rows.append(cells)
        body += [f"### {lab} (n = {n})", "", md_table(["C", "log Ẑ prior", "log Ẑ optimal"], rows), ""]
        zp = {C: agg(cur["prior"][C], "log_evidence").mean() for C in cur["prior"]}
        zo = {C: agg(cur["optimal"][C], "log_evidence").mean() for C in cur["optimal"]}
        gap_hi = zo[max(zo)] - zp[max(zp)]
        c0 = min(set(zp) & set(zo))
        gap_lo = zo[c0] - zp[c0]
        ok = abs(gap_hi) / n <= 0.005 and abs(gap_hi) < abs(gap_lo) / 4
        v.append(verdict("E3.4", lab, ok,
                         "log Ẑ of prior and optimal converge to the same value as C grows "
                         "(rule: gap between prior at its largest C and optimal at its largest C "
                         "≤ 0.005 nats per training row and < 1/4 of the gap at the smallest "
                         f"common C): prior C={max(zp)} {zp[max(zp)]:.1f} vs optimal C={max(zo)} "
                         f"{zo[max(zo)]:.1f}, gap {gap_hi:+.1f} ({gap_hi / n:+.4f}/row); at C={c0} "
                         f"gap {gap_lo:+.1f}."))
        # pen-digits claim: prior test performance declines for large C while log Ẑ rises.
        Cp = sorted(zp)
        lpp = [agg(cur["prior"][C], "lp").mean() for C in Cp]
        body += [f"Prior, node-wise, {lab}: log Ẑ by C " + ", ".join(f"{zp[C]:.1f}" for C in Cp)
                 + "; test log p " + ", ".join(f"{x:.4f}" for x in lpp)
                 + (" (the pen-digits remark 'test log p declines for C > 2000 while log Ẑ "
                    f"rises' {'holds' if lpp[-1] < max(lpp[:-1]) and zp[Cp[-1]] > zp[Cp[-2]] else 'does not hold'} "
                    f"here at C = {Cp[-1]}; report only)." if Cp[-1] > 2000 else "."), ""]
        ax = axs[di] if len(cfg["e34_data"]) > 1 else axs
        for i, p in enumerate(["prior", "optimal"]):
            Cs = sorted(cur[p])
            ax.errorbar(Cs, [agg(cur[p][C], "log_evidence").mean() for C in Cs],
                        yerr=[agg(cur[p][C], "log_evidence").std() for C in Cs], marker="o",
                        capsize=2, color=f"C{i}", label=f"{p}, node-wise")
        ax.set_xscale("log")
        ax.set_xlabel("particles C")
        ax.set_ylabel("training log Ẑ")
        ax.set_title(lab)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        out[lab] = dict(prior=zp, optimal=zo)
    fig.suptitle("E3.4 (Fig. 3.7): SMC log-evidence vs particles")
    fig.tight_layout()
    fig.savefig(cfg["out"] / "ch3_e34.png", dpi=110)
    plt.close(fig)
    sections.append(("E3.4 SMC vs MCMC (Figs. 3.6–3.7)", "\n".join(body), v))
    data_out["e34"] = out


E35_SETTINGS = [("α=5, α_s=0.95, β_s=0.5 (default)", {}),
                ("α=5, α_s=0.8, β_s=0.5", dict(alpha_split=0.8)),
                ("α=5, α_s=0.95, β_s=0.2", dict(beta_split=0.2)),
                ("α=5, α_s=0.8, β_s=0.2", dict(alpha_split=0.8, beta_split=0.2)),
                ("α=1, α_s=0.95, β_s=0.5", dict(alpha=1.0))]


def e35(cfg, R, sections, data_out):
    """E3.5 hyperparameter sensitivity, SMC only (node-wise, I = 1)."""
    body = [f"Node-wise, I = 1, prior C ∈ {cfg['e35_prior_C']}, optimal C ∈ {cfg['e35_opt_C']}, "
            f"seeds {cfg['e35_seeds']}. The claims compared against MCMC are evaluated for the "
            "default setting only (E3.4); evaluated here: prior beats optimal per unit runtime under every "
            "setting, and α = 1 gives accuracy similar to α = 5 (within 1 point at the largest "
            "C of each proposal).", ""]
    v, out = [], {}
    fig, axs = plt.subplots(1, len(cfg["e35_data"]), figsize=(6 * len(cfg["e35_data"]), 4.2))
    for di, (name, sub) in enumerate(cfg["e35_data"]):
        lab = data_label(name, sub)
        log(f"E3.5 {lab}")
        rows, res, wins_all = [], {}, []
        ax = axs[di] if len(cfg["e35_data"]) > 1 else axs
        for si, (slab, over) in enumerate(E35_SETTINGS):
            cp = curve(R, name, sub, cfg["e35_seeds"], "prior", "breadth_first", cfg["e35_prior_C"], **over)
            co = curve(R, name, sub, cfg["e35_seeds"], "optimal", "breadth_first", cfg["e35_opt_C"], **over)
            res[slab] = (cp, co)
            for r in curve_rows("prior", cp) + curve_rows("optimal", co):
                rows.append([slab] + r)
            cmp = per_time_compare(cp, co)
            w = sum(d > 0 for _, _, d in cmp)
            wins_all.append((slab, w, len(cmp)))
            for cur, ls, pl in [(cp, "-", "prior"), (co, "--", "optimal")]:
                ax.plot(mean_of(cur, "fit_s"), mean_of(cur, "lp"), ls, marker="o", ms=3,
                        color=f"C{si}", label=f"{slab}, {pl}")
        body += [f"### {lab}", "", md_table(["setting"] + CURVE_HEAD, rows), ""]
        ok = all(w > n / 2 for _, w, n in wins_all if n)
        v.append(verdict("E3.5", lab, ok and all(n for _, _, n in wins_all),
                         "prior beats optimal per unit runtime under every setting (prior ahead "
                         "at most of optimal's points inside prior's time range): "
                         + "; ".join(f"{s}: {w}/{n}" for s, w, n in wins_all) + "."))
        a5p, a5o = res[E35_SETTINGS[0][0]]
        a1p, a1o = res[E35_SETTINGS[-1][0]]
        Cp, Co = max(a5p), max(a5o)
        dp = agg(a1p[Cp], "acc").mean() - agg(a5p[Cp], "acc").mean()
        do = agg(a1o[Co], "acc").mean() - agg(a5o[Co], "acc").mean()
        v.append(verdict("E3.5", lab, abs(dp) <= 0.01 and abs(do) <= 0.01,
                         f"α = 1 accuracy similar to α = 5 (within 1 point): prior C = {Cp} "
                         f"{100 * dp:+.2f} points, optimal C = {Co} {100 * do:+.2f} points "
                         f"(log p change {agg(a1p[Cp], 'lp').mean() - agg(a5p[Cp], 'lp').mean():+.4f} "
                         f"and {agg(a1o[Co], 'lp').mean() - agg(a5o[Co], 'lp').mean():+.4f})."))
        ax.set_xscale("log")
        ax.set_xlabel("fit seconds (1 thread)")
        ax.set_ylabel("test mean log p(y|x)")
        ax.set_title(f"{lab}: solid prior, dashed optimal")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
        out[lab] = {s: dict(prior={C: [r["key"] for r in rs] for C, rs in cp.items()},
                            optimal={C: [r["key"] for r in rs] for C, rs in co.items()})
                    for s, (cp, co) in res.items()}
    fig.suptitle("E3.5 (Figs. 3.8–3.11): hyperparameter sensitivity")
    fig.tight_layout()
    fig.savefig(cfg["out"] / "ch3_e35.png", dpi=110)
    plt.close(fig)
    sections.append(("E3.5 hyperparameter sensitivity (Figs. 3.8–3.11)", "\n".join(body), v))
    data_out["e35"] = out


def e36(cfg, R, sections, data_out):
    """E3.6 CART baselines against SMC; the issue's target per data set."""
    smc_cfgs = cfg["e36_smc"]
    body = ["scikit-learn `DecisionTreeClassifier(criterion, min_samples_leaf, random_state=seed)` "
            "on the full training set; leaf probabilities recounted from the training rows "
            "in each leaf and Laplace-smoothed, (n_k + 1)/(n + K) (column 'log p'); the "
            "spec A3 form (n_k + α/K)/(n + α) with α = 5 is in column 'log p (A3)'. "
            "Accuracy is the argmax of the leaf counts. Fit seconds include the recount. "
            f"SMC rows: {', '.join(s[0] for s in smc_cfgs)}; the first is the pre-declared "
            "SMC for the issue's target. Seeds " + str(cfg["e36_seeds"]) + ".", ""]
    v, out = [], {}
    fig, axs = plt.subplots(2, len(cfg["e36_data"]), figsize=(4.2 * len(cfg["e36_data"]), 7))
    for di, name in enumerate(cfg["e36_data"]):
        log(f"E3.6 {name}")
        rows = []
        carts = {}
        for crit in ["gini", "entropy"]:
            for msl in [1, 5, 10]:
                rs = [R.cart(name, s, crit, msl) for s in cfg["e36_seeds"]]
                carts[(crit, msl)] = rs
                rows.append([f"CART {crit}, min_samples_leaf={msl}", ms(agg(rs, "lp"), "{:.4f}"),
                             ms(agg(rs, "lp_a3"), "{:.4f}"), ms(100 * agg(rs, "acc"), "{:.2f}"),
                             ms(agg(rs, "fit_s"), "{:.3f}"),
                             f"{agg(rs, 'n_leaves').mean():.0f} leaves, depth {agg(rs, 'depth').mean():.0f}"])
        smcs = {}
        for slab, prop, C, I in smc_cfgs:
            rs = [R.smc(name, None, s, prop, "breadth_first", C, I) for s in cfg["e36_seeds"]]
            smcs[slab] = rs
            rows.append([f"SMC {slab}", ms(agg(rs, "lp"), "{:.4f}"), "", ms(100 * agg(rs, "acc"), "{:.2f}"),
                         ms(agg(rs, "fit_s"), "{:.3f}"),
                         f"{agg(rs, 'mean_leaves').mean():.0f} leaves, depth {agg(rs, 'mean_depth').mean():.1f}"])
        Xtr, ytr, Xte, yte = dataset(name)
        body += [f"### {name} ({len(ytr)} train / {len(yte)} test, D = {Xtr.shape[1]}, "
                 f"K = {int(ytr.max()) + 1})", "",
                 md_table(["method", "test log p(y|x)", "log p (A3)", "accuracy %",
                           "fit s (1 thread)", "size"], rows), ""]
        cl = {k: agg(rs, "lp").mean() for k, rs in carts.items()}
        ca = {k: agg(rs, "acc").mean() for k, rs in carts.items()}
        best_lp_k = max(cl, key=cl.get)
        ref_k = max([("gini", 10), ("entropy", 10)], key=lambda k: ca[k])
        best_acc_k = max(ca, key=ca.get)
        slab0 = smc_cfgs[0][0]
        s_lp, s_acc = agg(smcs[slab0], "lp").mean(), agg(smcs[slab0], "acc").mean()
        lp_ok = s_lp > cl[best_lp_k]
        acc_ok = s_acc >= ca[ref_k] - 0.01
        v.append(verdict("E3.6 target", name, lp_ok and acc_ok,
                         f"issue target, SMC {slab0}: test log p {s_lp:.4f} better than every CART "
                         f"(best CART {best_lp_k[0]}/msl={best_lp_k[1]} {cl[best_lp_k]:.4f}): "
                         f"{lp_ok}; accuracy {100 * s_acc:.2f} within 1 point of CART "
                         f"(the spec's min_samples_leaf = 10, better criterion {ref_k[0]}: "
                         f"{100 * ca[ref_k]:.2f}): {acc_ok}. Against the most accurate CART "
                         f"({best_acc_k[0]}/msl={best_acc_k[1]}, {100 * ca[best_acc_k]:.2f}): "
                         f"{100 * (s_acc - ca[best_acc_k]):+.2f} points. SMC fit "
                         f"{agg(smcs[slab0], 'fit_s').mean():.2f} s vs CART(msl=10, {ref_k[0]}) "
                         f"{agg(carts[ref_k], 'fit_s').mean():.3f} s."))
        # Thesis claims: Bayesian trees match or beat CART accuracy, much better log p.
        best_smc_acc = max(agg(rs, "acc").mean() for rs in smcs.values())
        v.append(verdict("E3.6", name, best_smc_acc >= ca[ref_k] and min(
            agg(rs, "lp").mean() for rs in smcs.values()) > cl[best_lp_k],
            "Bayesian trees match or beat CART (min_samples_leaf = 10) on accuracy and beat every "
            "CART on log p (every SMC row above): best SMC accuracy "
            f"{100 * best_smc_acc:.2f} vs {100 * ca[ref_k]:.2f}; worst SMC log p "
            f"{min(agg(rs, 'lp').mean() for rs in smcs.values()):.4f} vs best CART {cl[best_lp_k]:.4f}."))
        acc_small = all(max(ca[(c, 1)], ca[(c, 5)]) > ca[(c, 10)] for c in ["gini", "entropy"])
        lp_small = all(max(cl[(c, 1)], cl[(c, 5)]) < cl[(c, 10)] for c in ["gini", "entropy"])
        v.append(verdict("E3.6", name, acc_small and lp_small,
                         "CART min_samples_leaf ∈ {1, 5} gives higher accuracy but worse log p than "
                         "10 (both criteria): accuracy "
                         + ", ".join(f"{c} {100 * ca[(c, 1)]:.1f}/{100 * ca[(c, 5)]:.1f}/{100 * ca[(c, 10)]:.1f}"
                                     for c in ["gini", "entropy"])
                         + "; log p " + ", ".join(f"{c} {cl[(c, 1)]:.3f}/{cl[(c, 5)]:.3f}/{cl[(c, 10)]:.3f}"
                                                 for c in ["gini", "entropy"]) + " (msl 1/5/10)."))
        labels = [f"{c[:4]} {m}" for c, m in carts] + [s[0].split(",")[0] + f" C={s[2]} I={s[3]}" for s in smc_cfgs]
        for ax, field in zip(axs[:, di], ["lp", "acc"]):
            vals = [agg(rs, field).mean() for rs in carts.values()] + [agg(rs, field).mean() for rs in smcs.values()]
            errs = [agg(rs, field).std() for rs in carts.values()] + [agg(rs, field).std() for rs in smcs.values()]
            ax.barh(range(len(vals)), vals, xerr=errs,
                    color=["C7"] * len(carts) + [f"C{i}" for i in range(len(smcs))])
            ax.set_yticks(range(len(vals)), labels, fontsize=7)
            ax.set_xlabel("test mean log p(y|x)" if field == "lp" else "test accuracy")
            lo = min(vals) - 0.05 * abs(min(vals)) if field == "acc" else None
            if lo is not None:
                ax.set_xlim(max(0, lo), None)
            ax.set_title(name)
            ax.grid(alpha=0.3, axis="x")
        out[name] = dict(cart={f"{c}/{m}": [r["key"] for r in rs] for (c, m), rs in carts.items()},
                         smc={k: [r["key"] for r in rs] for k, rs in smcs.items()})
    fig.suptitle("E3.6: CART (Laplace-smoothed leaves) vs SMC")
    fig.tight_layout()
    fig.savefig(cfg["out"] / "ch3_e36.png", dpi=110)
    plt.close(fig)
    sections.append(("E3.6 CART (Fig. 3.6 bars) and the issue's target", "\n".join(body), v))
    data_out["e36"] = out


# ============================================================================ main

def config(quick):
    if quick:
        return dict(seeds=[0, 1], prior_C=[10, 30, 100, 300], opt_C=[1, 3, 10, 30],
                    e31_data=[("letter", 2000), ("satimage", 1500)],
                    e33_data=[("letter", 2000), ("satimage", 1500)], island_C=1000,
                    islands=[1, 5, 10, 20, 50], island_seeds=[0],
                    e34_data=[("letter", 2000), ("satimage", 1500), ("dna", None)],
                    e34_mcmc_iters=dict(letter=5000, satimage=5000, dna=5000),
                    e34_smc_C=[100, 300], e34_islands=5, e34_seeds=[0, 1],
                    e35_data=[("satimage", 1500)], e35_seeds=[0], e35_prior_C=[30, 100, 300],
                    e35_opt_C=[1, 3, 10],
                    e36_data=["satimage", "dna"], e36_seeds=[0, 1],
                    e36_smc=[("prior, node-wise, C=300, I=5", "prior", 300, 5),
                             ("optimal, node-wise, C=10, I=1", "optimal", 10, 1)])
    return dict(seeds=list(range(10)), prior_C=[10, 30, 100, 300, 1000, 3000],
                opt_C=[1, 3, 10, 30, 100],
                e31_data=[("letter", 5000), ("satimage", None)],
                e33_data=[("letter", 5000), ("satimage", None)], island_C=2000,
                islands=[1, 2, 5, 10, 20, 50, 100, 200], island_seeds=list(range(5)),
                e34_data=[("letter", 5000), ("satimage", None), ("dna", None)],
                e34_mcmc_iters=dict(letter=200000, satimage=200000, dna=100000),
                e34_smc_C=[100, 300, 1000, 3000], e34_islands=5,
                e34_seeds=[int(x) for x in os.environ.get("E34_SEEDS", "0,1,2,3,4,5,6,7,8,9").split(",")],
                e35_data=[("letter", 5000), ("satimage", None)], e35_seeds=list(range(5)),
                e35_prior_C=[30, 100, 300, 1000], e35_opt_C=[1, 3, 10],
                e36_data=["letter", "satimage", "dna", "usps"], e36_seeds=list(range(5)),
                e36_smc=[("prior, node-wise, C=1000, I=5", "prior", 1000, 5),
                         ("optimal, node-wise, C=10, I=1", "optimal", 10, 1),
                         ("prior, node-wise, C=100, I=1 (library defaults)", "prior", 100, 1)])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="e31,e32,e33,e34,e35,e36")
    ap.add_argument("--quick", action="store_true", help="small settings -> results/quick/")
    ap.add_argument("--out", default=None)
    ap.add_argument("--cache", default=None, help="JSONL fit cache (default /tmp/...)")
    args = ap.parse_args()
    out = Path(args.out) if args.out else HERE / "results" / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    cfg = config(args.quick)
    cfg["out"] = out
    cache = args.cache or f"/tmp/bayes_ch3_cache{'_quick' if args.quick else ''}.jsonl"
    R = Runner(cache)
    log(f"cache {cache}: {len(R.records)} fits already there")
    funcs = dict(e31=e31, e32=e32, e33=e33, e34=e34, e35=e35, e36=e36)
    todo = [s.strip() for s in args.only.split(",") if s.strip()]
    sections, data_out, wall = [], {}, {}
    started = now()
    with threadpool_limits(1):
        for name in todo:
            t0 = time.perf_counter()
            funcs[name](cfg, R, sections, data_out)
            wall[name] = time.perf_counter() - t0
            log(f"{name} done in {wall[name]:.1f} s")
    ver = versions()
    used = set()
    for d in data_out.values():
        def walk(o):
            if isinstance(o, dict):
                for x in o.values():
                    walk(x)
            elif isinstance(o, list):
                for x in o:
                    walk(x)
            elif isinstance(o, str) and o in R.records:
                used.add(o)
        walk(d)
    fit_total = sum(R.records[k]["fit_s"] for k in used)
    n_pass = sum(v["ok"] for v in VERDICTS)
    text = ["# Thesis chapter 3: top-down SMC Bayesian decision trees (spec §5.1–5.2)", ""]
    if args.quick:
        text += ["**Quick run (reduced settings): not the committed result.**", ""]
    text += [
        "`mondrian_ml.SMCTreeClassifier` (E3.4's MCMC comparison: the `mcmc_tree` example "
        "binary, CGM MCMC and SMC from one build) on the spec's local substitutes (§5.1): letter "
        "(pen-digits), satimage (magic-04), dna (weakly, madelon). Common setup (§5.2): α = 5, "
        "α_s = 0.95, β_s = 0.5, ESS threshold C/10 (`ess_threshold=0.1`), multinomial "
        "resampling, `min_samples_split=2` (adds nothing to the prior), I = 1 unless stated. "
        "Test log p(y|x) is the mean over test rows of the natural log of the posterior "
        "predictive at the true label (spec A7). Fit seconds: `fit` only, one thread "
        "(`n_jobs=1`, BLAS one thread), prediction excluded (§5.2). Data splits are the "
        "data folder's predefined ones (letter 15000/5000, satimage 4435/2000, dna 1400/1186 "
        "with dna_val unused, usps 7291/2007) rather than [T]'s 70/30 random splits; the "
        "seed varies the sampler (and CART's tie-breaking) only.", "",
        "**Reductions from the spec's protocol** (to keep the run near 40 minutes on 2 "
        "shared cores): " + ("quick settings." if args.quick else
        "letter's training set is a fixed random subset of 5000 of its 15000 rows (rng 0, "
        "with its test set a fixed random 2000 of the 5000 test rows (rng 1): prediction with "
        "thousands of trees costs more than the fit) in E3.1, E3.3, E3.4 and E3.5 (E3.6 "
        "uses the whole letter split); E3.1, E3.2 and "
        "E3.4 use the spec's 10 seeds, E3.3, E3.5 and E3.6 use 5. Particle grids stop at "
        "C = 3000 (prior) and C = 100 (optimal); the island experiment uses I ≤ 200."), "",
        f"Verdicts: **{n_pass} PASS, {len(VERDICTS) - n_pass} FAIL** of {len(VERDICTS)}. "
        "Each rule's thresholds are stated in its line; they are ours (the spec gives "
        "qualitative orderings only, §5).", ""]
    for title, body, vs in sections:
        text += [f"## {title}", "", body, "", "Verdicts:", ""] + vs + [""]
    text += ["## Run", "",
             f"Command: `{command_line()}`, started {started}, finished {now()}; wall seconds "
             + ", ".join(f"{k} {v:.0f}" for k, v in wall.items())
             + f"; sum of fit seconds over the {len(used)} fits used: {fit_total:.0f}. Versions: "
             + ", ".join(f"{k} {v}" for k, v in ver.items()) + ".", ""]
    (out / "ch3.md").write_text("\n".join(text))
    save_json(out / "ch3.json", dict(
        command=command_line(), started=started, finished=now(), wall_seconds=wall,
        versions=ver, config={k: (str(v) if isinstance(v, Path) else v) for k, v in cfg.items()},
        common_setup=BASE, verdicts=VERDICTS, experiments=data_out,
        fits=[R.records[k] for k in sorted(used)]))
    print("\n".join(text), flush=True)


if __name__ == "__main__":
    main()
