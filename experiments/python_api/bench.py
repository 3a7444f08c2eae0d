#!/usr/bin/env python3
"""Speed of the Python package `mondrian_ml` against the Rust CLI, scikit-learn and river.

In ONE Python process, on each data set (default: letter and usps):

1. Batch: `MondrianForestClassifier(n_estimators=100, random_state=S, n_jobs=1)` `fit` and
   `predict_proba` timed from Python, next to scikit-learn ExtraTreesClassifier(max_features=1)
   and RandomForestClassifier (100 trees, n_jobs=1). Accuracy of each.
2. Streams: river `forest.AMFClassifier(n_estimators=10, seed=S)` and our
   `MondrianForestClassifier(n_estimators=10, feature_ranges=[(0, 1)] * D, random_state=S)`,
   each with a `learn_one` loop over the same (rescaled, shuffled) training stream; dicts are
   built outside the timed loops. Throughput in points x trees / s, final test accuracy.
3. Python overhead against the Rust library called directly: `mondrian eval --threads 1
   --trees 100 --seed S --json` on the SAME data (CSV copies in experiments/python_api/.cache/),
   its `train_seconds` / `predict_seconds` against the Python `fit` / `predict_proba` times.
   Python and CLI runs are interleaved (order rotated each repetition), `--reps` times; medians
   are reported. The CLI and Python accuracies must be equal (same seed => same forest).
4. Per-point learn overhead: `mondrian eval --online --trees 10 --threads 1` train_seconds /
   n_train against the Python `learn_one` loop / n_train, on the same stream order (the CLI
   streams its training file in file order, so the cache file is written already shuffled).

Two extra in-process variants split the Python-side cost: the compiled core
(`mondrian_ml._core.ClassifierCore`, private) called directly with the arrays, which skips the
scikit-learn input validation, and `ClassifierCore.partial_fit_one` on pre-built lists, which
skips the dict -> list conversion of `learn_one`.

Outputs: results/bench.md and results/bench.json (results-quick/ with --quick).

  target/pyenv/bin/python experiments/python_api/bench.py                  # full run
  target/pyenv/bin/python experiments/python_api/bench.py --quick          # smoke test
  target/pyenv/bin/python experiments/python_api/bench.py --datasets letter --reps 9
"""
from __future__ import annotations

import os

# One core for numerical libraries: the machine has 2 cores shared with other work and
# everything here is timed single-threaded.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import datetime as _dt
import gc
import resource
import sys
import time
from pathlib import Path

import numpy as np

# The data, medians, bookkeeping and our classification helpers are in helpers.py; bench.md is
# written by report.py.
from helpers import (CACHE_DIR, HERE, REPO_ROOT, Data, command_line, git_rev, log, machine, med,
                     run_cli, save_json, score, spread, versions)
from report import write_md

DEFAULT_DATA_DIR = (REPO_ROOT / ".." / "shared" / "data" / "classification").resolve()
DEFAULT_BINARY = REPO_ROOT / "target" / "release" / "mondrian"
ALL_DATASETS = ["letter", "usps", "satimage", "dna"]

EVAL_KEYS = ["accuracy", "log_loss", "train_seconds", "predict_seconds", "n_train", "n_test", "trees"]


