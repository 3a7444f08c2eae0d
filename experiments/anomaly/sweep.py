"""bMPF settings against the batch peers: γ and the scaling rule, measured on every set.

A measured look at what moves bMPF's mean rank (issue 21's rank target), not a tuned
default: for each setting, bMPF (100 trees, depth 10, one thread, seeds 0..S-1) on every
data set of `../shared/data/anomaly`, ranked per set on mean AUC against the batch peers
already in `results/runs-peers.jsonl` (IsolationForest, isotree, PCA, KNN, LOF). Settings:
γ in --gammas, and the spec §9.1 scaling (min-max only when d >= 50) or min-max on every set
(`minmax`, through the min-max scaled copies `table4.py` writes for its streams; the
trees' space is then [0, 1]^d).

    target/expenv/bin/python experiments/anomaly/sweep.py [--seeds 3] [--gammas 0.1,0.3,1,3]

Writes results/sweep.jsonl (one line per run, resumable) and results/sweep.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
from scipy.stats import rankdata

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data  # noqa: E402
import report  # noqa: E402
from table4 import BIN, BATCH, scaled_copy  # noqa: E402
import subprocess  # noqa: E402


def run(path, gamma, seed):
    cmd = [BIN, "anomaly", "eval", "--input", path, "--seed", str(seed), "--threads", "1",
           "--gamma", str(gamma), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--gammas", default="0.1,0.3,1,3")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    gammas = [float(g) for g in args.gammas.split(",")]
    out_path = os.path.join(args.out, "sweep.jsonl")
    done = {}
    if os.path.exists(out_path):
        for line in open(out_path):
            r = json.loads(line)
            done[(r["dataset"], r["gamma"], r["scaling"], r["seed"])] = r["auc"]
    sets = list(data.datasets())
    with open(out_path, "a") as fh:
        for name, ds in sets:
            for scaling in ("spec", "minmax"):
                path = scaled_copy(ds) if scaling == "minmax" else ds["path"]
                for gamma in gammas:
                    for seed in range(args.seeds):
                        key = (name, gamma, scaling, seed)
                        if key in done:
                            continue
                        res = run(path, gamma, seed)
                        done[key] = res["roc_auc"]
                        fh.write(json.dumps({"dataset": name, "gamma": gamma,
                                             "scaling": scaling, "seed": seed,
                                             "auc": res["roc_auc"],
                                             "seconds": res["seconds"]}) + "\n")
                        fh.flush()
            print(name, "done", flush=True)
    peers = report.aggregate(report.load(args.out))
    group = [m for m in BATCH if m != "bmpf"]
    names = [n for n, _ in sets if all((n, m) in peers for m in group)]
    lines = ["## bMPF settings against the batch peers (`sweep.py`)", "",
             f"bMPF mean AUC over seeds 0..{args.seeds - 1}; mean rank among bMPF and "
             f"{', '.join(report.LABEL[m] for m in group)} over {len(names)} data sets "
             "(the peers' AUCs from the Table 4 run). `spec`: min-max scaling only when "
             "d >= 50 (spec §9.1); `minmax`: on every set.", "",
             "| setting | bMPF rank | iForest rank (same table) | sets bMPF beats iForest |",
             "|---|---|---|---|"]
    for scaling in ("spec", "minmax"):
        for gamma in gammas:
            mean = {n: np.mean([done[(n, gamma, scaling, s)] for s in range(args.seeds)])
                    for n in names}
            ranks = np.array([rankdata([-mean[n]] + [-peers[(n, m)]["auc_mean"] for m in group])
                              for n in names]).mean(axis=0)
            wins = sum(mean[n] > peers[(n, "iforest")]["auc_mean"] for n in names)
            lines.append(f"| γ = {gamma:g}, {scaling} | {ranks[0]:.2f} | "
                         f"{ranks[1 + group.index('iforest')]:.2f} | {wins}/{len(names)} |")
    lines += ["", "Per data set, mean AUC (rows: sets; columns: settings):", "",
              "| data set | " + " | ".join(f"{s} γ={g:g}" for s in ("spec", "minmax")
                                          for g in gammas) + " | iForest |",
              "|---" * (2 * len(gammas) + 2) + "|"]
    for n in names:
        cells = [f"{np.mean([done[(n, g, s, k)] for k in range(args.seeds)]):.3f}"
                 for s in ("spec", "minmax") for g in gammas]
        lines.append(f"| {n} | " + " | ".join(cells) +
                     f" | {peers[(n, 'iforest')]['auc_mean']:.3f} |")
    with open(os.path.join(args.out, "sweep.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines[:4 + 2 * len(gammas) + 2]))


if __name__ == "__main__":
    main()
