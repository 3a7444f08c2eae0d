"""Shared data for the mondrian_ml tests.

The satimage files are the ones shipped in the repository's `datasets/` folder (see its
README for the source); tests never read ../shared.
"""

import gzip
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
