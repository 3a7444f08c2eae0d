"""Python and the Rust library (through the `mondrian` command) give the same model."""

import gzip
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mondrian_ml import MondrianForestClassifier
from mondrian_ml._core import ClassifierCore

from conftest import DATASETS, REPO


def mondrian_bin():
    path = os.environ.get("MONDRIAN_BIN")
    if path and Path(path).exists():
        return path
    for profile in ("release", "debug"):
        p = REPO / "target" / profile / "mondrian"
        if p.exists():
            return str(p)
    found = shutil.which("mondrian")
    if found is None:
        pytest.skip("the mondrian binary is not built (scripts/test.sh builds it)")
    return found


def write_csv(path, X, y):
    with open(path, "w") as f:
        f.write(",".join(f"x{i}" for i in range(X.shape[1])) + ",label\n")
        for row, label in zip(X, y):
            f.write(",".join(repr(float(v)) for v in row) + f",{int(label)}\n")


def test_predictions_equal_the_cli(small, tmp_path):
    X, y, Xt, yt = small
    train, test, model = tmp_path / "train.csv", tmp_path / "test.csv", tmp_path / "m.bin"
    write_csv(train, X, y)
    write_csv(test, Xt, yt)
    exe = mondrian_bin()
    subprocess.run(
        [exe, "train", "--train", train, "--model", model, "--trees", "12", "--seed", "42"],
        check=True,
        capture_output=True,
    )
    labels = subprocess.run(
        [exe, "predict", "--model", model, "--input", test], check=True, capture_output=True, text=True
    ).stdout.split()
    proba = subprocess.run(
        [exe, "predict", "--model", model, "--input", test, "--proba"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()

    clf = MondrianForestClassifier(n_estimators=12, random_state=42).fit(X, y)
    ours = clf.predict_proba(Xt)
    header, rows = proba[0], np.array([[float(v) for v in line.split(",")] for line in proba[1:]])
    assert header.split(",") == [f"p_{c}" for c in clf.classes_]
    np.testing.assert_allclose(ours, rows, atol=5e-7)  # the CLI prints 6 decimals
    assert [int(v) for v in labels[-len(Xt):]] == clf.predict(Xt).tolist()


def test_library_file_is_shared(small, tmp_path):
    # A file saved from Python is the Rust library's format, byte for byte.
    X, y, Xt, _ = small
    clf = MondrianForestClassifier(n_estimators=4, random_state=1).fit(X, y)
    path = tmp_path / "forest.mondrian"
    clf.save(path)
    raw = path.read_bytes()
    assert raw[:8] == b"MONDRIAN"
    core = ClassifierCore.from_bytes(raw)
    np.testing.assert_array_equal(core.predict_proba(np.ascontiguousarray(Xt)), clf.predict_proba(Xt))
