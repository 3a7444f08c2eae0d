#!/usr/bin/env python3
"""Batch fit and predict, one thread, MF against scikit-learn ExtraTrees(max_features=1),
interleaved run by run so that both see the same machine state (the VM's speed drifts).

Run from the repository root after `cargo build --release`:
    python3 experiments/classification/fit_predict_ab.py [--reps 5]
Writes experiments/classification/results/fit_predict_ab.md.
"""
import argparse
import json
import statistics as st
import subprocess
import time
from pathlib import Path

import pandas as pd
from sklearn.ensemble import ExtraTreesClassifier

from ab_common import BIN, commit, path

OUT = Path(__file__).resolve().parent / "results" / "fit_predict_ab.md"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--datasets", default="letter,satimage,usps,dna")
    args = ap.parse_args()
    lines = ["# Batch fit and predict, one thread: MF vs ERT-1, interleaved", "",
             f"Command: `python3 experiments/classification/fit_predict_ab.py --reps {args.reps}`; "
             "medians over the repetitions; 100 trees; MF times are the CLI's own fit / predict "
             "timers (`eval --threads 1 --json`), ERT-1 is `ExtraTreesClassifier(100, max_features=1, "
             "n_jobs=1)` timed around `fit` and `predict_proba`.", "",
             f"Run {time.strftime('%Y-%m-%d')} at commit {commit()}.", "",
             "| data | MF fit s | ERT-1 fit s | fit ratio | MF predict_proba s | ERT-1 predict_proba s | predict ratio |",
             "|---|---|---|---|---|---|---|"]
    for name in args.datasets.split(","):
        tr, te = path(name, "train"), path(name, "test")
        a, b = pd.read_csv(tr).values, pd.read_csv(te).values
        x, y, xt = a[:, :-1], a[:, -1].astype(int), b[:, :-1]
        mf_fit, mf_pred, et_fit, et_pred = [], [], [], []
        for r in range(args.reps):
            out = subprocess.run([str(BIN), "eval", "--threads", "1", "--json", "--seed", str(r),
                                  "--train", str(tr), "--test", str(te)],
                                 capture_output=True, text=True, check=True)
            res = json.loads(out.stdout)
            mf_fit.append(res["train_seconds"])
            mf_pred.append(res["predict_seconds"])
            m = ExtraTreesClassifier(n_estimators=100, max_features=1, n_jobs=1, random_state=r)
            t = time.perf_counter()
            m.fit(x, y)
            et_fit.append(time.perf_counter() - t)
            t = time.perf_counter()
            m.predict_proba(xt)
            et_pred.append(time.perf_counter() - t)
        f, g, p, q = (st.median(v) for v in (mf_fit, et_fit, mf_pred, et_pred))
        lines.append(f"| {name} | {f:.3f} | {g:.3f} | {f / g:.2f}× | {p:.3f} | {q:.3f} | {p / q:.2f}× |")
        print(lines[-1], flush=True)
    OUT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
