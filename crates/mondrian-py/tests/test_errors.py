"""Bad input gets the usual Python exceptions with clear messages, never a crash."""

import re

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from mondrian_ml import MondrianForestClassifier, MondrianForestRegressor


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


# Values are the library's to check (its `validate`): its message comes through as a
# ValueError, the same words the CLI prints, with the library's names for the parameters
# (n_trees for n_estimators, n_threads for n_jobs).
LIBRARY_REFUSES = [
    ({"n_estimators": 0}, "invalid parameter `n_trees`: must be at least 1"),
    # 10**11 trees aborted the interpreter on a failed allocation.
    ({"n_estimators": 10**11}, "invalid parameter `n_trees`: 100000000000 is more than"),
    # λ = 0 grows trees that never split.
    ({"lifetime": 0}, "invalid parameter `lifetime`: must be > 0"),
    ({"lifetime": -1.0}, "invalid parameter `lifetime`: must be > 0"),
    ({"lifetime": float("nan")}, "invalid parameter `lifetime`: must be > 0"),
    ({"discount_factor": -1.0}, "invalid parameter `discount_factor`: must be finite"),
    ({"discount_factor": float("inf")}, "invalid parameter `discount_factor`: must be finite"),
    ({"min_samples_split": 0}, "invalid parameter `min_samples_split`: must be at least 1"),
    ({"window": 0}, "invalid parameter `window`: must be at least 1 point"),
    ({"feature_ranges": [(0, 1), (1, 0), (0, 1)]}, "feature 1: (1, 0) is not a finite range"),
    ({"feature_ranges": [(0, 1)]}, "3 features, expected 1"),
    ({"feature_weights": [1, 2]}, "invalid parameter `feature_weights`: 2 weights for 3 features"),
    # A pool of 100000 threads took minutes to start.
    ({"n_jobs": 100_000}, "invalid parameter `n_threads`: 100000 is more than 1024"),
]
# What the library cannot see is checked in Python: the types (an int where the core takes
# a count, a bool for a flag), scikit-learn's conventions (n_jobs, random_state) and the
# estimators' own spellings; the core checks its string vocabularies.
PYTHON_REFUSES = [
    ({"n_estimators": 2.5}, "n_estimators must be a non-negative integer"),
    # 2**70 was an OverflowError naming no parameter.
    ({"n_estimators": 2**70}, "n_estimators must be a non-negative integer"),
    ({"min_samples_split": 2**70}, "min_samples_split must be a non-negative integer"),
    ({"window": -1}, "window must be a non-negative integer or None"),
    ({"window": 2.5}, "window must be a non-negative integer or None"),
    ({"lifetime": "1"}, "lifetime must be a real number"),
    # bool("no") is True: strings were taken as flags.
    ({"bagging": "no"}, "bagging must be True or False"),
    ({"pause_on_pure": "False"}, "pause_on_pure must be True or False"),
    ({"branch_counts": None}, "branch_counts must be a string"),
    ({"branch_counts": "other"}, "branch_counts must be 'paper' or 'reference'"),
    ({"feature_ranges": "minmax"}, "feature_ranges must be None, 'identity'"),
    ({"feature_ranges": [(0, 1, 2)] * 3}, "feature_ranges must be (min, max) pairs"),
    ({"n_jobs": 0}, "n_jobs must be a non-zero integer"),
    ({"random_state": -3}, "random_state must be non-negative"),
]


@pytest.mark.parametrize("params, message", LIBRARY_REFUSES + PYTHON_REFUSES)
def test_invalid_parameters(data, params, message):
    X, y = data
    with pytest.raises(ValueError, match=re.escape(message)):
        MondrianForestClassifier(n_estimators=2).set_params(**params).fit(X, y)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_estimators": 0}, "invalid parameter `n_trees`: must be at least 1"),
        ({"min_samples_split": 0}, "invalid parameter `min_samples_split`: must be at least 1"),
        ({"window": 0}, "invalid parameter `window`: must be at least 1 point"),
        ({"k_cap": 0.5}, "invalid parameter `k_cap`: must be a finite number ≥ 1"),
        ({"gamma2_divisor": 0}, "invalid parameter `gamma2_divisor`: must be finite and > 0"),
        ({"noise": -1.0}, "invalid parameter `noise variance`: must be finite and > 0"),
        ({"calibration": "yes"}, "invalid parameter `calibration`: `yes` is not `none`, `cv` or `auto`"),
        ({"mode": "slow"}, "mode must be 'exact', 'quadrature' or 'fast'"),
        ({"mode": None}, "mode must be a string"),
        ({"k_cap": "5"}, "k_cap must be a real number"),
        ({"noise": True}, "noise must be a string or a real number"),
        ({"window": 1.5}, "window must be a non-negative integer or None"),
    ],
)
def test_invalid_regressor_parameters(data, params, message):
    X, y = data
    with pytest.raises(ValueError, match=re.escape(message)):
        MondrianForestRegressor(n_estimators=2).set_params(**params).fit(X, y.astype(float))


def test_threads_set_after_fitting_are_checked_by_the_library(data):
    # The same check as at construction, when the next call brings the model to n_jobs.
    X, y = data
    clf = MondrianForestClassifier(n_estimators=2).fit(X, y)
    clf.set_params(n_jobs=100_000)
    with pytest.raises(ValueError, match=re.escape("`n_threads`: 100000 is more than 1024")):
        clf.predict(X)
    clf.set_params(n_jobs=2)
    assert clf.predict(X).shape == (len(X),)


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
        head = 13 + blob[12] + 17  # ... encoding, payload length, payload CRC, header CRC
        for at in range(0, len(blob) - head - 4, 5):
            payload = bytearray(blob[head:])
            payload[at : at + 4] = struct.pack("<I", 0xFFFFFF00)
            header = bytearray(blob[:head])
            header[-8:-4] = struct.pack("<I", zlib.crc32(payload))
            header[-4:] = struct.pack("<I", zlib.crc32(bytes(header[:-4])))
            y3 = (X[:3, 0] > 0.5).astype(np.int64) if isinstance(core, ClassifierCore) else X[:3, 0].copy()
            try:  # a panic (PanicException) or a hang fails the test; ValueError is fine
                back = type(core).from_bytes(bytes(header) + bytes(payload))
                back.predict_proba(X) if isinstance(core, ClassifierCore) else back.predict(X)
                back.partial_fit(X[:3], y3)
            except ValueError:
                continue


@pytest.mark.parametrize("Model", [MondrianForestClassifier, MondrianForestRegressor])
def test_a_memory_budget_too_small_raises_memory_error_before_growing(Model):
    rng = np.random.default_rng(0)
    X = rng.random((300, 4))
    y = (X[:, 0] > 0.5).astype(int)
    big = Model(n_estimators=2000, max_memory="1M", random_state=0)
    with pytest.raises(MemoryError, match="not enough memory.*2000 trees over 300 points"):
        big.fit(X, y)
    with pytest.raises(NotFittedError):
        big.predict(X)
    # Within budget it trains; a malformed budget is a clear ValueError.
    Model(n_estimators=2, max_memory=10_000_000, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="memory size"):
        Model(n_estimators=2, max_memory="lots").fit(X, y)
