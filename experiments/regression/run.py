#!/usr/bin/env python3
"""UCI regression comparison: our Mondrian forest regressor against scikit-learn forests
with a Gaussian predictive, and river's Aggregated Mondrian Forest.

Protocol
  Data: /work/shared/data/regression/<name>.csv (header, target in the last column).
  Splits: the standard 90/10 splits of the UCI "Bayesian deep learning" benchmark
  (`splits/<name>_test_idx.txt`, line k = 0-based test rows of split k); the first
  --splits of them. Data sets without a split file (california_housing) use seeded random
  90/10 splits: test = first floor(N/10) rows of numpy.random.default_rng(k).permutation(N).
  The training rows of split k are put in a random order
  (numpy.random.default_rng(10_000 + k)); every method sees this same order.

Methods (all on identical splits, in one Python process, one thread each)
  MF exact      `mondrian eval --task regression --mode exact` (the thesis settings: 10 trees,
                min_samples_split 10), --seed k --threads 1.
  MF fast       the same with --mode fast.
  MF exact 100  the same as MF exact with --trees 100 (equal tree count to the sklearn
                forests); off with --no-mf100.
  MF online     `eval --online` (one point at a time through partial_fit): fast mode on every
                set, exact mode on sets with n_train <= --exact-online-max-n.
  MF variants   fast mode, 100 trees: min_samples_split 5 or 2; feature weights relevance
                or relevance:cv (power by 5-fold CV); `--calibration cv` (intervals
                recalibrated by 5-fold CV PITs). The fully grown one (mss 2, rel-cv) and the
                calibrated one (mss 5, rel-cv) are also scored as a pair, the way the
                scikit-learn forests are: RMSE from the first, NLPD and coverage from the
                second.
  RF / ERT      sklearn RandomForestRegressor / ExtraTreesRegressor, --sk-trees trees (100),
                defaults otherwise (max_features=1.0), n_jobs=1, random_state=k.
                RMSE from the fully grown forest (min_samples_leaf=1). The Gaussian
                predictive (NLPD, coverage) from a second forest with min_samples_leaf=5,
                as SMAC's random-forest surrogate: per tree t the training targets in the
                leaf of x give m_t(x), v_t(x) (population variance; RF: the tree's in-bag
                bootstrap sample with its multiplicities, which reproduces the tree's own leaf
                value; ERT: all training targets, ERT does not bootstrap); predictive
                N(mean_t m_t, mean_t v_t + var_t m_t), variance floored at 1e-12.
  AMF           river.forest.AMFRegressor(n_estimators=10, seed=k), defaults otherwise,
                learn_one over the shuffled training stream, features min-max rescaled with
                the training min/max; predict_one on the test set; RMSE only. Stream time
                budget --amf-budget seconds per split: points after the budget are skipped
                (the number learnt is reported).

Outputs under --out: results.json (raw, per split), summary.md, regression_comparison.png.
`--summarize-only` rebuilds summary.md and the plot from results.json.

Full run (from the repository root):
  target/pyenv/bin/python experiments/regression/run.py
Smoke test:
  target/pyenv/bin/python experiments/regression/run.py --quick
"""
from __future__ import annotations

import os

# The machine has 2 cores shared with other work; every method is timed single-threaded.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import datetime as _dt
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# The data, metrics, CLI calls, bookkeeping and table cells are in helpers.py (shared with
# the diagnostics beside this script); summary.md and the plot are written by report.py.
from helpers import (ALL_DATASETS, DEFAULT_BINARY, DEFAULT_DATA_DIR, DEFAULT_OUT,
                     DEFAULT_QUICK_OUT, REPO_ROOT, SHORT, csv_list, gaussian_metrics, load_dataset,
                     log, machine, mf_eval, mf_sharpness, rmse, split_indices, versions, write_csv)
