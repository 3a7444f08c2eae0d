#!/usr/bin/env python3
"""Online learning throughput, MF against river's AMFClassifier, interleaved run by run so
that both see the same machine state (the VM's speed drifts by ±20 % between runs, and the
AMF throughput measured by run.py moved between 7.65 k and 18.6 k points·trees/s).

Each repetition shuffles the training set with the repetition's seed, rescales it to [0, 1]
with the training min/max (as run.py does, for both methods), then runs, in this order on
even repetitions and in the reverse order on odd ones:
  * MF, one thread:  `mondrian eval --online --threads 1 --json` (the CLI's own train timer);
  * MF, all cores:   `mondrian eval --online --json`;
  * AMF:             `AMFClassifier(n_estimators=10, seed)` `learn_one` over the same stream
                     (feature dicts built outside the timed loop).
Throughput is points × trees / training seconds.

Run from the repository root after `cargo build --release`:
    python3 experiments/classification/online_ab.py [--reps 5] [--datasets letter]
Writes experiments/classification/results/online_ab.md.
"""
import argparse
import json
import os
import statistics as st
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ab_common import BIN, commit, path

OUT = Path(__file__).resolve().parent / "results" / "online_ab.md"
MF_TREES = 100


def mf_seconds(train_csv, test_csv, threads):
    cmd = [str(BIN), "eval", "--online", "--json", "--trees", str(MF_TREES),
           "--train", str(train_csv), "--test", str(test_csv)]
    if threads:
        cmd += ["--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return json.loads(out.stdout)["train_seconds"]


def amf_seconds(names, x, y, trees, seed):
    from river.forest import AMFClassifier
    stream = [dict(zip(names, row)) for row in x.tolist()]
    labels = y.tolist()
    model = AMFClassifier(n_estimators=trees, seed=seed)
    t0 = time.perf_counter()
    for xi, yi in zip(stream, labels):
        model.learn_one(xi, yi)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--datasets", default="letter")
    ap.add_argument("--amf-trees", type=int, default=10)
    args = ap.parse_args()
    lines = ["# Online learning throughput: MF vs river AMF, interleaved", "",
             f"Command: `python3 experiments/classification/online_ab.py --reps {args.reps} "
             f"--datasets {args.datasets}`; medians over the repetitions (min–max in brackets); "
             f"MF {MF_TREES} trees (`eval --online`, the CLI's train timer), AMF "
             f"`river.forest.AMFClassifier(n_estimators={args.amf_trees})` timed around its "
             "`learn_one` loop; the same shuffled, [0, 1]-rescaled stream for both, the order of the "
             "three runs reversed every other repetition. Throughput in points × trees / s; the "
             "ratios are medians of the per-repetition ratios.", "",
             f"Run {time.strftime('%Y-%m-%d')} at commit {commit()}; {os.cpu_count()} cores.", "",
             "| data | MF 1 thread | MF all cores | AMF | MF 1 thread / AMF | MF all cores / AMF |",
             "|---|---|---|---|---|---|"]
    for name in args.datasets.split(","):
        frame = pd.read_csv(path(name, "train"))
        names = [str(c) for c in frame.columns[:-1]]
        values = frame.values
        x, y = values[:, :-1].astype(float), values[:, -1].astype(int)
        lo, hi = x.min(axis=0), x.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        x = (x - lo) / span
        n = len(y)
        one, all_cores, amf = [], [], []
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.reps):
                perm = np.random.default_rng(r).permutation(n)
                xs, ys = x[perm], y[perm]
                train_csv = Path(tmp) / f"{name}_{r}.csv"
                frame_r = pd.DataFrame(np.column_stack([xs, ys]), columns=names + ["label"])
                frame_r = frame_r.astype({"label": int})
                frame_r.to_csv(train_csv, index=False)
                # One test row: only the training time is used.
                test_csv = Path(tmp) / f"{name}_{r}_test.csv"
                frame_r.head(1).to_csv(test_csv, index=False)
                runs = [
                    lambda: one.append(n * MF_TREES / mf_seconds(train_csv, test_csv, 1)),
                    lambda: all_cores.append(
                        n * MF_TREES / mf_seconds(train_csv, test_csv, None)),
                    lambda: amf.append(
                        n * args.amf_trees / amf_seconds(names, xs, ys, args.amf_trees, r)),
                ]
                for run in runs if r % 2 == 0 else reversed(runs):
                    run()
                print(f"{name} rep {r}: MF 1 thread {one[-1]:.3g}, all cores {all_cores[-1]:.3g}, "
                      f"AMF {amf[-1]:.3g} points·trees/s", flush=True)

        def cell(v):
            return f"{st.median(v):.3g} [{min(v):.3g}–{max(v):.3g}]"

        ratio_one = [a / b for a, b in zip(one, amf)]
        ratio_all = [a / b for a, b in zip(all_cores, amf)]
        lines.append(f"| {name} | {cell(one)} | {cell(all_cores)} | {cell(amf)} | "
                     f"{st.median(ratio_one):.0f}× [{min(ratio_one):.0f}–{max(ratio_one):.0f}] | "
                     f"{st.median(ratio_all):.0f}× [{min(ratio_all):.0f}–{max(ratio_all):.0f}] |")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
