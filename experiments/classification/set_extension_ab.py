#!/usr/bin/env python3
"""Mini-batch training time of two `mondrian` builds, interleaved run by run (the VM's speed
drifts): `mondrian curve --batches B --threads 1`, whose train_seconds is the cumulative
partial_fit time over the stream.

Used to measure the set extension (`MondrianTree::extend_many`) against the per-point road:
build the commit before it into another directory, e.g.
    git worktree add /tmp/before <commit> && (cd /tmp/before && cargo build --release)
then, from the repository root:
    python3 experiments/classification/set_extension_ab.py --before /tmp/before/target/release/mondrian
Writes experiments/classification/results/set_extension_ab.md.
"""
import argparse
import json
import statistics as st
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / ".." / "shared" / "data" / "classification"
OUT = Path(__file__).resolve().parent / "results" / "set_extension_ab.md"


def train_seconds(binary, name, batches, seed):
    out = subprocess.run([str(binary), "curve", "--train", str(DATA / f"{name}_train.csv"),
                          "--test", str(DATA / f"{name}_test.csv"), "--batches", str(batches),
                          "--threads", "1", "--seed", str(seed), "--json"],
                         capture_output=True, text=True, check=True)
    last = json.loads(out.stdout)["steps"][-1]
    return last["train_seconds"], last["accuracy"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=ROOT / "target" / "release" / "mondrian")
    ap.add_argument("--datasets", default="letter,satimage")
    ap.add_argument("--batches", default="2,10,100")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    lines = ["# Mini-batch training: set extension against the per-point road", "",
             f"Command: `python3 experiments/classification/set_extension_ab.py --before BEFORE "
             f"--reps {a.reps}`; `mondrian curve --batches B --threads 1`, 100 trees, seeds "
             f"0..{a.reps - 1}, the two builds interleaved; medians of the cumulative training "
             "seconds; accuracy after the last batch (mean over seeds).", "",
             "| data | batches | before s | after s | after / before | accuracy before / after |",
             "|---|---|---|---|---|---|"]
    for name in a.datasets.split(","):
        for b in [int(v) for v in a.batches.split(",")]:
            tb, ta, ab, aa = [], [], [], []
            for r in range(a.reps):
                t, acc = train_seconds(a.before, name, b, r)
                tb.append(t)
                ab.append(acc)
                t, acc = train_seconds(a.after, name, b, r)
                ta.append(t)
                aa.append(acc)
            mb, ma = st.median(tb), st.median(ta)
            lines.append(f"| {name} | {b} | {mb:.3f} | {ma:.3f} | {ma / mb:.2f} | "
                         f"{st.mean(ab):.4f} / {st.mean(aa):.4f} |")
            print(lines[-1], flush=True)
    OUT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