# ----------------------------------------------------------------------------- arguments

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--datasets", default="letter,usps", help="comma-separated, from " + ",".join(ALL_DATASETS))
    p.add_argument("--seed", type=int, default=1, help="seed S of every model and of the stream shuffle")
    p.add_argument("--reps", type=int, default=None, help="interleaved Python/CLI repetitions (default 5; 2 with --quick)")
    p.add_argument("--trees", type=int, default=100, help="trees of the batch forests (ours, ExtraTrees, RF)")
    p.add_argument("--stream-trees", type=int, default=10, help="trees of the streaming forests (AMF, ours)")
    p.add_argument("--amf-budget", type=float, default=None,
                   help="seconds of AMF learn_one time per data set before it stops (default 300; 10 with --quick)")
    p.add_argument("--sklearn-reps", type=int, default=1, help="fits of each scikit-learn baseline (median reported)")
    p.add_argument("--max-train", type=int, default=None, help="subsample the training set (default: all; 2000 with --quick)")
    p.add_argument("--max-test", type=int, default=None, help="subsample the test set (default: all; 1000 with --quick)")
    p.add_argument("--quick", action="store_true", help="smoke test: subsample, 2 reps, 10 s AMF budget")
    p.add_argument("--skip-amf", action="store_true")
    p.add_argument("--skip-sklearn", action="store_true")
    p.add_argument("--no-release-heap", action="store_true",
                   help="do not call gc.collect() + glibc malloc_trim(0) before each timed Python run (then a "
                        "fit can reuse pages of a forest freed before it and skip page faults the CLI pays)")
    p.add_argument("--profile", action="store_true",
                   help="after the timed runs, cProfile one Python fit+predict_proba and one learn_one loop per "
                        "data set and write the top entries to OUT/profile_<name>.txt (not timed)")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--mondrian", type=Path, default=DEFAULT_BINARY, help="the mondrian CLI binary")
    p.add_argument("--out", type=Path, default=None, help="output directory (default results/, or results-quick/)")
    a = p.parse_args(argv)
    a.datasets = [d.strip() for d in a.datasets.split(",") if d.strip()]
    bad = [d for d in a.datasets if d not in ALL_DATASETS]
    if bad:
        p.error(f"unknown data set(s) {bad}")
    if a.quick:
        a.reps = a.reps or 2
        a.amf_budget = a.amf_budget if a.amf_budget is not None else 10.0
        a.max_train = a.max_train or 2000
        a.max_test = a.max_test or 1000
    a.reps = a.reps or 5
    a.amf_budget = 300.0 if a.amf_budget is None else a.amf_budget
    if a.reps < 1:
        p.error("--reps must be >= 1")
    a.out = (a.out or (HERE / ("results-quick" if a.quick else "results"))).resolve()
    a.mondrian = a.mondrian.resolve()
    return a


# ----------------------------------------------------------------------------- helpers

def _libc():
    try:
        import ctypes
        lib = ctypes.CDLL("libc.so.6")
        lib.malloc_trim  # glibc only
        return lib
    except (OSError, AttributeError):
        return None


LIBC = _libc()
RELEASE_HEAP = True  # set from --no-release-heap in main()


def release_heap():
    """Frees garbage and hands the freed heap pages back to the OS (glibc malloc_trim), so that
    the next timed run starts like a fresh process: it has to fault in every page of the new
    forest, as the CLI does. Without this, a fit that follows a freed forest can reuse pages
    already mapped and skip most page faults (the usps forest is 1.5 GB, ~385k faults)."""
    gc.collect()
    if RELEASE_HEAP and LIBC is not None:
        LIBC.malloc_trim(0)


def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def child_faults():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt


def proba_from_dicts(dicts, K):
    P = np.zeros((len(dicts), K))
    for r, d in enumerate(dicts):
        for c, v in d.items():
            P[r, int(c)] = v
    return P


def cli(args, ds, trees, online=False):
    cmd = [str(args.mondrian), "eval", "--train", str(ds.train_csv), "--test", str(ds.test_csv),
           "--trees", str(trees), "--threads", "1", "--seed", str(args.seed), "--json"]
    if online:
        cmd.insert(-1, "--online")
    f0 = child_faults()
    rec = run_cli(cmd, EVAL_KEYS, None)
    rec["process_minor_faults"] = child_faults() - f0
    if "error" in rec:
        raise RuntimeError(f"CLI failed: {rec['error']}: {rec.get('stderr_tail', '')[-1000:]}\n  {rec['command']}")
    return rec


# ----------------------------------------------------------------------------- batch (1 and 3)