from report import summarize


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", type=csv_list, default=ALL_DATASETS,
                   help="comma-separated (default: all eight)")
    p.add_argument("--splits", type=int, default=5, help="first S splits per data set (default 5)")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--binary", type=Path, default=DEFAULT_BINARY)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--sk-trees", type=int, default=100, help="trees of the sklearn forests (100)")
    p.add_argument("--sk-min-leaf", type=int, default=5,
                   help="min_samples_leaf of the sklearn forests giving the predictive (5)")
    p.add_argument("--no-mf100", action="store_true", help="skip MF exact with 100 trees")
    p.add_argument("--exact-online-max-n", type=int, default=10000,
                   help="run MF exact online only when n_train <= this (default 10000)")
    p.add_argument("--amf-budget", type=float, default=120.0,
                   help="AMF learn_one time budget per split, seconds (default 120)")
    p.add_argument("--no-amf", action="store_true")
    p.add_argument("--no-ert1", action="store_true",
                   help="skip the diagnostic ExtraTrees with max_features=1 (random feature, "
                        "random threshold: splits chosen without looking at the targets' fit)")
    p.add_argument("--max-train", type=int, default=None,
                   help="cap the training rows (the first of the shuffled order)")
    p.add_argument("--max-test", type=int, default=None, help="cap the test rows")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 1 split, <=1000 train / <=300 test rows, 20 sklearn trees, "
                        "AMF budget 5 s")
    p.add_argument("--summarize-only", action="store_true")
    a = p.parse_args(argv)
    if a.quick:
        a.splits = 1
        a.sk_trees = min(a.sk_trees, 20)
        a.amf_budget = min(a.amf_budget, 5.0)
        a.max_train = a.max_train or 1000
        a.max_test = a.max_test or 300
    if a.out is None:
        a.out = DEFAULT_QUICK_OUT if a.quick else DEFAULT_OUT
    for d in a.datasets:
        if d not in ALL_DATASETS:
            p.error(f"unknown data set {d!r}; known: {', '.join(ALL_DATASETS)}")
    return a


# --------------------------------------------------------------------------- sklearn

def leaf_stats(forest, X_tr, y_tr, bootstrap: bool):
    """Per tree: arrays (count, mean, var) over the nodes, from the tree's training targets
    (in-bag bootstrap multiplicities when the forest bootstraps)."""
    n = len(y_tr)
    yc = y_tr - y_tr.mean()  # centred to keep s2/s0 - m^2 accurate
    stats = []
    samples = forest.estimators_samples_ if bootstrap else None
    for t, est in enumerate(forest.estimators_):
        nodes = est.tree_.node_count
        leaves = est.apply(X_tr)
        w = np.bincount(samples[t], minlength=n).astype(np.float64) if bootstrap else np.ones(n)
        s0 = np.bincount(leaves, weights=w, minlength=nodes)
        s1 = np.bincount(leaves, weights=w * yc, minlength=nodes)
        s2 = np.bincount(leaves, weights=w * yc * yc, minlength=nodes)
        with np.errstate(invalid="ignore", divide="ignore"):
            m = s1 / s0
            v = np.maximum(s2 / s0 - m * m, 0.0)
        stats.append((m + y_tr.mean(), v))
    return stats


def sk_predictive(forest, stats, X_te):
    T = len(forest.estimators_)
    M = np.empty((T, X_te.shape[0]))
    V = np.empty_like(M)
    for t, est in enumerate(forest.estimators_):
        lt = est.apply(X_te)
        M[t] = stats[t][0][lt]
        V[t] = stats[t][1][lt]
    return M.mean(0), V.mean(0) + M.var(0)


