#!/usr/bin/env python3
"""Diagnostic for run.py: is MF's NLPD hurt by the *shape* of its forest mixture?

For MF exact and MF fast (10 trees, min_samples_split 10, the splits and training order of
run.py), compare on every split
  * the NLPD of the full forest mixture (`mondrian eval --json`, what run.py reports), with
  * the NLPD of the Gaussian moment match N(E, sd²) of the same forest (mean and sd from
    `mondrian train` + `mondrian predict`, same seed, i.e. the same forest).
Coverage_90 is the same for both: the CLI's interval is already E ± 1.6449 sd.

Writes results/mixture_vs_gaussian.md and .json.

  target/pyenv/bin/python experiments/regression/mixture_vs_gaussian.py [--splits 5]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import helpers as R  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", type=R.csv_list, default=R.ALL_DATASETS)
    p.add_argument("--splits", type=int, default=5)
    p.add_argument("--out", type=Path, default=R.DEFAULT_OUT)
    a = p.parse_args()
    B = R.DEFAULT_BINARY
    res = {"command": "target/pyenv/bin/python experiments/regression/mixture_vs_gaussian.py "
                      + " ".join(sys.argv[1:]),
           "versions": R.versions(B), "datasets": {}}
    with tempfile.TemporaryDirectory(prefix="mf-mix-") as tmpd:
        tmp = Path(tmpd)
        trc, tec, model = tmp / "train.csv", tmp / "test.csv", tmp / "m.model"
        for name in a.datasets:
            cols, X, y = R.load_dataset(R.DEFAULT_DATA_DIR, name)
            rows = []
            for k in range(a.splits):
                tr, te, _ = R.split_indices(R.DEFAULT_DATA_DIR, name, len(y), k)
                R.write_csv(trc, cols, X[tr], y[tr])
                R.write_csv(tec, cols, X[te], y[te])
                row = {"split": k}
                for mode in ("exact", "fast"):
                    d = R.mf_eval(B, trc, tec, k, 10, mode, False)
                    R.run_cli(B, ["train", "--task", "regression", "--train", str(trc), "--model", str(model),
                                  "--trees", "10", "--min-samples-split", "10", "--mode", mode,
                                  "--feature-weights", "uniform", "--calibration", "none",
                                  "--seed", str(k), "--threads", "1"])
                    out, _ = R.run_cli(B, ["predict", "--model", str(model), "--input", str(tec), "--threads", "1"])
                    pr = np.array([[float(v) for v in ln.split(",")] for ln in out.strip().splitlines()[1:]])
                    g = R.gaussian_metrics(y[te], pr[:, 0], pr[:, 1] ** 2)
                    row[mode] = {"mixture_nlpd": d["nlpd"], "gaussian_nlpd": g["nlpd"],
                                 "coverage_cli": d["coverage_90"], "coverage_gaussian": g["coverage_90"],
                                 "rmse": d["rmse"], "noise_var": d["noise_var"]}
                rows.append(row)
            res["datasets"][name] = rows
            R.log(f"{name}: done")
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "mixture_vs_gaussian.json").write_text(json.dumps(res, indent=1))

    L = ["# MF: NLPD of the forest mixture vs its Gaussian moment match", "",
         "Command (from the repository root):", "", "```", res["command"].strip(), "```", "",
         f"mondrian binary sha256 {res['versions'].get('mondrian_binary_sha256')}…, HEAD {res['versions']['git_head']}. "
         f"Splits 0..{a.splits - 1} and training order as in `run.py`; 10 trees, min_samples_split 10, --seed k, "
         "--threads 1. *mixture* = `eval --json` NLPD (the density of the forest mixture); *Gaussian* = NLPD of "
         "N(E, sd²) with E, sd from `train` + `predict` of the same forest. Coverage_90 of the two agrees on every "
         "split (the CLI's interval is E ± 1.6449 sd): "
         + str(all(abs(r[m]["coverage_cli"] - r[m]["coverage_gaussian"]) < 1e-12
                   for rows in res["datasets"].values() for r in rows for m in ("exact", "fast"))) + ".",
         "",
         "| data | exact: mixture NLPD | exact: Gaussian NLPD | fast: mixture NLPD | fast: Gaussian NLPD | exact mixture NLPD per split |",
         "|---|---|---|---|---|---|"]
    for name, rows in res["datasets"].items():
        col = lambda m, k: np.array([r[m][k] for r in rows])
        L.append(f"| {R.SHORT_NAME[name]} | {R.pm(col('exact', 'mixture_nlpd'))} | {R.pm(col('exact', 'gaussian_nlpd'))} | "
                 f"{R.pm(col('fast', 'mixture_nlpd'))} | {R.pm(col('fast', 'gaussian_nlpd'))} | "
                 + ", ".join(f"{v:.2f}" for v in col("exact", "mixture_nlpd")) + " |")
    L.append("")
    (a.out / "mixture_vs_gaussian.md").write_text("\n".join(L) + "\n")
    print("\n".join(L))
    return 0


if __name__ == "__main__":
    sys.exit(main())
