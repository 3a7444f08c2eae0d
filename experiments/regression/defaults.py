#!/usr/bin/env python3
"""The regressor's defaults against the issue's four targets, with the peers in the same run.

`MondrianForestRegressor(random_state=k, n_jobs=1)` of the Python package (nothing else set)
against scikit-learn's ExtraTrees and RandomForest (100 trees, n_jobs=1) on the eight UCI
sets, in one Python process, one thread each, on run.py's splits:

  RMSE      MF's predictive mean against the fully grown ExtraTrees (100 trees):
            target RMSE(MF) <= 1.15 RMSE(ET) on at least 6 of 8 sets.
  coverage  MF's central 90 % interval (`predict_interval(X, 0.9)`, recalibrated by its
            default calibration): target within 0.90 +- 0.05 on at least 6 of 8.
  NLPD      −log p(y | x) of MF's predictive mixture against the Gaussians of RF and ET
            (min_samples_leaf 5, law of total variance over the trees; run.py's
            `run_sklearn`): target below both on at least 5 of 8.
  fit time  MF's `fit` (everything the defaults do: relevance weights, the cross-validation
            of their power, calibration) against the fully grown ExtraTrees' `fit`, timed
            side by side in this process for each split: target at most 3x on every set.

Per set the RMSE ratio is mean RMSE(MF) / mean RMSE(ET) over the splits, coverage and NLPD
are means over the splits, and the fit-time ratio is the median over the splits of
fit(MF) / fit(ET) measured back to back (the host is shared, so only ratios of adjacent runs
mean much).

Other configurations can run beside the defaults (to choose them, or to show the thesis'
settings): `--config NAME=key:value,key:value` sets `MondrianForestRegressor` parameters on
top of the defaults (`none` means None; numbers are read as numbers), and `--config thesis`
is the thesis' settings (10 trees, min_samples_split 10, exact mode, uniform weights, no
calibration). The first configuration is the one whose counts the summary leads with.

From the repository root, after `pip install ./crates/mondrian-py` into target/pyenv:
    target/pyenv/bin/python experiments/regression/defaults.py
writes experiments/regression/results_defaults/{results.json,summary.md}.
"""
from __future__ import annotations

import os

# One thread for every method (the machine's 2 cores are shared with other work).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import datetime as _dt
import importlib.metadata
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from helpers import (ALL_DATASETS, DEFAULT_DATA_DIR, REPO_ROOT, SHORT_NAME, csv_list,  # noqa: E402
                     load_dataset, log, machine, rmse, split_indices)
from run import run_sklearn  # noqa: E402

THESIS = dict(n_estimators=10, min_samples_split=10, mode="exact", feature_weights=None,
              calibration="none")
TARGETS = {"rmse": (1.15, 6), "coverage": (0.05, 6), "nlpd": (None, 5), "fit": (3.0, 8)}


def parse_config(spec: str) -> tuple[str, dict]:
    if spec == "defaults":
        return spec, {}
    if spec == "thesis":
        return spec, dict(THESIS)
    name, _, body = spec.partition("=")
    kw = {}
    for item in filter(None, body.split(",")):
        key, _, value = item.partition(":")
        if value == "none":
            kw[key] = None
        else:
            try:
                kw[key] = int(value)
            except ValueError:
                try:
                    kw[key] = float(value)
                except ValueError:
                    kw[key] = value
    return name, kw


def run_mf(kw, X_tr, y_tr, X_te, y_te, seed) -> dict:
    from mondrian_ml import MondrianForestRegressor
    m = MondrianForestRegressor(random_state=seed, n_jobs=1, **kw)
    t0 = time.perf_counter()
    m.fit(X_tr, y_tr)
    fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    mean = m.predict(X_te)
    log_p = m.log_density(X_te, y_te)
    pred = time.perf_counter() - t0
    lo, hi = m.predict_interval(X_te, 0.9)
    choice = m.relevance_choice_
    cal = m.calibration_
    return {"rmse": rmse(y_te, mean), "nlpd": float(-np.mean(log_p)),
            "coverage_90": float(np.mean((y_te >= lo) & (y_te <= hi))),
            "fit_seconds": fit, "predict_seconds": pred,
            "power": None if choice is None else choice["power"],
            "losses": None if choice is None else {str(k): v for k, v in choice["losses"].items()},
            "feature_weights": m.feature_weights_.tolist(),
            "calibration_pits": None if cal is None else len(cal),
            "params": {k: v for k, v in m.get_params().items() if k not in ("n_jobs",)}}