def run_sklearn(kind, X_tr, y_tr, X_te, y_te, seed, trees, min_leaf) -> dict:
    from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor
    cls = RandomForestRegressor if kind == "rf" else ExtraTreesRegressor
    bootstrap = kind == "rf"
    extra = {"max_features": 1} if kind == "ert1" else {}
    r = {}
    # (a) fully grown forest: RMSE.
    f = cls(n_estimators=trees, n_jobs=1, random_state=seed, **extra)
    t0 = time.perf_counter()
    f.fit(X_tr, y_tr)
    r["fit_seconds_full"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = f.predict(X_te)
    r["predict_seconds_full"] = time.perf_counter() - t0
    r["rmse"] = rmse(y_te, p)
    del f
    # (b) min_samples_leaf forest: Gaussian predictive (law of total variance over trees).
    g = cls(n_estimators=trees, n_jobs=1, random_state=seed, min_samples_leaf=min_leaf, **extra)
    t0 = time.perf_counter()
    g.fit(X_tr, y_tr)
    stats = leaf_stats(g, X_tr, y_tr, bootstrap)  # part of fitting the predictive
    r["fit_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    mean, var = sk_predictive(g, stats, X_te)
    r["predict_seconds"] = time.perf_counter() - t0
    # The leaf means must reproduce the forest's own prediction.
    check = float(np.max(np.abs(mean - g.predict(X_te))) / (np.std(y_tr) + 1e-300))
    r["leafmean_vs_predict_maxdiff"] = check
    if check > 1e-6:
        log(f"  WARNING {kind}: leaf-stat mean differs from predict() by {check:.2e} (relative)")
    r.update(gaussian_metrics(y_te, mean, var))
    r["fit_seconds_total"] = r["fit_seconds_full"] + r["fit_seconds"]
    r["trees"] = trees
    r["min_samples_leaf_predictive"] = min_leaf
    return r


# --------------------------------------------------------------------------- AMF

def run_amf(X_tr, y_tr, X_te, y_te, seed, budget) -> dict:
    from river import forest
    lo, hi = X_tr.min(0), X_tr.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    keys = [f"x{i}" for i in range(X_tr.shape[1])]
    tr = [dict(zip(keys, row)) for row in ((X_tr - lo) / span).tolist()]
    te = [dict(zip(keys, row)) for row in ((X_te - lo) / span).tolist()]
    ys = y_tr.tolist()
    m = forest.AMFRegressor(n_estimators=10, seed=seed)
    n_done = 0
    t0 = time.perf_counter()
    for x, y in zip(tr, ys):
        m.learn_one(x, y)
        n_done += 1
        if time.perf_counter() - t0 > budget:
            break
    fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = np.array([m.predict_one(x) for x in te], dtype=np.float64)
    pred = time.perf_counter() - t0
    return {"rmse": rmse(y_te, p), "nlpd": None, "coverage_90": None, "fit_seconds": fit,
            "predict_seconds": pred, "n_learnt": n_done, "n_train": len(ys),
            "complete": n_done == len(ys), "throughput": n_done * 10 / max(fit, 1e-12), "trees": 10}



# --------------------------------------------------------------------------- run

def run_split(a, name, cols, X, y, k, tmp: Path) -> dict:
    tr, te, source = split_indices(a.data_dir, name, len(y), k)
    if a.max_train:
        tr = tr[: a.max_train]
    if a.max_test:
        te = te[: a.max_test]
    X_tr, y_tr, X_te, y_te = X[tr], y[tr], X[te], y[te]
    train_csv, test_csv = tmp / "train.csv", tmp / "test.csv"
    write_csv(train_csv, cols, X_tr, y_tr)
    write_csv(test_csv, cols, X_te, y_te)
    res = {"split": k, "split_source": source, "n_train": len(tr), "n_test": len(te),
           "var_y_train": float(np.var(y_tr)), "var_y_test": float(np.var(y_te)),
           "test_idx_head": te[:5].tolist(), "methods": {}}
    M = res["methods"]

    runs = [("mf_exact", 10, "exact", False), ("mf_fast", 10, "fast", False),
            ("mf_exact_ml", 10, "exact", False)]
    if not a.no_mf100:
        runs.append(("mf_exact100", 100, "exact", False))
    runs += [("mf_fast100_mss5", 100, "fast", False), ("mf_fast100_mss2", 100, "fast", False),
             ("mf_exact_rel", 10, "exact", False), ("mf_fast100_mss5_rel", 100, "fast", False),
             ("mf_fast100_mss5_relcv", 100, "fast", False),
             ("mf_fast100_mss5_relcv_cal", 100, "fast", False),
             ("mf_fast100_mss2_relcv", 100, "fast", False)]
    runs.append(("mf_fast_online", 10, "fast", True))
    if len(tr) <= a.exact_online_max_n:
        runs.append(("mf_exact_online", 10, "exact", True))
    for key, trees, mode, online in runs:
        theta = "marginal-likelihood" if key.endswith("_ml") else "heuristic"
        mss = int(key.split("_mss", 1)[1].split("_")[0]) if "_mss" in key else 10
        calibration = "cv" if key.endswith("_cal") else "none"
        base = key.removesuffix("_cal")
        weights = {"_rel": "relevance", "_relcv": "relevance:cv"}.get(
            "_" + base.rsplit("_", 1)[1], "uniform")
        r = mf_eval(a.binary, train_csv, test_csv, k, trees, mode, online, theta, mss, weights,
                    calibration)
        r["fit_seconds"], r["predict_seconds"] = r["train_seconds"], r["predict_seconds"]
        if key in ("mf_exact", "mf_fast"):
            s = mf_sharpness(a.binary, train_csv, test_csv, k, trees, mode, tmp, y_te)
            r.update(s)
            if abs(s["rmse_from_predict"] - r["rmse"]) > 1e-6 * max(1.0, r["rmse"]):
                log(f"  WARNING {key}: train+predict RMSE {s['rmse_from_predict']:.6g} != eval RMSE {r['rmse']:.6g}")
        M[key] = r
        log(f"  {name} split {k}: {SHORT[key]:15s} rmse {r['rmse']:.4g} nlpd {r['nlpd']:.4g} "
            f"cov90 {r['coverage_90']:.3f} fit {r['train_seconds']:.3g}s  noise_var {r['noise_var']:.3g}")

    for kind in ("rf", "ert") + (() if a.no_ert1 else ("ert1",)):
        r = run_sklearn(kind, X_tr, y_tr, X_te, y_te, k, a.sk_trees, a.sk_min_leaf)
        M[kind] = r
        log(f"  {name} split {k}: {SHORT[kind]:15s} rmse {r['rmse']:.4g} nlpd {r['nlpd']:.4g} "
            f"cov90 {r['coverage_90']:.3f} fit {r['fit_seconds_total']:.3g}s")

    if not a.no_amf:
        r = run_amf(X_tr, y_tr, X_te, y_te, k, a.amf_budget)
        M["amf"] = r
        log(f"  {name} split {k}: {'AMF':15s} rmse {r['rmse']:.4g} fit {r['fit_seconds']:.3g}s "
            f"({r['n_learnt']}/{r['n_train']} points)")
    return res


def main(argv=None) -> int:
    a = parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    rpath = a.out / "results.json"
    if a.summarize_only:
        results = json.loads(rpath.read_text())
        summarize(results, a.out)
        return 0
    if not a.binary.exists():
        raise SystemExit(f"{a.binary} not found: cargo build --release -p mondrian-cli")
    start = _dt.datetime.now()
    t_start = time.perf_counter()
    cmd = " ".join(shlex.quote(x) for x in [os.path.relpath(sys.executable, REPO_ROOT) if sys.executable.startswith(str(REPO_ROOT)) else sys.executable,
                                              os.path.relpath(__file__, REPO_ROOT), *(sys.argv[1:] if argv is None else argv)])
    results = {
        "command": cmd,
        "started": start.isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(a.binary),
        "config": {"datasets": a.datasets, "splits": a.splits, "sk_trees": a.sk_trees,
                   "sk_min_leaf": a.sk_min_leaf, "mf100": not a.no_mf100,
                   "exact_online_max_n": a.exact_online_max_n, "amf_budget": a.amf_budget,
                   "amf": not a.no_amf, "ert1": not a.no_ert1, "max_train": a.max_train, "max_test": a.max_test,
                   "quick": a.quick, "data_dir": str(a.data_dir)},
        "datasets": {},
    }
    with tempfile.TemporaryDirectory(prefix="mf-regression-") as tmpd:
        tmp = Path(tmpd)
        for name in a.datasets:
            cols, X, y = load_dataset(a.data_dir, name)
            log(f"{name}: N={len(y)} D={X.shape[1]}")
            t0 = time.perf_counter()
            ds = {"n": len(y), "d": X.shape[1], "splits": []}
            for k in range(a.splits):
                ds["splits"].append(run_split(a, name, cols, X, y, k, tmp))
            ds["wall_seconds"] = time.perf_counter() - t0
            results["datasets"][name] = ds
            log(f"{name}: done in {ds['wall_seconds']:.1f}s (total {time.perf_counter() - t_start:.0f}s)")
            rpath.write_text(json.dumps(results, indent=1))
    results["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    results["wall_seconds"] = time.perf_counter() - t_start
    rpath.write_text(json.dumps(results, indent=1))
    summarize(results, a.out)
    log(f"wrote {rpath}, {a.out / 'summary.md'}, {a.out / 'regression_comparison.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