def py_batch(ds, args, release=True):
    from mondrian_ml import MondrianForestClassifier
    if release:
        release_heap()
    clf = MondrianForestClassifier(n_estimators=args.trees, random_state=args.seed, n_jobs=1)
    f0, t0 = faults(), time.perf_counter()
    clf.fit(ds.X, ds.y)
    t1, f1 = time.perf_counter(), faults()
    P = clf.predict_proba(ds.Xt)
    t2, f2 = time.perf_counter(), faults()
    full = np.zeros((len(ds.yt), ds.n_classes))
    full[:, clf.classes_.astype(int)] = P
    acc, ll = score(full, ds.yt)
    return dict(fit_seconds=t1 - t0, predict_seconds=t2 - t1, accuracy=acc, log_loss=ll,
                fit_minor_faults=f1 - f0, predict_minor_faults=f2 - f1)


def py_batch_warm(ds, args):
    """Right after `py_batch`, without releasing the heap: may reuse the pages of the forest just freed."""
    return py_batch(ds, args, release=False)


def core_batch(ds, args):
    """The compiled core alone (private API): the same forest without sklearn's validation."""
    from mondrian_ml import MondrianForestClassifier
    shell = MondrianForestClassifier(n_estimators=args.trees, random_state=args.seed, n_jobs=1)
    core = shell._new_core(ds.n_features, n_classes=ds.n_classes)
    y = ds.y.astype(np.int64)  # labels are already 0..K-1
    release_heap()
    f0, t0 = faults(), time.perf_counter()
    core.fit(ds.X, y)
    t1, f1 = time.perf_counter(), faults()
    P = core.predict_proba(ds.Xt)
    t2, f2 = time.perf_counter(), faults()
    acc, ll = score(np.asarray(P), ds.yt)
    return dict(fit_seconds=t1 - t0, predict_seconds=t2 - t1, accuracy=acc, log_loss=ll,
                fit_minor_faults=f1 - f0, predict_minor_faults=f2 - f1)


def cli_batch(ds, args):
    rec = cli(args, ds, args.trees)
    r = rec["result"]
    return dict(fit_seconds=r["train_seconds"], predict_seconds=r["predict_seconds"],
                accuracy=r["accuracy"], log_loss=r["log_loss"], wall_seconds=rec["wall_seconds"],
                process_minor_faults=rec["process_minor_faults"], model_bytes=r.get("model_bytes"),
                n_nodes=r.get("n_nodes"), command=rec["command"])


