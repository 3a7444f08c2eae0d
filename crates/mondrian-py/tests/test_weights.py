"""scikit-learn parity: sample_weight, class_weight, predict_log_proba, n_classes_,
apply, warm_start and verbose."""

import sys
import types

import numpy as np
import pytest
from scipy.stats import ks_2samp
from sklearn.utils.class_weight import compute_sample_weight

from mondrian_ml import MondrianForestClassifier, MondrianForestRegressor


def _data(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 2))
    y = ((X[:, 0] > 0.5) ^ (rng.random(n) < 0.15)).astype(int)
    t = np.sin(4 * X[:, 0]) + X[:, 1]
    w = rng.integers(0, 4, size=n)  # integer weights 0-3
    return X, y, t, w


QUERIES = np.array([[0.3, 0.4], [0.55, 0.5], [0.8, 0.2]])


def test_integer_weights_have_the_law_of_repeated_rows():
    # With bagging a weighted row takes one Poisson(k) draw per tree and k repeated rows
    # k Poisson(1) draws, so the forests differ seed by seed; their laws must not. For each
    # query point, the predictions of 200 one-tree forests per side (independent seeds) are
    # compared by a two-sample KS test. Family-wise level 1e-3, Bonferroni over the 6
    # comparisons: each p-value must exceed 1e-3 / 6.
    X, y, t, w = _data()
    Xr, yr, tr = X.repeat(w, axis=0), y.repeat(w), t.repeat(w)
    seeds = range(200)
    p_values = []

    def runs(make, fit, offset):
        return np.array([fit(make(s + offset)) for s in seeds])

    clf = lambda s: MondrianForestClassifier(n_estimators=1, bagging=True, random_state=s)
    weighted = runs(clf, lambda m: m.fit(X, y, sample_weight=w).predict_proba(QUERIES)[:, 1], 0)
    repeated = runs(clf, lambda m: m.fit(Xr, yr).predict_proba(QUERIES)[:, 1], 10_000)
    p_values += [ks_2samp(weighted[:, q], repeated[:, q]).pvalue for q in range(3)]

    reg = lambda s: MondrianForestRegressor(
        n_estimators=1, bagging=True, min_samples_split=2, random_state=s
    )
    weighted = runs(reg, lambda m: m.fit(X, t, sample_weight=w).predict(QUERIES), 20_000)
    repeated = runs(reg, lambda m: m.fit(Xr, tr).predict(QUERIES), 30_000)
    p_values += [ks_2samp(weighted[:, q], repeated[:, q]).pvalue for q in range(3)]
    assert min(p_values) > 1e-3 / 6, p_values

    # The test has power: weights ignored (every kept row once) fail it at that level.
    kept = w > 0
    ignored = runs(clf, lambda m: m.fit(X[kept], y[kept]).predict_proba(QUERIES)[:, 1], 40_000)
    repeated = runs(clf, lambda m: m.fit(Xr, yr).predict_proba(QUERIES)[:, 1], 10_000)
    assert min(ks_2samp(ignored[:, q], repeated[:, q]).pvalue for q in range(3)) < 1e-3 / 6


def test_integer_weights_are_repeated_rows_exactly_without_bagging():
    # A batch fit draws the same numbers for a row of weight k and for k copies of it.
    X, y, t, w = _data()
    a = MondrianForestClassifier(n_estimators=20, random_state=1).fit(X, y, sample_weight=w)
    b = MondrianForestClassifier(n_estimators=20, random_state=1).fit(
        X.repeat(w, axis=0), y.repeat(w)
    )
    np.testing.assert_array_equal(a.predict_proba(QUERIES), b.predict_proba(QUERIES))
    a = MondrianForestRegressor(random_state=1).fit(X, t, sample_weight=w)
    b = MondrianForestRegressor(random_state=1).fit(X.repeat(w, axis=0), t.repeat(w))
    np.testing.assert_allclose(a.predict(QUERIES), b.predict(QUERIES), rtol=1e-12)


