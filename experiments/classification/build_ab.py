#!/usr/bin/env python3
"""Two builds alternated run by run (the VM's speed drifts, so only interleaved runs
compare), one thread: batch fit and predict and online (point-by-point) training, with the
order of the two builds reversed every other repetition.

Batch runs read the data sets as they are; online runs read the training set shuffled
(seed 0) and rescaled to [0, 1] with its min/max, as online_ab.py does, written once to a
temporary folder, and a one-row test set (only the training time is used). Needs no
packages beyond the standard library.

The builds are either two CLIs (`mondrian eval --threads 1 --json [--online]`: its own wall
clock timers, plus the CPU time of the whole process: reading the data, training,
predicting), or, with --harness, two builds of the example `phase_cpu`
(crates/mondrian/examples/phase_cpu.rs), which times each phase by the wall clock and by the
CPU time of its thread (with --repeat N, the least of N fits, predictions or online
trainings in one run). On a machine shared with other work, the wall clock also counts the
time a run waited for a core; the CPU time does not.

Usage (from the repository root):
    python3 experiments/classification/build_ab.py BIN_A BIN_B [--harness] [--reps 5]
        [--repeat 1] [--datasets letter,satimage,dna] [--modes batch,online]
Prints one line per run, then per data set, mode and timer the medians [min–max] of A and
B and the median [min–max] of the per-repetition ratios B / A. A log-loss that differs
between the builds is reported (a change meant to keep the model must leave it equal).
"""
import argparse
import csv
import gzip
import json
import random
import resource
import statistics as st
import subprocess
import tempfile
from pathlib import Path

from ab_common import path


def read_rows(p):
    opener = gzip.open if str(p).endswith(".gz") else open
    with opener(p, "rt", newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def online_files(name, folder):
    """The shuffled, [0, 1]-rescaled training set and a one-row test set."""
    header, rows = read_rows(path(name, "train"))
    x = [[float(v) for v in r[:-1]] for r in rows]
    lo = [min(c) for c in zip(*x)]
    hi = [max(c) for c in zip(*x)]
    order = list(range(len(rows)))
    random.Random(0).shuffle(order)
    train = Path(folder) / f"{name}_online_train.csv"
    test = Path(folder) / f"{name}_online_test.csv"
    with open(train, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i in order:
            w.writerow([repr((v - a) / (b - a)) if b > a else "0.0"
                        for v, a, b in zip(x[i], lo, hi)] + [rows[i][-1]])
    with open(train) as f, open(test, "w") as g:
        g.write(f.readline())
        g.write(f.readline())
    return train, test


def plain(p, folder):
    """`p`, or a decompressed copy in `folder` if it is gzipped (the harness reads plain CSV)."""
    if not str(p).endswith(".gz"):
        return p
    out = Path(folder) / Path(p).name[:-3]
    if not out.exists():
        with gzip.open(p, "rb") as f, open(out, "wb") as g:
            g.write(f.read())
    return out


def run(binary, train, test, online, harness, repeat):
    """The timers of one run (seconds) and its log-loss."""
    if harness:
        cmd = [binary, str(train), str(test), "--repeat", str(repeat)]
    else:
        cmd = [binary, "eval", "--threads", "1", "--json", "--train", str(train),
               "--test", str(test)]
    if online:
        cmd.append("--online")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    d = json.loads(out.stdout)
    if harness:
        phases = ["train"] if online else ["fit", "predict"]
        timers = {f"{p} {c}": d[f"{p}_{c}"] for p in phases for c in ("wall", "cpu")}
    else:
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        timers = {"train wall" if online else "fit wall": d["train_seconds"]}
        if not online:
            timers["predict wall"] = d["predict_seconds"]
        timers["process cpu"] = cpu
    return timers, d["log_loss"]


def cell(v):
    return f"{st.median(v):.3f} [{min(v):.3f}–{max(v):.3f}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--harness", action="store_true")
    ap.add_argument("--repeat", type=int, default=1,
                    help="with --harness: each run reports the least of this many fits, "
                         "predictions or online trainings")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--datasets", default="letter,satimage,dna")
    ap.add_argument("--modes", default="batch,online")
    args = ap.parse_args()
    table = ["| data | mode | timer | A s | B s | B / A |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            for mode in args.modes.split(","):
                online = mode == "online"
                if online:
                    train, test = online_files(name, tmp)
                else:
                    train, test = path(name, "train"), path(name, "test")
                    if args.harness:
                        train, test = plain(train, tmp), plain(test, tmp)
                res = {args.a: [], args.b: []}
                for r in range(args.reps):
                    pair = [args.a, args.b] if r % 2 == 0 else [args.b, args.a]
                    for binary in pair:
                        timers, loss = run(binary, train, test, online, args.harness, args.repeat)
                        res[binary].append((timers, loss))
                        shown = " ".join(f"{k} {v:.3f}" for k, v in timers.items())
                        print(f"{name} {mode} {binary}: {shown} log_loss {loss:.10f}",
                              flush=True)
                losses = {round(loss, 10) for v in res.values() for _, loss in v}
                if len(losses) > 1:
                    print(f"!! {name} {mode}: log-losses differ: {sorted(losses)}", flush=True)
                for timer in res[args.a][0][0]:
                    a = [t[timer] for t, _ in res[args.a]]
                    b = [t[timer] for t, _ in res[args.b]]
                    ratio = [q / p for p, q in zip(a, b)]
                    table.append(f"| {name} | {mode} | {timer} | {cell(a)} | {cell(b)} | "
                                 f"{st.median(ratio):.3f} [{min(ratio):.3f}–{max(ratio):.3f}] |")
                    print(table[-1], flush=True)
    print(f"\nA = {args.a}, B = {args.b}, {args.reps} repetitions\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
