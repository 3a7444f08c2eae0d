"""Speed section of the Table 4 run (issue 21's speed targets), measured side by side.

1. Batch: fit + score of every row, one thread. Ours: `mondrian anomaly eval --seed S
   --threads 1 --json` (100 trees on all n points, its `seconds`: fit and score, without
   reading the file). scikit-learn: IsolationForest(100 trees, max_samples=min(256, n),
   n_jobs=1) fit + score_samples on all rows. Every set of at least 10,000 rows; the two
   alternate, `--reps` times each (seeds 0..reps-1); the ratio is of the medians.
2. Streaming points per second, window 256, insert-then-score, one thread, over the first
   `--stream-rows` rows of the shuffled stream (numpy default_rng(0).permutation(n)):
   ours `mondrian anomaly eval --stream --window 256 --shuffle 0 --threads 1` (100 trees:
   the oldest point leaves, the row is inserted, then scored; rows_per_second includes
   everything but reading the file); rrcf 20 trees × window 256 (the Table 4 setting);
   river HalfSpaceTrees(height 15, 10 trees, window 256) score_one + learn_one, timed
   after its construction and first window (the trees of height 15 are built lazily on the
   first rows, which takes ~10 s) and over the whole stream.
3. Memory: all of http (567,498 rows) streamed through a window of 10,000
   (`mondrian anomaly score --stream --window 10000 --output FILE`), VmRSS and VmHWM read
   from /proc/PID/status every 0.5 s.

Writes results/speed.json, results/speed.md, results/rss_http.csv and results/rss_http.png.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_v] = "1"

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data  # noqa: E402
from table4 import BIN, WINDOW, HST_HEIGHT, HST_TREES, RRCF_TREES  # noqa: E402


def ours_eval(path, seed, extra=()):
    cmd = [BIN, "anomaly", "eval", "--input", path, "--seed", str(seed), "--threads", "1",
           "--json", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def sk_iforest(x, seed):
    from sklearn.ensemble import IsolationForest
    t = time.perf_counter()
    m = IsolationForest(n_estimators=100, random_state=seed, n_jobs=1).fit(x)
    m.score_samples(x)
    return time.perf_counter() - t


def batch_section(sets, reps):
    rows = []
    for name, ds in sets:
        if len(ds["y"]) < 10_000:
            continue
        ours, sk = [], []
        for seed in range(reps):
            ours.append(ours_eval(ds["path"], seed)["seconds"])
            sk.append(sk_iforest(ds["x"], seed))
        o, s = float(np.median(ours)), float(np.median(sk))
        rows.append({"dataset": name, "n": len(ds["y"]), "d": int(ds["x"].shape[1]),
                     "ours_seconds": ours, "sklearn_seconds": sk, "ours_median": o,
                     "sklearn_median": s, "ratio_sklearn_over_ours": s / o})
        print(f"batch {name}: ours {o:.2f}s sklearn {s:.2f}s ratio {s / o:.2f}", flush=True)
    return rows


def rrcf_rate(x, order):
    import rrcf
    np.random.seed(0)
    forest = [rrcf.RCTree() for _ in range(RRCF_TREES)]
    t = time.perf_counter()
    for pos, i in enumerate(order):
        for tree in forest:
            if len(tree.leaves) >= WINDOW:
                tree.forget_point(order[pos - WINDOW])
            tree.insert_point(x[i], index=int(i))
            tree.codisp(int(i))
    return len(order) / (time.perf_counter() - t)


def hst_rates(x, order):
    from river.anomaly import HalfSpaceTrees
    lo, hi = x.min(axis=0), x.max(axis=0)
    xs = (x - lo) / np.where(hi > lo, hi - lo, 1.0)
    model = HalfSpaceTrees(n_trees=HST_TREES, height=HST_HEIGHT, window_size=WINDOW, seed=0)
    t0 = time.perf_counter()
    t1 = None
    for pos, i in enumerate(order):
        if pos == WINDOW:
            t1 = time.perf_counter()
        row = dict(enumerate(xs[i].tolist()))
        model.score_one(row)
        model.learn_one(row)
    end = time.perf_counter()
    return len(order) / (end - t0), (len(order) - WINDOW) / (end - t1)


def stream_section(sets, names, stream_rows):
    rows = []
    for name, ds in sets:
        if name not in names:
            continue
        n = min(stream_rows, len(ds["y"]))
        order = np.random.default_rng(0).permutation(len(ds["y"]))[:n]
        sub = os.path.join(data.ROOT, "target", "speed_" + name + ".csv")
        data.write_csv(sub, ds["x"][order], ds["y"][order])  # the same rows, already shuffled
        def ours_rate(trees):
            args = ("--stream", "--window", str(WINDOW), "--trees", str(trees))
            return ours_eval(sub, 0, args)["rows_per_second"]
        o = ours_rate(100)
        o_rrcf, o_hst = ours_rate(RRCF_TREES), ours_rate(HST_TREES)
        r_rate = rrcf_rate(ds["x"], order)
        h_all, h_after = hst_rates(ds["x"], order)
        rows.append({"dataset": name, "rows": n, "d": int(ds["x"].shape[1]),
                     "ours_rows_per_second": o, "ours_trees": 100,
                     "ours_rows_per_second_at_rrcf_trees": o_rrcf,
                     "ours_rows_per_second_at_hst_trees": o_hst,
                     "rrcf_rows_per_second": r_rate, "rrcf_trees": RRCF_TREES,
                     "hst_rows_per_second": h_all, "hst_rows_per_second_after_window": h_after,
                     "hst_trees": HST_TREES, "ratio_rrcf": o / r_rate, "ratio_hst": o / h_all,
                     "ratio_hst_after_window": o / h_after,
                     "ratio_rrcf_equal_trees": o_rrcf / r_rate,
                     "ratio_hst_equal_trees": o_hst / h_all,
                     "ratio_hst_after_window_equal_trees": o_hst / h_after})
        print(f"stream {name}: ours {o:.0f}/s ({o_rrcf:.0f}/s at {RRCF_TREES} trees, "
              f"{o_hst:.0f}/s at {HST_TREES}) rrcf {r_rate:.1f}/s hst {h_all:.1f}/s "
              f"({h_after:.1f}/s after window)", flush=True)
    return rows


def rss_section(out_dir, window):
    path = os.path.join(data.DATA, "http.csv.gz")
    out = os.path.join(data.ROOT, "target", "http_scores.csv")
    cmd = [BIN, "anomaly", "score", "--input", path, "--output", out, "--stream",
           "--window", str(window), "--threads", "1"]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples = []
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as fh:
                st = {ln.split(":")[0]: ln.split()[1] for ln in fh if ln.startswith("Vm")}
            samples.append((time.perf_counter() - t0, int(st["VmRSS"]), int(st["VmHWM"])))
        except (FileNotFoundError, KeyError, ProcessLookupError):
            pass
        time.sleep(0.5)
    seconds = time.perf_counter() - t0
    with open(os.path.join(out_dir, "rss_http.csv"), "w") as fh:
        fh.write("seconds,vmrss_kib,vmhwm_kib\n")
        fh.writelines(f"{t:.2f},{r},{h}\n" for t, r, h in samples)
    rss = np.array([s[1] for s in samples], dtype=float) / 1024
    ts = np.array([s[0] for s in samples])
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(ts, rss, lw=1)
    ax.set_xlabel("seconds since start (reading the file, then streaming)")
    ax.set_ylabel("VmRSS (MiB)")
    ax.set_title(f"http, 567,498 rows through a window of {window}, 100 trees, one thread")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "rss_http.png"), dpi=100)
    q = len(rss)
    res = {"command": " ".join(cmd[1:]).replace(data.ROOT + "/", ""), "exit": p.returncode,
           "seconds": seconds, "rows_per_second": 567498 / seconds, "samples": q,
           "max_rss_mib": float(rss.max()) if q else None,
           "rss_quartiles_mib": [float(np.median(rss[int(q * a):int(q * b)]))
                                 for a, b in ((0.25, 0.5), (0.5, 0.75), (0.75, 1.0))] if q else None}
    print("rss", res, flush=True)
    return res


def write_md(res, out_dir):
    lines = ["## Speed (`speed.py`, one thread, measured side by side)", "",
             "Batch fit + score on all rows: ours bMPF (100 trees, all n points per tree) "
             "against scikit-learn IsolationForest (100 trees × 256). Ratio = sklearn seconds "
             "/ ours seconds (> 1: ours faster); medians of "
             f"{res['batch'][0].get('reps', len(res['batch'][0].get('ours_seconds', []))) if res.get('batch') else 0} alternating "
             "runs.", "", "| data set | n | ours s | sklearn s | ratio |", "|---|---|---|---|---|"]
    for r in res.get("batch", []):
        lines.append(f"| {r['dataset']} | {r['n']} | {r['ours_median']:.2f} | "
                     f"{r['sklearn_median']:.2f} | {r['ratio_sklearn_over_ours']:.2f} |")
    lines += ["", "Streaming points per second, window 256, insert-then-score, one thread: "
              f"ours sMPF at 100 trees and at each peer's size, rrcf ({RRCF_TREES} trees) and "
              f"river HalfSpaceTrees (height {HST_HEIGHT}, {HST_TREES} trees; `after w` "
              "excludes its construction and first window). Ratio = ours / peer, at equal "
              "numbers of trees (ours at 100 trees against the peer's smaller forest in "
              "brackets).", "",
              "| data set | rows | ours /s (100 / 20 / 10 trees) | rrcf /s | HST /s | "
              "HST after w /s | × rrcf | × HST | × HST after w |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in res.get("stream", []):
        lines.append(
            f"| {r['dataset']} | {r['rows']} | {r['ours_rows_per_second']:.0f} / "
            f"{r['ours_rows_per_second_at_rrcf_trees']:.0f} / "
            f"{r['ours_rows_per_second_at_hst_trees']:.0f} | "
            f"{r['rrcf_rows_per_second']:.1f} | {r['hst_rows_per_second']:.1f} | "
            f"{r['hst_rows_per_second_after_window']:.1f} | "
            f"{r['ratio_rrcf_equal_trees']:.0f} ({r['ratio_rrcf']:.0f}) | "
            f"{r['ratio_hst_equal_trees']:.0f} ({r['ratio_hst']:.0f}) | "
            f"{r['ratio_hst_after_window_equal_trees']:.1f} "
            f"({r['ratio_hst_after_window']:.1f}) |")
    m = res.get("rss")
    if m:
        lines += ["", f"Memory: `mondrian {m['command']}`: {m['seconds']:.0f} s "
                  f"({m['rows_per_second']:.0f} rows/s), max RSS {m['max_rss_mib']:.1f} MiB; "
                  "median RSS over the 2nd, 3rd and last quarter of the run: " + ", ".join(
                      f"{v:.1f}" for v in m["rss_quartiles_mib"]) + " MiB (`rss_http.png`)."]
    with open(os.path.join(out_dir, "speed.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--parts", default="batch,stream,rss")
    ap.add_argument("--stream-sets", default="mammography,nyc_taxi,satimage-2")
    ap.add_argument("--stream-rows", type=int, default=3000)
    ap.add_argument("--rss-window", type=int, default=10_000)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "speed.json")
    res = {}
    parts = args.parts.split(",")
    sets = data.datasets()
    if "batch" in parts:
        res["batch"] = batch_section(sets, args.reps)
    if "stream" in parts:
        res["stream"] = stream_section(sets, set(args.stream_sets.split(",")), args.stream_rows)
    if "rss" in parts:
        res["rss"] = rss_section(args.out, args.rss_window)
    # Read the file only now: another part may have been run meanwhile by another process.
    if os.path.exists(path):
        with open(path) as fh:
            res = {**json.load(fh), **res}
    with open(path, "w") as fh:
        json.dump(res, fh, indent=1)
    write_md(res, args.out)


if __name__ == "__main__":
    main()
