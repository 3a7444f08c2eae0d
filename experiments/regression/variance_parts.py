#!/usr/bin/env python3
"""Where MF's predictive width comes from: the law of total variance over the trees.

The forest's predictive variance is the mean of the trees' own variances (`within`) plus the
variance of the trees' means (`between`), `MondrianForestRegressor.predict_variance_parts`.
For the best MF configuration of mss_frontier.py (fast mode, 100 trees, relevance weights,
min_samples_split 5) this reports, per data set, the mean predictive sd of each part against
the RMSE, and the 90 % coverage and Gaussian NLPD of E ± the total, the within part alone
and the between part alone, beside the mixture's own NLPD and the sklearn forests' best.

Same splits and training order as run.py (first --splits of the standard 90/10 splits;
california on seeded random splits). Run from the repository root after building the
Python package (scripts/test.sh does):
    target/pyenv/bin/python experiments/regression/variance_parts.py
Writes experiments/regression/results/variance_parts.md (and .json).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import helpers as R  # noqa: E402  (the main experiment's data and split helpers)

from mondrian_ml import MondrianForestRegressor  # noqa: E402

Z90 = 1.6448536269514722


def gaussian_scores(y, mean, var):
    z2 = (y - mean) ** 2 / var
    return float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * z2)), float(np.mean(z2 <= Z90**2))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, default=R.DEFAULT_DATA_DIR)
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--mss", type=int, default=5)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args()
    base = json.loads((HERE / "results" / "results.json").read_text())["datasets"]
    started = time.time()
    report = {"command": " ".join(sys.argv), "splits": a.splits, "trees": a.trees,
              "min_samples_split": a.mss, "results": {}}
    for name in R.ALL_DATASETS:
        cols, X, y = R.load_dataset(a.data_dir, name)
        rows = []
        for k in range(a.splits):
            tr, te, _ = R.split_indices(a.data_dir, name, len(y), k)
            reg = MondrianForestRegressor(n_estimators=a.trees, mode="fast",
                                          min_samples_split=a.mss, feature_weights="relevance",
                                          calibration="none", random_state=k,
                                          n_jobs=1).fit(X[tr], y[tr])
            yt = y[te]
            mean, sd = reg.predict(X[te], return_std=True)
            within, between = reg.predict_variance_parts(X[te])
            lo, hi = reg.predict_interval(X[te], 0.9)
            r = {"rmse": float(np.sqrt(np.mean((yt - mean) ** 2))),
                 "nlpd_mixture": float(-np.mean(reg.log_density(X[te], yt))),
                 "coverage_mixture": float(np.mean((yt >= lo) & (yt <= hi))),
                 "sd_total": float(np.mean(sd)),
                 "sd_within": float(np.mean(np.sqrt(within))),
                 "sd_between": float(np.mean(np.sqrt(between)))}
            for part, var in (("total", sd**2), ("within", within), ("between", between)):
                r[f"nlpd_{part}"], r[f"coverage_{part}"] = gaussian_scores(
                    yt, mean, np.maximum(var, 1e-300))
            sk = base[name]["splits"][k]["methods"]
            r["sklearn_best_nlpd"] = min(sk["rf"]["nlpd"], sk["ert"]["nlpd"])
            rows.append(r)
        report["results"][name] = {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}
        R.log(f"{name} done")
    report["wall_seconds"] = time.time() - started
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "variance_parts.json").write_text(json.dumps(report, indent=1))
    res = report["results"]
    lines = [
        "# MF's predictive width: within-tree and between-tree variance",
        "",
        f"Command: `target/pyenv/bin/python experiments/regression/variance_parts.py` "
        f"({report['wall_seconds'] / 60:.1f} min). MF fast, {a.trees} trees, relevance feature "
        f"weights, min_samples_split {a.mss}, one thread, means over the first {a.splits} splits "
        "of run.py's protocol. `within` = mean of the trees' own predictive variances, "
        "`between` = variance of the trees' means; their sum is the forest's variance. "
        "sd columns are mean predictive sds; coverage and Gaussian NLPD use E ± the named part.",
        "",
        "| data | RMSE | sd total / within / between | coverage: mixture, total, within, between "
        "| NLPD: mixture, Gaussian total, within, between | best sklearn NLPD |",
        "|---|---|---|---|---|---|",
    ]
    for name in R.ALL_DATASETS:
        r = res[name]
        lines.append(
            f"| {R.SHORT_NAME[name]} | {r['rmse']:.4g} | {r['sd_total']:.4g} / {r['sd_within']:.4g} / "
            f"{r['sd_between']:.4g} | {r['coverage_mixture']:.3f}, {r['coverage_total']:.3f}, "
            f"{r['coverage_within']:.3f}, {r['coverage_between']:.3f} | {r['nlpd_mixture']:.3f}, "
            f"{r['nlpd_total']:.3f}, {r['nlpd_within']:.3f}, {r['nlpd_between']:.3f} | "
            f"{r['sklearn_best_nlpd']:.3f} |")
    (a.out / "variance_parts.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
