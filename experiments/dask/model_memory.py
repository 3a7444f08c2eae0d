"""The model's own memory over a long windowed stream, without Dask: the reference for the
workers' memory in throughput.py (README.md, "Memory over time").

    python experiments/dask/model_memory.py
"""

import os

import numpy as np
import psutil

from mondrian_ml import MondrianForestClassifier


def main():
    me = psutil.Process(os.getpid())
    est = MondrianForestClassifier(n_estimators=1, random_state=0, window=10_000, n_jobs=1)
    rng = np.random.default_rng(0)
    print("| partitions | RSS MiB | points held |")
    print("| --- | --- | --- |")
    for i in range(1600):
        x = rng.random((5000, 8))
        y = (x[:, 0] + x[:, 1] > 1).astype(np.int64)
        est.partial_fit(x, y, classes=[0, 1])
        if i % 200 == 0:
            print(f"| {i} | {me.memory_info().rss / 2**20:.1f} | {est.n_points_} |", flush=True)


if __name__ == "__main__":
    main()
