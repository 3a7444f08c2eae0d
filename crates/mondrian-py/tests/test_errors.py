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
