"""Throughput of mondrian_ml.dask on 1 and 2 workers of this machine, over a stream
whose partitions are made on the workers (never held whole by the client).

For each worker count: a DaskMondrianForestClassifier (a window of the last --window
rows, one shard per worker) takes --rows rows in partitions of --chunk rows by
partial_fit. The scheduler and the workers are processes of their own (`dask scheduler`,
`dask worker`), as on a real cluster. A thread samples, every --every seconds, the
resident memory of the client, of the scheduler and of each worker; the task stream gives the time each kind of
task took (making a partition, moving it to another worker, a shard's training step).
The same forest on one process without Dask (the same partitions, made in the loop)
gives the reference rate.

Writes results/throughput.md (the table and the per-task times) and
results/memory-<workers>.csv (the samples over time).

    python experiments/dask/throughput.py --rows 20000000 --chunk 50000 --trees 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import dask.array as da
import distributed
import numpy as np
import psutil

from mondrian_ml import MondrianForestClassifier
from mondrian_ml.dask import DaskMondrianForestClassifier

HERE = Path(__file__).resolve().parent


def labels(x):
    """A label that needs a few cuts: two noisy diagonal bands (made on the workers)."""
    s = x[:, 0] + x[:, 1] - 0.5 * x[:, 2]
    return ((s > 0.4) & (s < 1.1)).astype(np.int64)


def worker_rss():
    return psutil.Process(os.getpid()).memory_info().rss


@contextmanager
def cluster(n_workers):
    """A scheduler and ``n_workers`` one-thread workers, each its own process, as on a
    real cluster (a LocalCluster would run the scheduler inside the client's process, and
    its memory would count as the client's). Yields (client, scheduler process)."""
    dask = str(Path(sys.executable).parent / "dask")
    with tempfile.TemporaryDirectory() as tmp:
        file = os.path.join(tmp, "scheduler.json")
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        scheduler = subprocess.Popen(
            [dask, "scheduler", "--scheduler-file", file, "--port", "0", "--no-dashboard"],
            **quiet,
        )
        workers = subprocess.Popen(
            [dask, "worker", "--scheduler-file", file, "--nworkers", str(n_workers),
             "--nthreads", "1", "--memory-limit", "8GiB", "--no-dashboard"],
            **quiet,
        )
        try:
            while not os.path.exists(file):
                time.sleep(0.1)
            with distributed.Client(scheduler_file=file) as client:
                client.wait_for_workers(n_workers, timeout=120)
                yield client, scheduler
                client.shutdown()
        finally:
            for proc in (workers, scheduler):
                proc.terminate()
                proc.wait(timeout=60)


class Sampler(threading.Thread):
    """Samples the RSS of the client, the scheduler and each worker every ``every``
    seconds."""

    def __init__(self, client, scheduler, every):
        super().__init__(daemon=True)
        self.client, self.every = client, every
        self.scheduler = psutil.Process(scheduler.pid)
        self.rows = []
        self.stop = threading.Event()
        self.start_time = time.perf_counter()

    def run(self):
        me = psutil.Process(os.getpid())
        while not self.stop.is_set():
            mem = [m for _, m in sorted(self.client.run(worker_rss).items())]
            self.rows.append(
                (
                    time.perf_counter() - self.start_time,
                    me.memory_info().rss,
                    self.scheduler.memory_info().rss,
                    *mem,
                )
            )
            self.stop.wait(self.every)


def task_times(events):
    """Mean seconds per task of each kind in a task stream."""
    kinds = {"make partition": [], "train step (shard)": [], "move partition": []}
    for e in events:
        key = e["key"]
        name = key[0] if isinstance(key, tuple) else key
        for s in e["startstops"]:
            secs = s["stop"] - s["start"]
            if s["action"] == "transfer":
                kinds["move partition"].append(secs)
            elif s["action"] != "compute":
                continue
            elif str(name).startswith("mondrian-fit-shard"):
                kinds["train step (shard)"].append(secs)
            elif str(name).startswith(("labels", "random_sample", "getitem", "astype")):
                kinds["make partition"].append(secs)
    return {k: (statistics.mean(v) if v else float("nan"), len(v)) for k, v in kinds.items()}


def run_dask(n_workers, a):
    with cluster(n_workers) as (client, scheduler):
        rs = da.random.RandomState(a.seed)
        x = rs.random_sample((a.rows, a.features), chunks=(a.chunk, a.features))
        y = x.map_blocks(labels, drop_axis=1, dtype=np.int64, name="labels")
        est = DaskMondrianForestClassifier(
            client=client, n_estimators=a.trees, random_state=0, window=a.window,
            max_pending=a.max_pending, verbose=a.verbose,
        )
        sampler = Sampler(client, scheduler, a.every)
        sampler.start()
        # The task stream of the first partitions only: it is kept on the client.
        probe = min(40, x.numblocks[0])
        with distributed.get_task_stream(client=client) as ts:
            start = time.perf_counter()
            est.partial_fit(x.blocks[:probe], y.blocks[:probe], classes=[0, 1])
        if probe < x.numblocks[0]:
            est.partial_fit(x.blocks[probe:], y.blocks[probe:])
        secs = time.perf_counter() - start
        sampler.stop.set()
        sampler.join()
        test = np.random.default_rng(1).random((20_000, a.features))
        acc = float((est.predict(da.from_array(test, chunks=10_000)).compute() == labels(test)).mean())
        return secs, sampler.rows, task_times(ts.data), acc, est.n_partitions_seen_


def run_local(a, rows, trees):
    """The same forest (``trees`` trees) in this process, without Dask, on ``rows`` rows:
    its rate once the window is full (the first partitions fill it, and cost less)."""
    est = MondrianForestClassifier(n_estimators=trees, random_state=0, window=a.window, n_jobs=1)
    rng = np.random.default_rng(a.seed)
    secs, timed, fill = 0.0, 0, -(-a.window // a.chunk)
    for i in range(fill + rows // a.chunk):
        x = rng.random((a.chunk, a.features))
        y = labels(x)
        t = time.perf_counter()
        est.partial_fit(x, y, classes=[0, 1])
        if i >= fill:
            secs += time.perf_counter() - t
            timed += len(x)
    return timed / secs


def mib(b):
    return b / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--chunk", type=int, default=50_000)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--trees", type=int, default=10)
    ap.add_argument("--window", type=int, default=100_000)
    ap.add_argument("--max-pending", type=int, default=4)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--local-rows", type=int, default=2_000_000)
    ap.add_argument("--local-trees", type=int, nargs="*", default=None,
                    help="tree counts for the runs without Dask (default: 1, M/2, M)")
    ap.add_argument("--every", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)

    local_rows = min(a.local_rows, a.rows)
    local = {}
    counts = a.local_trees if a.local_trees is not None else [1, max(1, a.trees // 2), a.trees]
    for m in sorted(set(counts)):
        local[m] = run_local(a, local_rows, m)
        print(f"one process, no Dask, {m} trees: {local[m]:,.0f} rows/s", flush=True)
    local_rate = local.get(a.trees, float("nan"))
    lines = [
        "| workers | rows | partitions | trees | seconds | rows/s | accuracy | client RSS MiB (first → max → last) | scheduler RSS MiB (first → last) | worker RSS MiB, max |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    times = {}
    for n in a.workers:
        secs, samples, tt, acc, seen = run_dask(n, a)
        times[n] = tt
        with open(a.out / f"memory-{n}.csv", "w") as f:
            f.write(
                "seconds,client_rss_bytes,scheduler_rss_bytes,"
                + ",".join(f"worker{i}_rss_bytes" for i in range(n))
                + "\n"
            )
            for row in samples:
                f.write(",".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row) + "\n")
        rss = [r[1] for r in samples]
        sched = [r[2] for r in samples]
        workers_max = max(max(r[3:]) for r in samples)
        line = (
            f"| {n} | {a.rows:,} | {seen} | {a.trees} | {secs:.0f} | {a.rows / secs:,.0f} | "
            f"{acc:.4f} | {mib(rss[0]):.0f} → {mib(max(rss)):.0f} → {mib(rss[-1]):.0f} | "
            f"{mib(sched[0]):.0f} → {mib(sched[-1]):.0f} | {mib(workers_max):.0f} |"
        )
        print(line, flush=True)
        lines.append(line)
    report = [
        "# mondrian_ml.dask throughput",
        "",
        f"Command: `python experiments/dask/throughput.py --rows {a.rows} --chunk {a.chunk} "
        f"--trees {a.trees} --window {a.window} --features {a.features}`",
        "",
        f"One process without Dask (`MondrianForestClassifier.partial_fit`, same partitions, "
        f"{min(a.local_rows, a.rows):,} rows): **{local_rate:,.0f} rows/s**.",
        "",
        "The same forest without Dask, one thread, by number of trees (rows/s; seconds per "
        f"partition of {a.chunk:,} rows):",
        "",
        "| trees | rows/s | s / partition |",
        "| --- | --- | --- |",
        *[f"| {m} | {r:,.0f} | {a.chunk / r:.3f} |" for m, r in local.items()],
        "",
        *lines,
        "",
        "Mean seconds per task over the first 40 partitions (Dask's task stream):",
        "",
        "| workers | make partition | move partition | train step (one shard) |",
        "| --- | --- | --- | --- |",
    ]
    for n, tt in times.items():
        cells = " | ".join(
            f"{tt[k][0]:.4f} ({tt[k][1]})"
            for k in ("make partition", "move partition", "train step (shard)")
        )
        report.append(f"| {n} | {cells} |")
    (a.out / "throughput.md").write_text("\n".join(report) + "\n")
    print("\n".join(report))


if __name__ == "__main__":
    main()