def test_zero_weight_rows_are_not_learnt_but_keep_their_ids():
    X, y, t, w = _data()
    far = X.copy()
    far[w == 0] = [40.0, -9.0]  # in the scaling they would move every feature
    a = MondrianForestClassifier(n_estimators=10, random_state=2).fit(far, y, sample_weight=w)
    keep = w > 0
    b = MondrianForestClassifier(n_estimators=10, random_state=2).fit(
        X[keep], y[keep], sample_weight=w[keep]
    )
    np.testing.assert_array_equal(a.predict_proba(QUERIES), b.predict_proba(QUERIES))
    assert a.n_samples_seen_ == 30 and a.n_points_ == keep.sum()
    np.testing.assert_array_equal(a.point_ids_, np.flatnonzero(keep))
    # Forgetting a weighted row takes all its copies: as if it had weight 0.
    heavy = int(np.flatnonzero(w == 3)[0])
    a.forget([heavy])
    assert a.n_points_ == keep.sum() - 1


def test_weights_in_partial_fit_and_the_regressor_online():
    X, y, t, w = _data()
    a = MondrianForestRegressor(n_estimators=5, mode="fast", random_state=3)
    for i in range(len(X)):
        a.partial_fit(X[i : i + 1], t[i : i + 1], sample_weight=w[i : i + 1])
    assert a.n_points_ == (w > 0).sum()
    # θ's target moments count each row by its weight, as the repeated rows would.
    b = MondrianForestRegressor(n_estimators=5, mode="fast", random_state=3).fit(
        X.repeat(w, axis=0), t.repeat(w)
    )
    assert a.theta_["mu_h"] == pytest.approx(b.theta_["mu_h"], rel=1e-12)
    assert a.theta_["gamma1"] == pytest.approx(b.theta_["gamma1"], rel=1e-12)


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf, 2.0**21])
def test_bad_weights_are_refused_and_change_nothing(bad):
    X, y, t, _ = _data()
    clf = MondrianForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    before = clf.predict_proba(QUERIES)
    w = np.ones(len(X))
    w[4] = bad
    with pytest.raises(ValueError, match="weight|finite|NaN|infinity|negative"):
        clf.fit(X, y, sample_weight=w)
    with pytest.raises(ValueError, match="weight|finite|NaN|infinity|negative"):
        clf.partial_fit(X, y, sample_weight=w)
    with pytest.raises(ValueError):
        clf.fit(X, y, sample_weight=np.ones(3))
    np.testing.assert_array_equal(clf.predict_proba(QUERIES), before)


def test_class_weight_is_sample_weight_by_class():
    X, y, _, w = _data()
    labels = np.where(y == 1, "b", "a")
    cw = {"a": 2.0, "b": 0.5}
    a = MondrianForestClassifier(n_estimators=10, random_state=4, class_weight=cw)
    b = MondrianForestClassifier(n_estimators=10, random_state=4)
    a.fit(X, labels, sample_weight=w)
    b.fit(X, labels, sample_weight=w * np.where(labels == "a", 2.0, 0.5))
    np.testing.assert_array_equal(a.predict_proba(QUERIES), b.predict_proba(QUERIES))
    balanced = MondrianForestClassifier(n_estimators=10, random_state=4, class_weight="balanced")
    plain = MondrianForestClassifier(n_estimators=10, random_state=4)
    balanced.fit(X, labels)
    plain.fit(X, labels, sample_weight=compute_sample_weight("balanced", labels))
    np.testing.assert_array_equal(balanced.predict_proba(QUERIES), plain.predict_proba(QUERIES))
    with pytest.raises(ValueError, match="balanced"):
        MondrianForestClassifier(class_weight="balanced").partial_fit(X, labels)
    # learn_one weighs its label by the dict, as partial_fit with that weight does.
    one = MondrianForestClassifier(n_estimators=4, random_state=5, class_weight=cw,
                                   feature_ranges=[(0, 1), (0, 1)])
    two = MondrianForestClassifier(n_estimators=4, random_state=5, feature_ranges=[(0, 1), (0, 1)])
    for row, label in zip(X, labels):
        one.learn_one({"p": row[0], "q": row[1]}, label)
        two.partial_fit(row[None, :], [label], sample_weight=[cw[label]])
    q = {"p": 0.3, "q": 0.4}
    assert one.predict_proba_one(q) == pytest.approx(
        dict(zip(two.classes_.tolist(), two.predict_proba(QUERIES[:1])[0])), abs=0
    )


