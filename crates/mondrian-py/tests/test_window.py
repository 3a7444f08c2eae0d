"""Sliding windows and forgetting: `window=` on both estimators, `forget`, and the points
held (`n_points_`, `point_ids_`, `n_samples_seen_`)."""

import copy
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from mondrian_ml import MondrianForestClassifier, MondrianForestRegressor

RANGES = [(0.0, 1.0)] * 3


def stream(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    return X, (X[:, 0] > X[:, 1]).astype(int) + (X[:, 2] > 0.7)


def classifier(**kw):
    return MondrianForestClassifier(n_estimators=8, feature_ranges=RANGES, **kw)


def regressor(**kw):
    return MondrianForestRegressor(n_estimators=8, feature_ranges=RANGES, **kw)


def targets(X):
    return np.sin(4 * X[:, 0]) + X[:, 1]


def data(make, n, seed):
    """n rows and their labels (classifier) or real targets (regressor)."""
    X, y = stream(n, seed)
    return X, (y if make is classifier else targets(X))


def as_dict(row):
    return {f"x{i}": float(v) for i, v in enumerate(row)}


def learn(model, X, t):
    """river style: one learn_one per row."""
    for row, value in zip(X, t):
        model.learn_one(as_dict(row), value)
    return model


MODELS = [classifier, regressor]


@pytest.mark.parametrize("make", MODELS)
def test_window_is_a_constructor_parameter(make):
    model = make(window=25)
    assert model.get_params()["window"] == 25
    assert clone(model).window == 25
    assert pickle.loads(pickle.dumps(model)).window == 25
    assert make().get_params()["window"] is None


@pytest.mark.parametrize("make", MODELS)
def test_learn_one_stream_holds_exactly_the_last_window(make):
    X, t = data(make, 400, 1)
    model = learn(make(window=25, random_state=0), X[:11], t[:11])
    assert model.n_points_ == 11
    np.testing.assert_array_equal(model.point_ids_, np.arange(11))
    learn(model, X[11:], t[11:])
    assert model.n_points_ == 25
    assert model.point_ids_.dtype == np.int64
    np.testing.assert_array_equal(model.point_ids_, np.arange(375, 400))
    assert model.n_samples_seen_ == 400
    # The trees hold the window's points only: at most one leaf per point.
    assert model.summary()["n_leaves"] <= 8 * 25


@pytest.mark.parametrize("make", MODELS)
def test_fit_and_partial_fit_keep_the_last_window(make):
    X, t = data(make, 300, 2)
    model = make(window=40, random_state=0).fit(X, t)
    assert model.n_points_ == 40
    np.testing.assert_array_equal(model.point_ids_, np.arange(260, 300))
    assert model.n_samples_seen_ == 300
    model.partial_fit(X[:15], t[:15])
    np.testing.assert_array_equal(model.point_ids_, np.arange(275, 315))
    # A new fit starts counting again.
    model.fit(X[:30], t[:30])
    np.testing.assert_array_equal(model.point_ids_, np.arange(30))
    assert model.n_samples_seen_ == 30
    # Without a window every point stays.
    whole = make(random_state=0).fit(X, t)
    assert whole.n_points_ == 300


def test_a_window_follows_a_stream_whose_labels_change():
    # 300 points of class 0, then 300 of class 1 over the same region: a 100-point window
    # has forgotten class 0; a forest without a window still mixes both.
    rng = np.random.default_rng(3)
    X = rng.random((600, 3))
    y = np.repeat([0, 1], 300)
    windowed = learn(classifier(window=100, random_state=0), X, y)
    whole = learn(classifier(random_state=0), X, y)
    probe = [as_dict(row) for row in rng.random((50, 3))]
    p_windowed = np.array([windowed.predict_proba_one(x)[1] for x in probe])
    p_whole = np.array([whole.predict_proba_one(x)[1] for x in probe])
    assert p_windowed.min() > 0.9
    assert p_whole.mean() < 0.8


@pytest.mark.parametrize("make", [MondrianForestClassifier, MondrianForestRegressor])
def test_window_zero_is_refused_with_the_library_message(make):
    X, y = stream(20)
    with pytest.raises(ValueError, match="invalid parameter `window`: must be at least 1"):
        make(window=0).fit(X, y.astype(float))
    model = make(window=0)
    with pytest.raises(ValueError, match="`window`"):
        model.learn_one({"a": 1.0}, 1)
    assert not model.__sklearn_is_fitted__()


@pytest.mark.parametrize("make", MODELS)
def test_forget_removes_the_points(make):
    X, t = data(make, 100, 4)
    model = make(random_state=0).fit(X, t)
    model.forget([3, 5, 7])
    assert model.n_points_ == 97
    assert not {3, 5, 7} & set(model.point_ids_.tolist())
    np.testing.assert_array_equal(model.point_ids_, np.setdiff1d(np.arange(100), [3, 5, 7]))
    model.forget(np.int64(10))
    model.forget(np.array([11, 12], dtype=np.uint64))
    model.forget(model.point_ids_[model.point_ids_ >= 90])
    model.forget([])
    assert model.n_points_ == 84
    assert model.n_samples_seen_ == 100
    # Training goes on; new ids follow the rows given.
    model.partial_fit(X[:5], t[:5])
    np.testing.assert_array_equal(model.point_ids_[-5:], np.arange(100, 105))
    assert model.n_points_ == 89
    assert model.forget([100]) is model


@pytest.mark.parametrize("lifetime", [np.inf, 2.0])
def test_forgetting_all_but_one_point_leaves_a_one_point_classifier(lifetime):
    # A forest on one point is the same whatever its seed: every tree is a single leaf
    # whose box is the point. Forgetting every other point must leave exactly that (the
    # boxes shrink back, the counts lose the others' labels), whatever the trees were.
    X, y = stream(300, 5)
    Xt, _ = stream(50, 6)
    keep = 17
    a = classifier(lifetime=lifetime, random_state=1).fit(X, y)
    a.forget([i for i in range(300) if i != keep])
    assert a.point_ids_.tolist() == [keep]
    b = classifier(lifetime=lifetime, random_state=2)
    b.partial_fit(X[[keep]], y[[keep]], classes=a.classes_)
    np.testing.assert_allclose(a.predict_proba(Xt), b.predict_proba(Xt), rtol=1e-12, atol=0)
    # Not trivially so: a forest on more points predicts otherwise.
    c = classifier(lifetime=lifetime, random_state=2).fit(X[:40], y[:40])
    assert np.abs(a.predict_proba(Xt) - c.predict_proba(Xt)).max() > 0.1


@pytest.mark.parametrize("mode", ["exact", "quadrature", "fast"])
def test_forgetting_all_but_a_few_points_leaves_their_regressor(mode):
    # Fewer points than min_samples_split (10): every tree is one leaf over them, the same
    # for any seed; θ and the messages come from the points left. (Uniform weights: weights
    # learnt from the 300 rows would stay with the forest.)
    X, y = stream(300, 7)
    t = targets(X)
    Xt, _ = stream(50, 8)
    keep = [3, 50, 77, 120, 200]
    kw = dict(mode=mode, min_samples_split=10, feature_weights=None, calibration="none")
    a = regressor(random_state=1, **kw).fit(X, t)
    a.forget([i for i in range(300) if i not in keep])
    b = regressor(random_state=2, **kw).fit(X[keep], t[keep])
    for key, value in b.theta_.items():
        assert a.theta_[key] == pytest.approx(value, rel=1e-12), key
    (ma, sa), (mb, sb) = a.predict(Xt, return_std=True), b.predict(Xt, return_std=True)
    np.testing.assert_allclose(ma, mb, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sa, sb, rtol=1e-9)
    c = regressor(random_state=2, **kw).fit(X[:5], t[:5])
    assert np.abs(c.predict(Xt) - ma).max() > 0.01


@pytest.mark.parametrize("make", MODELS)
def test_refused_forget_leaves_the_model_unchanged(make):
    X, t = data(make, 60, 9)
    model = make(window=50, random_state=0).fit(X, t)
    model.forget([20])
    before = pickle.dumps(model)
    # Never given, named twice, already forgotten, out of the window, negative.
    for bad in ([60], [30, 30], [25, 20], [3], 5, [-1], [2**63 + 5]):
        with pytest.raises(ValueError, match="is not in the model"):
            model.forget(bad)
        assert pickle.dumps(model) == before, bad
    for bad in ([1.5], np.ones(50, dtype=bool), [[11, 12]], ["a"]):
        with pytest.raises((TypeError, ValueError), match="ids must be"):
            model.forget(bad)
        assert pickle.dumps(model) == before, bad
    with pytest.raises(NotFittedError):
        make().forget([0])


@pytest.mark.parametrize("make", MODELS)
def test_a_pickled_windowed_model_goes_on_identically(make):
    X, t = data(make, 400, 10)
    a = learn(make(window=30, random_state=4), X[:200], t[:200])
    a.forget(a.point_ids_[::7])
    b = pickle.loads(pickle.dumps(a))
    c = copy.deepcopy(a)
    assert b.window == 30
    assert b._core.to_bytes() == a._core.to_bytes()
    for m in (a, b, c):
        learn(m, X[200:], t[200:])
    np.testing.assert_array_equal(a.point_ids_, np.arange(370, 400))
    probe = [as_dict(row) for row in X[:40]]
    if make is classifier:
        for m in (b, c):
            np.testing.assert_array_equal(m.point_ids_, a.point_ids_)
            assert m._core.to_bytes() == a._core.to_bytes()
            assert [m.predict_proba_one(x) for x in probe] == [a.predict_proba_one(x) for x in probe]
    else:
        # The trees go on identically; θ only to rounding, because the library re-sums the
        # window's target moments on a schedule it does not save (`labels_released` is
        # skipped by serde), so a loaded copy re-sums at other times.
        for m in (b, c):
            np.testing.assert_array_equal(m.point_ids_, a.point_ids_)
            assert m.summary() == a.summary()
            np.testing.assert_allclose(
                [m.predict_one(x) for x in probe], [a.predict_one(x) for x in probe], rtol=1e-12
            )
            for key, value in a.theta_.items():
                assert m.theta_[key] == pytest.approx(value, rel=1e-12), key


def test_gil_is_released_during_forget(satimage, runs_without_gil):
    X, y, _, _ = satimage
    clf = MondrianForestClassifier(n_estimators=60, random_state=0, n_jobs=1).fit(X, y)
    half = np.arange(0, len(X), 2)
    assert runs_without_gil(lambda: clf.forget(half))
    assert clf.n_points_ == len(X) - len(half)