def run_split(a, configs, name, X, y, k) -> dict:
    tr, te, source = split_indices(a.data_dir, name, len(y), k)
    X_tr, y_tr, X_te, y_te = X[tr], y[tr], X[te], y[te]
    res = {"split": k, "split_source": source, "n_train": len(tr), "n_test": len(te), "methods": {}}
    M = res["methods"]
    # ExtraTrees just before the MF fits it is compared with, RandomForest after them.
    M["ert"] = run_sklearn("ert", X_tr, y_tr, X_te, y_te, k, 100, 5)
    for cname, kw in configs:
        M[cname] = run_mf(kw, X_tr, y_tr, X_te, y_te, k)
        r = M[cname]
        log(f"  {SHORT_NAME[name]} split {k}: {cname:12s} rmse {r['rmse']:.4g} nlpd {r['nlpd']:.4g} "
            f"cov90 {r['coverage_90']:.3f} fit {r['fit_seconds']:.3g}s "
            f"({r['fit_seconds'] / M['ert']['fit_seconds_full']:.2f}x ET) power {r['power']}")
    M["rf"] = run_sklearn("rf", X_tr, y_tr, X_te, y_te, k, 100, 5)
    e, f = M["ert"], M["rf"]
    log(f"  {SHORT_NAME[name]} split {k}: ET rmse {e['rmse']:.4g} nlpd {e['nlpd']:.4g} fit "
        f"{e['fit_seconds_full']:.3g}s; RF rmse {f['rmse']:.4g} nlpd {f['nlpd']:.4g}")
    return res


# --------------------------------------------------------------------------- summary

def set_stats(ds: dict, cname: str) -> dict:
    sp = ds["splits"]
    get = lambda m, key: np.array([s["methods"][m][key] for s in sp], dtype=float)  # noqa: E731
    mf_rmse, et_rmse = get(cname, "rmse"), get("ert", "rmse")
    nlpd, rf_nlpd, et_nlpd = get(cname, "nlpd"), get("rf", "nlpd"), get("ert", "nlpd")
    cov = get(cname, "coverage_90")
    fit_ratio = get(cname, "fit_seconds") / get("ert", "fit_seconds_full")
    st = {"rmse": mf_rmse.mean(), "rmse_et": et_rmse.mean(), "rmse_rf": get("rf", "rmse").mean(),
          "rmse_ratio": mf_rmse.mean() / et_rmse.mean(), "coverage": cov.mean(),
          "coverage_sd": cov.std(ddof=1) if len(cov) > 1 else 0.0,
          "nlpd": nlpd.mean(), "nlpd_rf": rf_nlpd.mean(), "nlpd_et": et_nlpd.mean(),
          "fit_ratio": float(np.median(fit_ratio)), "fit_ratio_max": fit_ratio.max(),
          "fit": float(np.median(get(cname, "fit_seconds"))),
          "fit_et": float(np.median(get("ert", "fit_seconds_full"))),
          "powers": [s["methods"][cname]["power"] for s in sp], "n_splits": len(sp),
          "nlpd_split_wins": int(np.sum(nlpd < np.minimum(rf_nlpd, et_nlpd)))}
    st["met"] = {"rmse": st["rmse_ratio"] <= TARGETS["rmse"][0],
                 "coverage": abs(st["coverage"] - 0.9) <= TARGETS["coverage"][0],
                 "nlpd": st["nlpd"] < min(st["nlpd_rf"], st["nlpd_et"]),
                 "fit": st["fit_ratio"] <= TARGETS["fit"][0]}
    return st