def test_predict_log_proba_and_n_classes():
    X, y, _, _ = _data()
    clf = MondrianForestClassifier(n_estimators=10, random_state=0).fit(X, y + 3)
    np.testing.assert_array_equal(clf.predict_log_proba(QUERIES), np.log(clf.predict_proba(QUERIES)))
    assert np.isfinite(clf.predict_log_proba(QUERIES)).all()
    assert clf.n_classes_ == 2 == len(clf.classes_)
    clf.partial_fit(X[:1], [9])
    assert clf.n_classes_ == 3


def test_apply_gives_the_leaf_of_each_row_in_each_tree():
    X, y, t, _ = _data()
    clf = MondrianForestClassifier(n_estimators=7, random_state=0).fit(X, y)
    leaves = clf.apply(X)
    assert leaves.shape == (30, 7) and leaves.dtype == np.int64
    assert (leaves >= 0).all()
    # A copy of a training row lands where the row does; rows apart part somewhere.
    np.testing.assert_array_equal(clf.apply(X[[3, 3]]), leaves[[3, 3]])
    assert (leaves[0] != leaves[1]).any()
    reg = MondrianForestRegressor(n_estimators=4, random_state=0).fit(X, t)
    assert reg.apply(QUERIES).shape == (3, 4)
    # With bagging a tree may take no copy of a lone row: -1 there.
    lone = MondrianForestClassifier(n_estimators=20, bagging=True, random_state=0).fit(X[:1], y[:1])
    ids = lone.apply(X[:1])[0]
    assert (ids == -1).any() and (ids >= -1).all() and (ids != -1).any()


@pytest.mark.parametrize("bagging", [False, True])
def test_warm_start_adds_trees_and_leaves_the_old_ones(bagging):
    X, y, t, w = _data()
    clf = MondrianForestClassifier(n_estimators=5, warm_start=True, bagging=bagging, random_state=6)
    clf.fit(X, y, sample_weight=w)
    old = clf.apply(QUERIES)
    clf.set_params(n_estimators=9).fit(X, y)
    assert clf.summary()["n_trees"] == 9
    np.testing.assert_array_equal(clf.apply(QUERIES)[:, :5], old)
    # Tree t is seeded by (random_state, t): the forest of a fit with 9 trees.
    fresh = MondrianForestClassifier(n_estimators=9, bagging=bagging, random_state=6)
    fresh.fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(clf.predict_proba(QUERIES), fresh.predict_proba(QUERIES))
    with pytest.warns(UserWarning, match="does not fit new trees"):
        clf.fit(X, y)
    with pytest.raises(ValueError, match="at least"):
        clf.set_params(n_estimators=3).fit(X, y)
    with pytest.raises(ValueError):
        clf.set_params(n_estimators=12).fit(X[:, :1], y)  # not the model's width
    reg = MondrianForestRegressor(n_estimators=3, warm_start=True, random_state=6).fit(X, t)
    reg.set_params(n_estimators=6).fit(X, t)
    fresh = MondrianForestRegressor(n_estimators=6, random_state=6).fit(X, t)
    np.testing.assert_array_equal(reg.predict(QUERIES), fresh.predict(QUERIES))


def test_verbose_prints_progress_on_stderr_and_nothing_by_default(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # as if tqdm were not installed
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    X, y, t, _ = _data()
    MondrianForestClassifier(n_estimators=70, random_state=0).fit(X, y)
    assert capsys.readouterr().err == ""
    MondrianForestClassifier(n_estimators=70, verbose=1, n_jobs=2, random_state=0).fit(X, y)
    lines = capsys.readouterr().err.splitlines()
    # One line per group of trees done; a group that reports late is not shown.
    assert lines[-1] == "MondrianForestClassifier: 70/70 trees"
    assert all(line.startswith("MondrianForestClassifier: ") for line in lines)


def test_verbose_uses_tqdm_when_installed(monkeypatch):
    updates = []

    class FakeBar:
        def __init__(self, total, **kwargs):
            updates.append(("total", total))

        def update(self, n):
            updates.append(("update", n))

        def close(self):
            updates.append(("close", None))

    auto = types.ModuleType("tqdm.auto")
    auto.tqdm = FakeBar
    monkeypatch.setitem(sys.modules, "tqdm", types.ModuleType("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.auto", auto)
    X, _, t, _ = _data()
    MondrianForestRegressor(n_estimators=40, verbose=1, random_state=0).fit(X, t)
    assert updates[0] == ("total", 40) and updates[-1] == ("close", None)
    assert sum(n for kind, n in updates if kind == "update") == 40
