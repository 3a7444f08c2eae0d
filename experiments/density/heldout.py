"""Held-out mean log-density on the features of the regression sets (issue 21, Density).

For every regression set with stored splits (../shared/data/regression/splits, the
conventional random 90/10 splits; the first 5), the features (the target column dropped)
of the training rows fit the model and the mean log-density of the test rows is reported,
in the units of the raw features:

* ours: `mondrian density --train A.csv --test B.csv --drop-last --variant V --seed K
  --json` with V = batch (bMPF) and streaming (sMPF), 100 trees, depth 10, γ = 1. A test row
  outside the training box has density 0 (log −∞); the CLI reports the mean over all rows
  (−∞ then) and the mean over the finite rows with their count; both are kept here.
* scikit-learn KernelDensity (Gaussian) on standardized features (train mean and std), the
  bandwidth chosen by GridSearchCV (5-fold, mean held-out log-likelihood) over 15 values
  log-spaced in [0.05, 2]; its log-density in the raw units is the standardized one minus
  Σ_j ln σ_j (the Jacobian of z = (x − μ)/σ), so the numbers compare with ours.

The comparison over the rows where ours is finite is the like-for-like one (KDE's mean on
the same rows is reported too). Writes results/heldout.json and results/heldout.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import tempfile

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_v] = "1"

import numpy as np  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.neighbors import KernelDensity  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BIN = os.path.join(ROOT, "target", "release", "mondrian")
REG = "/work/shared/data/regression"
if os.path.isdir(os.path.join(ROOT, "..", "shared", "data", "regression")):
    REG = os.path.abspath(os.path.join(ROOT, "..", "shared", "data", "regression"))


def load(name):
    with open(os.path.join(REG, name + ".csv")) as fh:
        rows = list(csv.reader(fh))
    header, x = rows[0], np.array(rows[1:], dtype=float)
    with open(os.path.join(REG, "splits", name + "_test_idx.txt")) as fh:
        splits = [np.array(line.split(), dtype=int) for line in fh if line.strip()]
    return header, x, splits


def write(path, header, x):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows([[repr(float(v)) for v in r] for r in x])


def ours(train, test, variant, seed):
    out = subprocess.run([BIN, "density", "--train", train, "--test", test, "--drop-last",
                          "--variant", variant, "--seed", str(seed), "--threads", "1",
                          "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ours_rows(train, test, variant, seed, tmp):
    """Per-row log-densities (to average KDE over the same rows) via `anomaly score --model`."""
    model = os.path.join(tmp, "m.bin")
    subprocess.run([BIN, "anomaly", "score", "--input", train, "--drop-last", "--variant",
                    variant, "--seed", str(seed), "--threads", "1", "--save-model", model,
                    "--output", os.path.join(tmp, "s.csv")], check=True, capture_output=True)
    out = subprocess.run([BIN, "anomaly", "score", "--model", model, "--input", test,
                          "--drop-last", "--threads", "1"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    col = out[0].split(",").index("log_density")
    return np.array([float(line.split(",")[col]) for line in out[1:]])


def kde(xtr, xte):
    mu, sd = xtr.mean(axis=0), xtr.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    ztr, zte = (xtr - mu) / sd, (xte - mu) / sd
    grid = GridSearchCV(KernelDensity(kernel="gaussian"),
                        {"bandwidth": np.logspace(np.log10(0.05), np.log10(2.0), 15)}, cv=5)
    grid.fit(ztr)
    bw = float(grid.best_params_["bandwidth"])
    logp = grid.best_estimator_.score_samples(zte) - np.log(sd).sum()
    return logp, bw


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--sets", default="yacht,boston_housing,energy_heating,concrete,"
                    "wine_quality_red,kin8nm,power_plant")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sets.split(","):
            header, x, splits = load(name)
            recs = []
            for k, test_idx in enumerate(splits[: args.splits]):
                mask = np.ones(len(x), bool)
                mask[test_idx] = False
                a, b = os.path.join(tmp, "train.csv"), os.path.join(tmp, "test.csv")
                write(a, header, x[mask])
                write(b, header, x[~mask])
                logp, bw = kde(x[mask][:, :-1], x[~mask][:, :-1])
                rec = {"split": k, "n_train": int(mask.sum()), "n_test": int((~mask).sum()),
                       "kde_mean": float(logp.mean()), "kde_bandwidth_std_units": bw}
                for variant, key in (("batch", "bmpf"), ("streaming", "smpf")):
                    r = ours(a, b, variant, k)
                    rows = ours_rows(a, b, variant, k, tmp)
                    fin = np.isfinite(rows)
                    rec[key] = {"mean": r["mean_log_density"],
                                "mean_finite": r["mean_log_density_finite"],
                                "n_out_of_domain": r["n_out_of_domain"],
                                "seconds": r["seconds"],
                                "kde_mean_same_rows": float(logp[fin].mean())}
                recs.append(rec)
                print(name, k, rec, flush=True)
            res[name] = {"d": len(header) - 1, "splits": recs}
    with open(os.path.join(args.out, "heldout.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    write_md(res, args.out)


def ms(v):
    v = np.array(v, dtype=float)
    return f"{v.mean():.3f} ± {v.std():.3f}"


def write_md(res, out):
    lines = ["# Held-out mean log-density (nats per row, raw feature units), 5 splits", "",
             "mean ± population std over splits. `finite` = mean over the test rows inside the "
             "training box (ours is −∞ outside it); `KDE same rows` = KDE's mean over those "
             "rows; `out` = test rows outside the box, summed over the splits.", "",
             "| data set | d | KDE (all rows) | bMPF finite | KDE same rows | bMPF out | "
             "sMPF finite | KDE same rows | sMPF out | KDE bandwidth (std units) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in res.items():
        s = r["splits"]
        cells = [name, str(r["d"]), ms([x["kde_mean"] for x in s])]
        for key in ("bmpf", "smpf"):
            cells += [ms([x[key]["mean_finite"] for x in s]),
                      ms([x[key]["kde_mean_same_rows"] for x in s]),
                      f"{sum(x[key]['n_out_of_domain'] for x in s)}/"
                      f"{sum(x['n_test'] for x in s)}"]
        cells.append(", ".join(f"{x['kde_bandwidth_std_units']:.2f}" for x in s))
        lines.append("| " + " | ".join(cells) + " |")
    with open(os.path.join(out, "heldout.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