def summarize(results: dict, out: Path) -> None:
    dss = results["datasets"]
    names = [n for n in ALL_DATASETS if n in dss]
    configs = results["config"]["configs"]
    L = []
    w = L.append
    w("# The regressor's defaults against the targets")
    w("")
    w("Produced by (from the repository root):")
    w("")
    w("```")
    w(results["command"])
    w("```")
    w("")
    mach, ver = results["machine"], results["versions"]
    w(f"- machine: {mach['cpu']}, {mach['logical_cores']} logical cores shared with other work; "
      f"load average at start {', '.join(f'{x:.2f}' for x in mach['loadavg_at_start'] or [])}")
    w(f"- software: Python {ver['python']}, numpy {ver['numpy']}, scikit-learn {ver['scikit-learn']}, "
      f"mondrian-ml {ver['mondrian-ml']}; repository HEAD {ver['git_head']}"
      f"{' (working tree dirty)' if ver['git_dirty'] else ''}")
    if "finished" in results:
        w(f"- date: started {results['started']}, wall time {results['wall_seconds'] / 60:.1f} min")
    w(f"- splits: the first {results['config']['splits']} of run.py's (standard 90/10 splits; "
      "california: seeded random 90/10), seed k on split k for every method; one thread each")
    w("- MF configurations (parameters on top of `MondrianForestRegressor()`'s defaults):")
    for cname, kw in configs:
        w(f"  - **{cname}**: `{kw or 'the defaults'}`")
    w("")
    w("Targets: RMSE ≤ 1.15 × ExtraTrees' (fully grown, 100 trees) on ≥ 6 of 8 sets; 90 % "
      "interval coverage within 0.90 ± 0.05 on ≥ 6 of 8; NLPD below both RF's and ET's "
      "Gaussians (min_samples_leaf 5) on ≥ 5 of 8; fit ≤ 3 × ExtraTrees' fit on every set "
      "(median over splits of the ratio of back-to-back fits). ✓ marks a set that meets one; "
      "the NLPD target compares means over the splits, and the splits on which MF's NLPD is "
      "below both forests' are counted in brackets.")
    w("")
    for cname, _ in configs:
        stats = {n: set_stats(dss[n], cname) for n in names}
        counts = {t: sum(st["met"][t] for st in stats.values()) for t in TARGETS}
        w(f"## {cname}")
        w("")
        w("| data | RMSE MF / ET (ratio) | 90 % coverage (± sd) | NLPD MF / RF / ET (splits won) | fit MF / ET, s (ratio, max) | power chosen |")
        w("|---|---|---|---|---|---|")
        for n in names:
            st = stats[n]
            ok = lambda t: " ✓" if st["met"][t] else ""  # noqa: E731
            powers = ", ".join("–" if p is None else f"{p:g}" for p in st["powers"])
            w(f"| {SHORT_NAME[n]} | {st['rmse']:.4g} / {st['rmse_et']:.4g} ({st['rmse_ratio']:.3f}{ok('rmse')}) "
              f"| {st['coverage']:.3f} ± {st['coverage_sd']:.3f}{ok('coverage')} "
              f"| {st['nlpd']:.3f} / {st['nlpd_rf']:.3f} / {st['nlpd_et']:.3f}{ok('nlpd')} "
              f"({st['nlpd_split_wins']}/{st['n_splits']}) "
              f"| {st['fit']:.3g} / {st['fit_et']:.3g} ({st['fit_ratio']:.2f}×, {st['fit_ratio_max']:.2f}×){ok('fit')} "
              f"| {powers} |")
        w("")
        n_sets = len(names)
        w(f"Sets meeting each target: RMSE **{counts['rmse']}/{n_sets}** (needs 6), coverage "
          f"**{counts['coverage']}/{n_sets}** (needs 6), NLPD **{counts['nlpd']}/{n_sets}** (needs 5), "
          f"fit time **{counts['fit']}/{n_sets}** (needs all).")
        w("")
    (out / "summary.md").write_text("\n".join(L) + "\n")


def versions() -> dict:
    v = {"python": sys.version.split()[0]}
    for pkg in ["numpy", "scikit-learn", "mondrian-ml"]:
        try:
            v[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            v[pkg] = None
    git = lambda *a: subprocess.run(["git", "-C", str(REPO_ROOT), *a], capture_output=True,  # noqa: E731
                                    text=True).stdout.strip()
    v["git_head"] = git("rev-parse", "--short", "HEAD")
    v["git_dirty"] = bool(git("status", "--porcelain", "--untracked-files=no"))
    return v


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", type=csv_list, default=ALL_DATASETS)
    p.add_argument("--splits", type=int, default=5)
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--config", action="append", default=None,
                   help="NAME=key:value,... (repeatable); 'defaults' and 'thesis' are built in")
    p.add_argument("--out", type=Path, default=HERE / "results_defaults")
    p.add_argument("--summarize-only", action="store_true")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    rpath = a.out / "results.json"
    if a.summarize_only:
        summarize(json.loads(rpath.read_text()), a.out)
        return 0
    configs = [parse_config(c) for c in (a.config or ["defaults"])]
    argv_used = sys.argv[1:] if argv is None else argv
    results = {
        "command": " ".join(shlex.quote(x) for x in ["target/pyenv/bin/python",
                                                      "experiments/regression/defaults.py", *argv_used]),
        "started": _dt.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(), "versions": versions(),
        "config": {"datasets": a.datasets, "splits": a.splits, "configs": configs,
                   "data_dir": str(a.data_dir)},
        "datasets": {},
    }
    t_start = time.perf_counter()
    for name in a.datasets:
        cols, X, y = load_dataset(a.data_dir, name)
        log(f"{name}: N={len(y)} D={X.shape[1]}")
        ds = {"n": len(y), "d": X.shape[1], "splits": []}
        for k in range(a.splits):
            ds["splits"].append(run_split(a, configs, name, X, y, k))
        results["datasets"][name] = ds
        rpath.write_text(json.dumps(results, indent=1))
    results["wall_seconds"] = time.perf_counter() - t_start
    results["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    rpath.write_text(json.dumps(results, indent=1))
    summarize(results, a.out)
    log(f"wrote {rpath} and {a.out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
