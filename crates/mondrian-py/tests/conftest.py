"""Shared data for the mondrian_ml tests.

The satimage files are the ones shipped in the repository's `datasets/` folder (see its
README for the source); tests never read ../shared.
"""

import gzip
import threading
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
DATASETS = REPO / "datasets"


def load_csv_gz(path):
    with gzip.open(path, "rt") as f:
        data = np.loadtxt(f, delimiter=",", skiprows=1)
    return data[:, :-1], data[:, -1].astype(np.int64)


@pytest.fixture(scope="session")
def satimage():
    """(X_train, y_train, X_test, y_test) of satimage, labels 0..5."""
    X, y = load_csv_gz(DATASETS / "satimage_train.csv.gz")
    Xt, yt = load_csv_gz(DATASETS / "satimage_test.csv.gz")
    return X, y, Xt, yt


@pytest.fixture(scope="session")
def small(satimage):
    """A 600-point training subset and 300 test points: quick to fit."""
    X, y, Xt, yt = satimage
    rng = np.random.default_rng(7)
    i = rng.permutation(len(X))[:600]
    return np.ascontiguousarray(X[i]), y[i], Xt[:300], yt[:300]


def _runs_without_gil(call):
    """Whether `call` (which must take well over 50 ms) lets the main thread run while it
    works. If it held the GIL, the main thread could not run a single bytecode until it
    returned, so it would wake from its short sleep to find the call finished; with the GIL
    released it wakes while the call is still running."""
    started, done = threading.Event(), threading.Event()

    def work():
        started.set()
        call()
        done.set()

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    time.sleep(0.05)
    running_while_main_ran = not done.is_set()
    t.join()
    assert done.is_set()
    return running_while_main_ran


@pytest.fixture
def runs_without_gil():
    return _runs_without_gil


@pytest.fixture(scope="session")
def dask_client():
    """A client of a LocalCluster with 2 worker processes, shared by the Dask tests."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0"
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()
