"""mondrian_ml.load reads every kind of model file: Python's save (the Rust library's
Persistent::save), and the CLI's `mondrian train --model` (the forest with its label values
and column names)."""

import pickle
import subprocess

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

import mondrian_ml
from mondrian_ml import MondrianForestClassifier, MondrianForestRegressor
from mondrian_ml._core import ClassifierCore

from test_consistency import mondrian_bin


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    y = np.where(X[:, 0] > 0.5, 7, -2)
    t = 3 * X[:, 0] - X[:, 1]
    return X, y, t


def _csv(path, X, target, names=("a", "b", "c"), label="label"):
    with open(path, "w") as f:
        f.write(",".join(names) + f",{label}\n")
        for row, v in zip(X, target):
            f.write(",".join(repr(float(x)) for x in row) + f",{v.item()!r}\n")
    return path


def test_python_save_loads_as_the_estimator(tmp_path):
    X, y, t = _data()
    clf = MondrianForestClassifier(n_estimators=6, lifetime=3.0, window=70, random_state=2).fit(X, y)
    clf.save(tmp_path / "c.bin")
    back = mondrian_ml.load(tmp_path / "c.bin")
    assert isinstance(back, MondrianForestClassifier)
    # The library's format keeps class indices, not label values.
    np.testing.assert_array_equal(back.classes_, [0, 1])
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    params = back.get_params()
    assert params["n_estimators"] == 6 and params["lifetime"] == 3.0 and params["window"] == 70
    assert params["random_state"] == 2 and back.n_features_in_ == 3
    assert not hasattr(back, "feature_names_in_")
    # It goes on learning, and clones and pickles like any estimator.
    back.partial_fit(X[:5], [1, 0, 1, 0, 1])
    assert back.n_samples_seen_ == 85
    assert clone(back).get_params() == back.get_params()
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(back)).predict(X), back.predict(X))

    reg = MondrianForestRegressor(n_estimators=4, mode="fast", noise=0.01, random_state=1)
    reg.fit(X, t).save(tmp_path / "r.bin")
    back = mondrian_ml.load(str(tmp_path / "r.bin"))
    assert isinstance(back, MondrianForestRegressor)
    assert back.get_params()["mode"] == "fast" and back.get_params()["noise"] == 0.01
    np.testing.assert_array_equal(back.predict(X), reg.predict(X))


def test_the_library_core_file_is_the_same_format(tmp_path):
    # Python's save is the Rust library's Persistent::save: the core writes it.
    X, y, _ = _data()
    core = ClassifierCore(n_trees=3, seed=4)
    core.fit(X, (y > 0).astype(np.int64))
    core.save(str(tmp_path / "core.bin"))
    back = mondrian_ml.load(tmp_path / "core.bin")
    np.testing.assert_array_equal(back.predict_proba(X), core.predict_proba(X))


def test_cli_models_load_with_their_labels_and_column_names(tmp_path):
    exe = mondrian_bin()
    X, y, t = _data()
    train = _csv(tmp_path / "train.csv", X, y)
    model = tmp_path / "m.bin"
    subprocess.run(
        [exe, "train", "--trees", "5", "--seed", "3", "--train", train, "--model", model],
        check=True, capture_output=True,
    )
    clf = mondrian_ml.load(model)
    assert isinstance(clf, MondrianForestClassifier)
    np.testing.assert_array_equal(clf.classes_, [-2, 7])
    assert clf.feature_names_in_.tolist() == ["a", "b", "c"]
    test = _csv(tmp_path / "test.csv", X[:20], y[:20])
    out = subprocess.run(
        [exe, "predict", "--proba", "--model", model, "--input", test],
        check=True, capture_output=True, text=True,
    ).stdout.splitlines()
    assert out[0] == "p_-2,p_7"
    cli = np.array([[float(v) for v in line.split(",")] for line in out[1:]])
    frame = pd.DataFrame(X[:20], columns=["a", "b", "c"])
    np.testing.assert_allclose(clf.predict_proba(frame), cli, atol=1e-6)  # 6 decimals
    assert set(clf.predict(frame)) <= {-2, 7}
    # As in scikit-learn, a DataFrame must name the training file's columns.
    with pytest.raises(ValueError, match="feature names"):
        clf.predict(pd.DataFrame(X[:20], columns=["a", "c", "b"]))
    # A new row of a known label goes on from there.
    clf.partial_fit(frame[:1], [7])
    assert clf.n_samples_seen_ == 81

    reg_model = tmp_path / "r.bin"
    train = _csv(tmp_path / "reg.csv", X, t, label="target")
    subprocess.run(
        [exe, "train", "--task", "regression", "--trees", "4", "--train", train,
         "--model", reg_model],
        check=True, capture_output=True,
    )
    reg = mondrian_ml.load(reg_model)
    assert isinstance(reg, MondrianForestRegressor)
    assert reg.feature_names_in_.tolist() == ["a", "b", "c"]
    out = subprocess.run(
        [exe, "predict", "--model", reg_model, "--input", test],
        check=True, capture_output=True, text=True,
    ).stdout.splitlines()
    cli = np.array([[float(v) for v in line.split(",")] for line in out[1:]])
    mean, std = reg.predict(frame, return_std=True)
    np.testing.assert_allclose(mean, cli[:, 0], atol=1e-8)  # 9 decimals
    np.testing.assert_allclose(std, cli[:, 1], atol=1e-8)