def run_batch(ds, args):
    variants = {"python": py_batch, "core": core_batch, "cli": cli_batch}
    log("  warm-up (untimed): one Python fit + predict_proba")
    warm = py_batch(ds, args)
    runs = {k: [] for k in [*variants, "python_warm"]}
    order_log = []
    for rep in range(args.reps):
        keys = list(variants)
        k = rep % len(keys)
        order = keys[k:] + keys[:k]  # rotate so that each variant takes each position
        order_log.append(order)
        for key in order:
            r = variants[key](ds, args)
            r["rep"] = rep
            runs[key].append(r)
            if key == "python":  # the same again at once, heap not released
                r = py_batch_warm(ds, args)
                r["rep"] = rep
                runs["python_warm"].append(r)
        log(f"  batch rep {rep + 1}/{args.reps} ({' -> '.join(order)}): " + ", ".join(
            f"{key} fit {runs[key][-1]['fit_seconds']:.3f}s pred {runs[key][-1]['predict_seconds']:.3f}s"
            for key in runs))
    out = {"warmup": warm, "runs": runs, "orders": order_log, "summary": {}}
    for key, rs in runs.items():
        out["summary"][key] = dict(
            fit_median=med([r["fit_seconds"] for r in rs]), fit_range=spread([r["fit_seconds"] for r in rs]),
            predict_median=med([r["predict_seconds"] for r in rs]),
            predict_range=spread([r["predict_seconds"] for r in rs]),
            fit_faults_median=med([r.get("fit_minor_faults", r.get("process_minor_faults")) for r in rs]),
            accuracies=sorted({r["accuracy"] for r in rs}), log_losses=sorted({r["log_loss"] for r in rs}))
    py, cl, co, pw = runs["python"], runs["cli"], runs["core"], runs["python_warm"]
    ov = {}
    for what in ("fit", "predict"):
        k = f"{what}_seconds"
        ov[what] = dict(
            python_median=med([r[k] for r in py]), core_median=med([r[k] for r in co]),
            rust_median=med([r[k] for r in cl]),
            overhead_pct_of_medians=100 * (med([r[k] for r in py]) / med([r[k] for r in cl]) - 1),
            overhead_pct_paired_median=100 * (med([a[k] / b[k] for a, b in zip(py, cl)]) - 1),
            paired_ratios=[a[k] / b[k] for a, b in zip(py, cl)],
            core_overhead_pct_of_medians=100 * (med([r[k] for r in co]) / med([r[k] for r in cl]) - 1),
            wrapper_vs_core_pct_of_medians=100 * (med([r[k] for r in py]) / med([r[k] for r in co]) - 1),
            python_warm_median=med([r[k] for r in pw]),
            warm_overhead_pct_of_medians=100 * (med([r[k] for r in pw]) / med([r[k] for r in cl]) - 1))
    out["overhead"] = ov
    # same seed => same model: every run must give the CLI's accuracy and log loss
    accs = {key: {r["accuracy"] for r in rs} for key, rs in runs.items()}
    lls = {key: [r["log_loss"] for r in rs] for key, rs in runs.items()}
    all_acc = set().union(*accs.values()) | {warm["accuracy"]}
    ll_all = [x for v in lls.values() for x in v]
    same = len(all_acc) == 1 and (max(ll_all) - min(ll_all)) <= 1e-9 * max(1.0, abs(max(ll_all)))
    out["same_model_check"] = dict(ok=same, accuracies={k: sorted(v) for k, v in accs.items()},
                                   log_loss_spread=max(ll_all) - min(ll_all))
    if not same:
        log(f"  !! WARNING: Python and CLI accuracies/log losses differ: {out['same_model_check']}")
    return out


def run_sklearn(ds, args):
    from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
    makers = {
        "et1": ("ExtraTreesClassifier(max_features=1)",
                lambda: ExtraTreesClassifier(n_estimators=args.trees, max_features=1, n_jobs=1,
                                             random_state=args.seed)),
        "rf": ("RandomForestClassifier()",
               lambda: RandomForestClassifier(n_estimators=args.trees, n_jobs=1, random_state=args.seed)),
    }
    out = {}
    for key, (label, make) in makers.items():
        runs = []
        for _ in range(args.sklearn_reps):
            m = make()
            release_heap()
            t0 = time.perf_counter()
            m.fit(ds.X, ds.y)
            t1 = time.perf_counter()
            P = m.predict_proba(ds.Xt)
            t2 = time.perf_counter()
            full = np.zeros((len(ds.yt), ds.n_classes))
            full[:, m.classes_.astype(int)] = P
            acc, ll = score(full, ds.yt)
            runs.append(dict(fit_seconds=t1 - t0, predict_seconds=t2 - t1, accuracy=acc, log_loss=ll))
        out[key] = dict(label=label, runs=runs, fit_median=med([r["fit_seconds"] for r in runs]),
                        predict_median=med([r["predict_seconds"] for r in runs]),
                        accuracy=runs[-1]["accuracy"], log_loss=runs[-1]["log_loss"])
        log(f"  sklearn {label}: fit {out[key]['fit_median']:.3f}s, predict_proba "
            f"{out[key]['predict_median']:.3f}s, acc {out[key]['accuracy']:.4f}")
    return out


# ----------------------------------------------------------------------------- streams (2 and 4)

