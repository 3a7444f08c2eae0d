"""Bad input gets the usual Python exceptions with clear messages, never a crash."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from mondrian_ml import MondrianForestClassifier


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.random((50, 3))
    return X, (X[:, 0] > 0.5).astype(int)


def test_not_fitted(data):
    X, _ = data
    clf = MondrianForestClassifier()
    for call in (clf.predict, clf.predict_proba):
        with pytest.raises(NotFittedError):
            call(X)
    with pytest.raises(NotFittedError):
        clf.summary()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_features(data, bad):
    X, y = data
    Xb = X.copy()
    Xb[3, 1] = bad
    with pytest.raises(ValueError, match="(?i)nan|infinity"):
        MondrianForestClassifier(n_estimators=2).fit(Xb, y)
    clf = MondrianForestClassifier(n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="(?i)nan|infinity"):
        clf.predict(Xb)
    with pytest.raises(ValueError, match="(?i)nan|infinity"):
        clf.partial_fit(Xb, y)


def test_wrong_width(data):
    X, y = data
    clf = MondrianForestClassifier(n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="3 features"):
        clf.predict(X[:, :2])
    with pytest.raises(ValueError, match="3 features"):
        clf.partial_fit(X[:, :2], y)


def test_one_dimensional_x(data):
    X, y = data
    with pytest.raises(ValueError, match="2D array"):
        MondrianForestClassifier(n_estimators=2).fit(X[:, 0], y)
    clf = MondrianForestClassifier(n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="2D array"):
        clf.predict(X[0])


def test_empty_and_mismatched(data):
    X, y = data
    with pytest.raises(ValueError, match="0 sample"):
        MondrianForestClassifier(n_estimators=2).fit(X[:0], y[:0])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        MondrianForestClassifier(n_estimators=2).fit(X, y[:-1])


def test_labels_must_be_classes(data):
    X, _ = data
    with pytest.raises(ValueError, match="Unknown label type"):
        MondrianForestClassifier(n_estimators=2).fit(X, X[:, 0])


def test_text_features(data):
    X, y = data
    Xs = X.astype(object)
    Xs[0, 0] = "abc"
    with pytest.raises(ValueError):
        MondrianForestClassifier(n_estimators=2).fit(Xs, y)


def test_scaled_value_overflowing_the_trees_is_refused(data):
    X, y = data
    clf = MondrianForestClassifier(n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="too large"):
        clf.predict(np.full((1, 3), 1e300))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_estimators": 0}, "n_estimators"),
        ({"n_estimators": 2.5}, "n_estimators"),
        ({"lifetime": -1.0}, "lifetime"),
        ({"lifetime": float("nan")}, "lifetime"),
        ({"discount_factor": -1.0}, "discount_factor"),
        ({"discount_factor": float("inf")}, "discount_factor"),
        ({"min_samples_split": 0}, "min_samples_split"),
        ({"branch_counts": "other"}, "branch_counts"),
        ({"feature_ranges": "minmax"}, "feature_ranges"),
        ({"feature_ranges": [(0, 1), (1, 0), (0, 1)]}, "range"),
        ({"n_jobs": 0}, "n_jobs"),
        ({"random_state": -3}, "random_state"),
    ],
)
def test_invalid_parameters(data, params, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        MondrianForestClassifier(n_estimators=2).set_params(**params).fit(X, y)


def test_refused_input_leaves_the_model_unchanged(data):
    X, y = data
    clf = MondrianForestClassifier(n_estimators=4, random_state=0).fit(X, y)
    before = clf.predict_proba(X)
    Xb = X.copy()
    Xb[-1, -1] = np.nan
    with pytest.raises(ValueError):
        clf.partial_fit(Xb, y)
    with pytest.raises(ValueError):
        clf.partial_fit(np.full((1, 3), 1e300), [0])
    np.testing.assert_array_equal(clf.predict_proba(X), before)


def test_missing_labels_are_refused_by_learn_one():
    # NaN ≠ NaN: every NaN label used to become a class of its own; None became a class.
    clf = MondrianForestClassifier(n_estimators=2, feature_ranges=[(0, 1)] * 2)
    for bad in (float("nan"), None):
        with pytest.raises(ValueError, match="class label"):
            clf.learn_one({"a": 0.1, "b": 0.2}, bad)
    assert not clf.__sklearn_is_fitted__()
    clf.learn_one({"a": 0.1, "b": 0.2}, 0)
    with pytest.raises(ValueError, match="class label"):
        clf.learn_one({"a": 0.3, "b": 0.2}, np.float64("nan"))
    assert clf.classes_.tolist() == [0]
    with pytest.raises(ValueError, match="NaN or None"):
        MondrianForestClassifier(n_estimators=2).partial_fit(
            np.zeros((2, 2)), [0, 1], classes=[0, 1, np.nan]
        )


@pytest.mark.parametrize(
    "params, match",
    [
        # λ = 0 grows trees that never split.
        ({"lifetime": 0}, "lifetime"),
        # bool("no") is True: strings were taken as flags.
        ({"bagging": "no"}, "bagging"),
        ({"pause_on_pure": "False"}, "pause_on_pure"),
        # 10**11 trees aborted the interpreter on a failed allocation; 2**70 was an
        # OverflowError naming no parameter.
        ({"n_estimators": 10**11}, "n_trees"),
        ({"n_estimators": 2**70}, "n_estimators"),
        ({"min_samples_split": 2**70}, "min_samples_split"),
        # A pool of 100000 threads took minutes to start.
        ({"n_jobs": 100_000}, "n_jobs"),
    ],
)
def test_out_of_range_parameters(data, params, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        MondrianForestClassifier(n_estimators=2).set_params(**params).fit(X, y)


def test_forged_model_bytes_are_refused():
    # A payload edited with a fresh checksum (as a foreign or hand-made file would be) is
    # checked before use: out-of-range node indices panicked, cycles hung.
    import struct
    import zlib

    from mondrian_ml._core import ClassifierCore, RegressorCore

    rng = np.random.default_rng(1)
    X = rng.random((30, 2))
    for core in (ClassifierCore(n_trees=2, seed=1), RegressorCore(n_trees=2, min_samples_split=2)):
        if isinstance(core, ClassifierCore):
            core.fit(X, (X[:, 0] > 0.5).astype(np.int64))
        else:
            core.fit(X, X[:, 0] * 2.0)
        blob = core.to_bytes()
        head = 13 + blob[12] + 12
        for at in range(0, len(blob) - head - 4, 5):
            payload = bytearray(blob[head:])
            payload[at : at + 4] = struct.pack("<I", 0xFFFFFF00)
            header = bytearray(blob[:head])
            header[-4:] = struct.pack("<I", zlib.crc32(payload))
            y3 = (X[:3, 0] > 0.5).astype(np.int64) if isinstance(core, ClassifierCore) else X[:3, 0].copy()
            try:  # a panic (PanicException) or a hang fails the test; ValueError is fine
                back = type(core).from_bytes(bytes(header) + bytes(payload))
                back.predict_proba(X) if isinstance(core, ClassifierCore) else back.predict(X)
                back.partial_fit(X[:3], y3)
            except ValueError:
                continue