def test_a_cli_model_of_a_libsvm_file_has_no_names(tmp_path):
    exe = mondrian_bin()
    data = tmp_path / "train.svm"
    data.write_text("1 1:0.1 2:0.5\n2 1:0.9 2:0.4\n1 1:0.2\n2 1:0.8 2:0.9\n")
    model = tmp_path / "m.bin"
    subprocess.run(
        [exe, "train", "--trees", "3", "--train", data, "--model", model],
        check=True, capture_output=True,
    )
    clf = mondrian_ml.load(model)
    np.testing.assert_array_equal(clf.classes_, [1, 2])
    assert clf.n_features_in_ == 2 and not hasattr(clf, "feature_names_in_")
    assert clf.predict([[0.15, 0.5]]).tolist() == [1]


def test_what_is_not_a_model_is_refused_clearly(tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_text("label,a\n1,2\n")
    with pytest.raises(ValueError, match="not a mondrian model file"):
        mondrian_ml.load(junk)
    X, y, _ = _data()
    good = tmp_path / "good.bin"
    MondrianForestClassifier(n_estimators=2).fit(X, y).save(good)
    cut = tmp_path / "cut.bin"
    cut.write_bytes(good.read_bytes()[:200])
    with pytest.raises(ValueError, match="truncated"):
        mondrian_ml.load(cut)
    cut.write_bytes(good.read_bytes()[:10])
    with pytest.raises(ValueError, match="truncated"):
        mondrian_ml.load(cut)
    with pytest.raises(OSError):
        mondrian_ml.load(tmp_path / "missing.bin")


def test_smc_tree_files_load_as_the_estimators(tmp_path):
    from mondrian_ml import SMCTreeClassifier, SMCTreeRegressor

    X, y, t = _data(n=120, seed=3)
    Xt = _data(n=40, seed=4)[0]
    clf = SMCTreeClassifier(
        n_particles=30, n_islands=2, proposal="empirical", expansion="min_marginal",
        alpha_split=0.9, beta_split=0.75, min_samples_split=3, alpha=2.5, ess_threshold=0.3,
        resampler="systematic", island_weighting="evidence", random_state=7,
    ).fit(X, y)
    clf.save(tmp_path / "smc-c.bin")
    back = mondrian_ml.load(tmp_path / "smc-c.bin")
    assert isinstance(back, SMCTreeClassifier) and back.n_features_in_ == 3
    # The library's format keeps class indices, not label values.
    np.testing.assert_array_equal(back.classes_, [0, 1])
    np.testing.assert_array_equal(back.predict_proba(Xt), clf.predict_proba(Xt))
    np.testing.assert_array_equal(back.predict(Xt), (clf.predict(Xt) == 7).astype(int))
    assert back.log_evidence_ == clf.log_evidence_
    params, given = back.get_params(), clf.get_params()
    params.pop("n_jobs"), given.pop("n_jobs")
    assert params == given
    # It clones and refits like any estimator.
    np.testing.assert_array_equal(
        clone(back).fit(X, y).predict_proba(Xt), clone(clf).fit(X, y).predict_proba(Xt)
    )

    reg = SMCTreeRegressor(n_particles=25, proposal="optimal", random_state=1).fit(X, t)
    reg.save(str(tmp_path / "smc-r.bin"))
    back = mondrian_ml.load(str(tmp_path / "smc-r.bin"))
    assert isinstance(back, SMCTreeRegressor) and back.n_features_in_ == 3
    for a, b in zip(back.predict(Xt, return_std=True), reg.predict(Xt, return_std=True)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(back.log_predictive(Xt, Xt[:, 0]), reg.log_predictive(Xt, Xt[:, 0]))
    params, given = back.get_params(), reg.get_params()
    params.pop("n_jobs"), given.pop("n_jobs")
    assert params == given