def py_stream(ds, args, train_dicts, ys, test_dicts):
    from mondrian_ml import MondrianForestClassifier
    model = MondrianForestClassifier(n_estimators=args.stream_trees, random_state=args.seed,
                                     feature_ranges=[(0.0, 1.0)] * ds.n_features)
    learn_one = model.learn_one
    release_heap()
    f0, t0 = faults(), time.perf_counter()
    for x, y in zip(train_dicts, ys):
        learn_one(x, y)
    learn_s, f1 = time.perf_counter() - t0, faults()
    t0 = time.perf_counter()
    probs = [model.predict_proba_one(x) for x in test_dicts]
    pred_s = time.perf_counter() - t0
    acc, ll = score(proba_from_dicts(probs, ds.n_classes), ds.yt)
    return model, dict(learn_seconds=learn_s, predict_one_seconds=pred_s, accuracy=acc, log_loss=ll,
                       learn_minor_faults=f1 - f0)


def core_stream(ds, args, rows, ys):
    """ClassifierCore.partial_fit_one on pre-built lists (private API): learn_one without the
    dict -> list conversion and label lookup."""
    from mondrian_ml import MondrianForestClassifier
    shell = MondrianForestClassifier(n_estimators=args.stream_trees, random_state=args.seed,
                                     feature_ranges=[(0.0, 1.0)] * ds.n_features)
    core = shell._new_core(ds.n_features, n_classes=ds.n_classes)
    fit_one = core.partial_fit_one
    release_heap()
    f0, t0 = faults(), time.perf_counter()
    for x, y in zip(rows, ys):
        fit_one(x, y)
    learn_s, f1 = time.perf_counter() - t0, faults()
    t0 = time.perf_counter()
    P = np.asarray(core.predict_proba(ds.Xt))
    pred_s = time.perf_counter() - t0
    acc, ll = score(P, ds.yt)
    return dict(learn_seconds=learn_s, predict_array_seconds=pred_s, accuracy=acc, log_loss=ll,
                learn_minor_faults=f1 - f0)


def cli_stream(ds, args):
    rec = cli(args, ds, args.stream_trees, online=True)
    r = rec["result"]
    return dict(learn_seconds=r["train_seconds"], predict_array_seconds=r["predict_seconds"],
                accuracy=r["accuracy"], log_loss=r["log_loss"], wall_seconds=rec["wall_seconds"],
                process_minor_faults=rec["process_minor_faults"], command=rec["command"])


def run_amf(ds, args, train_dicts, ys, test_dicts):
    from river.forest import AMFClassifier
    model = AMFClassifier(n_estimators=args.stream_trees, seed=args.seed)
    release_heap()
    learn_s, i, n = 0.0, 0, len(ys)
    while i < n and learn_s < args.amf_budget:
        j = min(n, i + 256)
        t0 = time.perf_counter()
        for k in range(i, j):
            model.learn_one(train_dicts[k], ys[k])
        learn_s += time.perf_counter() - t0
        i = j
    log(f"  AMF learned {i}/{n} points in {learn_s:.1f}s" + ("" if i == n else " (time budget reached)"))
    t0 = time.perf_counter()
    probs = [model.predict_proba_one(x) for x in test_dicts]
    pred_s = time.perf_counter() - t0
    acc, ll = score(proba_from_dicts(probs, ds.n_classes), ds.yt)
    return dict(n_learned=i, n_train=n, capped=i < n, learn_seconds=learn_s,
                throughput=i * args.stream_trees / learn_s if learn_s > 0 else None,
                us_per_point=1e6 * learn_s / i if i else None,
                predict_one_seconds=pred_s, accuracy=acc, log_loss=ll)


