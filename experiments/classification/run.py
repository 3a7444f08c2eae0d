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
import json
import math
import shlex
import sys
import time
from pathlib import Path

import numpy as np

# The data, the CLI calls and the bookkeeping are in helpers.py (shared with
# experiments/python_api/bench.py); summary.md and the plots are written by report.py.
from helpers import (ALL_DATASETS, BASELINES, CURVE_KEYS, DEFAULT_BINARY, DEFAULT_DATA_DIR,
                     DEFAULT_FULL_RF, DEFAULT_OUT, DEFAULT_PERCENTS, DEFAULT_QUICK_OUT, EVAL_KEYS,
                     LOG_EPS, REPO_ROOT, SHORT, STEP_KEYS, Dataset, batch_ends, binary_version,
                     check_binary, command_line, eval_steps, git_rev, log, machine, run_cli,
                     save_json, score, versions)
from report import write_summary


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



# ----------------------------------------------------------------------------- mondrian CLI

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