def run_streams(ds, args):
    names = ds.names
    ys = ds.y.tolist()
    rows = ds.X.tolist()
    train_dicts = [dict(zip(names, row)) for row in rows]  # built outside the timed loops
    test_dicts = [dict(zip(names, row)) for row in ds.Xt.tolist()]
    n = len(ys)
    log("  warm-up (untimed): one Python learn_one loop over the first 500 points")
    from mondrian_ml import MondrianForestClassifier
    w = MondrianForestClassifier(n_estimators=args.stream_trees, random_state=args.seed,
                                 feature_ranges=[(0.0, 1.0)] * ds.n_features)
    for x, y in zip(train_dicts[:500], ys[:500]):
        w.learn_one(x, y)
    del w

    runs = {"python": [], "core": [], "cli": []}
    last_model = None
    orders = []
    for rep in range(args.reps):
        keys = list(runs)
        k = rep % len(keys)
        order = keys[k:] + keys[:k]
        orders.append(order)
        for key in order:
            if key == "python":
                last_model, r = py_stream(ds, args, train_dicts, ys, test_dicts)
            elif key == "core":
                r = core_stream(ds, args, rows, ys)
            else:
                r = cli_stream(ds, args)
            r["rep"] = rep
            runs[key].append(r)
        log(f"  stream rep {rep + 1}/{args.reps} ({' -> '.join(order)}): " + ", ".join(
            f"{key} {1e6 * runs[key][-1]['learn_seconds'] / n:.1f} us/pt" for key in runs))
    # accuracy of our learn_one model from the array API too (sanity check of predict_proba_one)
    import pandas as pd
    P = last_model.predict_proba(pd.DataFrame(ds.Xt, columns=names))
    full = np.zeros((len(ds.yt), ds.n_classes))
    full[:, last_model.classes_.astype(int)] = P
    acc_array, _ = score(full, ds.yt)

    summ = {}
    for key, rs in runs.items():
        ls = [r["learn_seconds"] for r in rs]
        summ[key] = dict(learn_median=med(ls), learn_range=spread(ls), us_per_point=1e6 * med(ls) / n,
                         faults_median=med([r.get("learn_minor_faults", r.get("process_minor_faults")) for r in rs]),
                         throughput=n * args.stream_trees / med(ls),
                         accuracies=sorted({r["accuracy"] for r in rs}))
    summ["python"]["predict_one_us_per_point"] = 1e6 * med([r["predict_one_seconds"] for r in runs["python"]]) / len(ds.yt)
    summ["python"]["accuracy_array_predict"] = acc_array
    py_us, rust_us, core_us = summ["python"]["us_per_point"], summ["cli"]["us_per_point"], summ["core"]["us_per_point"]
    per_point = dict(rust_us=rust_us, python_us=py_us, core_us=core_us, diff_us=py_us - rust_us,
                     diff_pct=100 * (py_us / rust_us - 1),
                     paired_diff_us_median=med([1e6 * (a["learn_seconds"] - b["learn_seconds"]) / n
                                                for a, b in zip(runs["python"], runs["cli"])]),
                     core_diff_us=core_us - rust_us, learn_one_wrapper_us=py_us - core_us)
    accs = {key: sorted({r["accuracy"] for r in rs}) for key, rs in runs.items()}
    same = len(set().union(*map(set, accs.values())) | {acc_array}) == 1
    check = dict(ok=same, accuracies=accs, accuracy_array_predict=acc_array)
    if not same:
        log(f"  !! note: streamed models differ in accuracy between Python and the CLI: {check}")

    amf = None
    if not args.skip_amf:
        amf = run_amf(ds, args, train_dicts, ys, test_dicts)
    return dict(runs=runs, orders=orders, summary=summ, per_point=per_point, same_model_check=check,
                amf=amf, stream_order="training CSV file order (already shuffled with the seed); "
                                      "the CLI --online streams the file in file order")


# ----------------------------------------------------------------------------- profile

def run_profile(ds, args):
    import cProfile
    import io
    import pstats
    from mondrian_ml import MondrianForestClassifier
    names = ds.names
    train_dicts = [dict(zip(names, row)) for row in ds.X.tolist()]
    ys = ds.y.tolist()
    buf = io.StringIO()
    for title, fn in (
        ("fit + predict_proba (100 trees)", lambda: py_batch(ds, args)),
        ("learn_one loop (10 trees)", lambda: [m.learn_one(x, y) for m in [MondrianForestClassifier(
            n_estimators=args.stream_trees, random_state=args.seed,
            feature_ranges=[(0.0, 1.0)] * ds.n_features)] for x, y in zip(train_dicts, ys)]),
    ):
        pr = cProfile.Profile()
        pr.enable()
        fn()
        pr.disable()
        buf.write(f"==== {ds.name}: {title}\n")
        pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(18)
    path = args.out / f"profile_{ds.name}.txt"
    path.write_text(buf.getvalue())
    log(f"  wrote {path}")
    return str(path)



# ----------------------------------------------------------------------------- main

def main(argv=None):
    args = parse_args(argv)
    if not args.mondrian.is_file():
        print(f"error: no CLI binary at {args.mondrian}; build it: cargo build --release -p mondrian-cli",
              file=sys.stderr)
        return 2
    try:
        import mondrian_ml  # noqa: F401
    except ImportError as e:
        print(f"error: cannot import mondrian_ml ({e}); pip install ./crates/mondrian-py", file=sys.stderr)
        return 2
    global RELEASE_HEAP
    RELEASE_HEAP = not args.no_release_heap
    args.out.mkdir(parents=True, exist_ok=True)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    results = {"meta": {
        "command": command_line(), "argv": sys.argv,
        "started": _dt.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(), "versions": versions(args), "git": git_rev(),
        "config": dict(datasets=args.datasets, seed=args.seed, reps=args.reps, trees=args.trees,
                       stream_trees=args.stream_trees, amf_budget=args.amf_budget,
                       sklearn_reps=args.sklearn_reps, max_train=args.max_train, max_test=args.max_test,
                       quick=args.quick, skip_amf=args.skip_amf, skip_sklearn=args.skip_sklearn,
                       release_heap=RELEASE_HEAP and LIBC is not None,
                       mondrian=str(args.mondrian), data_dir=str(args.data_dir)),
    }, "datasets": {}, "warnings": []}
    json_path, md_path = args.out / "bench.json", args.out / "bench.md"
    for name in args.datasets:
        log(f"== {name}")
        ds = Data(name, args)
        D = results["datasets"][name] = {"info": ds.info(), "loadavg_before": [round(x, 2) for x in os.getloadavg()]}
        log(f"   N_train={len(ds.y)} N_test={len(ds.yt)} D={ds.n_features} K={ds.n_classes}; CLI files "
            f"{ds.train_csv.name}, {ds.test_csv.name}")
        log("-- batch (Python vs core vs CLI, interleaved)")
        D["batch"] = run_batch(ds, args)
        if not D["batch"]["same_model_check"]["ok"]:
            results["warnings"].append(f"{name}: batch accuracy differs between Python and the CLI "
                                       f"({D['batch']['same_model_check']['accuracies']})")
        o = D["batch"]["overhead"]
        log(f"   overhead: fit {o['fit']['overhead_pct_of_medians']:+.1f} %, predict_proba "
            f"{o['predict']['overhead_pct_of_medians']:+.1f} %")
        save_json(results, json_path)
        if not args.skip_sklearn:
            log("-- scikit-learn")
            D["sklearn"] = run_sklearn(ds, args)
            save_json(results, json_path)
        log("-- streams")
        D["streams"] = run_streams(ds, args)
        if not D["streams"]["same_model_check"]["ok"]:
            results["warnings"].append(f"{name}: streamed models differ in accuracy between Python learn_one "
                                       f"and CLI --online ({D['streams']['same_model_check']['accuracies']})")
        p = D["streams"]["per_point"]
        log(f"   learn_one: Python {p['python_us']:.1f} us/pt, Rust {p['rust_us']:.1f} us/pt, "
            f"difference {p['diff_us']:+.1f} us")
        D["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        save_json(results, json_path)
        if args.profile:
            D["profile_file"] = run_profile(ds, args)
    meta = results["meta"]
    meta["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    meta["wall_seconds"] = time.perf_counter() - t_all
    save_json(results, json_path)
    write_md(results, md_path)
    log(f"wrote {md_path} and {json_path} ({meta['wall_seconds'] / 60:.1f} min)")
    for w in results["warnings"]:
        log(f"!! {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
