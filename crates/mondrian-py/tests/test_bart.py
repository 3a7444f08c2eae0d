"""BART from Python: scikit-learn's checks, accuracy, the posterior predictive and its
intervals, draws and traces, pickling and files through the library's checked format,
errors and the GIL."""

import pickle

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

import mondrian_ml
from mondrian_ml import BARTClassifier, BARTRegressor

SMALL = dict(n_trees=10, n_iter=60, burn_in=30, random_state=0)


# Every check of scikit-learn's suite applies and passes for each sampler, on small
# chains (the defaults, 200 trees and 2000 iterations, would take minutes). The checks
# that need `sample_weight` do not apply: `fit` takes none. BARTClassifier declares no
# multiclass support (it is refused, as check_classifier_not_supporting_multiclass
# wants).
@parametrize_with_checks(
    [
        BARTRegressor(**SMALL),
        BARTRegressor(sampler="cgm", **SMALL),
        BARTRegressor(sampler="growprune", **SMALL),
        BARTClassifier(**SMALL),
        BARTClassifier(sampler="cgm", **SMALL),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def wave():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(400, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 2] + 0.1 * rng.normal(size=400)
    return X[:300], y[:300], X[300:], y[300:]


@pytest.fixture(scope="module")
def fitted(wave):
    X, y, _, _ = wave
    return BARTRegressor(n_trees=30, n_iter=300, burn_in=150, random_state=1).fit(X, y)


def test_regression_accuracy_and_std(wave, fitted):
    X, y, Xt, yt = wave
    mean, std = fitted.predict(Xt, return_std=True)
    np.testing.assert_array_equal(mean, fitted.predict(Xt))
    # y = sin(4 x0) + x2 + noise of s.d. 0.1 has s.d. about 0.55: a good fit has R² > 0.9.
    assert fitted.score(Xt, yt) > 0.85
    # The noise s.d. is learnt, and the predictive s.d. (noise included) covers the error.
    sigma = fitted.sigma_draws_
    assert sigma.shape == (150,) and 0.05 < sigma.mean() < 0.2
    assert (std > sigma.min()).all()
    assert np.mean(np.abs(mean - yt) < 2 * std) > 0.85
    # Without noise the spread of f is smaller: std² = var_s f_s + mean_s σ_s².
    draws = fitted.posterior_draws(Xt)
    assert draws.shape == (150, 100)
    np.testing.assert_allclose(draws.mean(axis=0), mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(std**2, draws.var(axis=0) + np.mean(sigma**2), rtol=1e-8)


def test_intervals_cover(wave, fitted):
    _, _, Xt, yt = wave
    lo, hi = fitted.predict_interval(Xt, coverage=0.9)
    assert lo.shape == hi.shape == (100,) and (lo < hi).all()
    inside = np.mean((lo <= yt) & (yt <= hi))
    assert 0.75 < inside <= 1.0, inside
    lo5, hi5 = fitted.predict_interval(Xt, coverage=0.5)
    assert (lo < lo5).all() and (hi5 < hi).all()
    mean = fitted.predict(Xt)
    assert ((lo5 < mean) & (mean < hi5)).all()
    for bad in (0.0, 1.0, 1.5, "0.9", True):
        with pytest.raises(ValueError):
            fitted.predict_interval(Xt, coverage=bad)


def test_traces(fitted):
    t = fitted.traces_
    for key in ("log_likelihood", "sigma2", "mean_leaves", "total_leaves", "train_mse",
                "move_rate", "seconds"):
        assert t[key].shape == (300,), key
    assert t["burn_in"] == 150 and fitted.n_draws_ == 150
    np.testing.assert_array_equal(fitted.log_likelihood_trace_, t["log_likelihood"])
    np.testing.assert_array_equal(fitted.mean_leaves_trace_, t["mean_leaves"])
    np.testing.assert_array_equal(fitted.sigma2_trace_, t["sigma2"])
    np.testing.assert_allclose(fitted.sigma2_trace_[150:], fitted.sigma_draws_**2, rtol=1e-12)
    assert 1 <= fitted.ess_ <= 150 * 1.5 and fitted.ess_per_second_ > 0
    assert (t["mean_leaves"] >= 1).all() and ((0 <= t["move_rate"]) & (t["move_rate"] <= 1)).all()
    # The chain moves from its single-leaf start to a better fit.
    assert t["log_likelihood"][-50:].mean() > t["log_likelihood"][:5].mean()


def test_samplers_fit(wave):
    X, y, Xt, yt = wave
    for sampler in ("pg", "cgm", "growprune"):
        reg = BARTRegressor(
            n_trees=20, sampler=sampler, n_particles=5, n_iter=200, burn_in=100, random_state=3
        ).fit(X, y)
        assert reg.score(Xt, yt) > 0.8, sampler


def test_classifier_with_string_labels():
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(300, 2))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0.6, "high", "low")
    clf = BARTClassifier(n_trees=20, n_iter=200, burn_in=100, random_state=0).fit(X, y)
    assert list(clf.classes_) == ["high", "low"] and clf.n_classes_ == 2
    assert clf.score(X, y) > 0.9
    proba = clf.predict_proba(X)
    assert proba.shape == (300, 2) and ((0 <= proba) & (proba <= 1)).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(proba[:, 1] > proba[:, 0]).astype(int)])
    draws = clf.posterior_draws(X)
    assert draws.shape == (100, 300)
    from scipy.stats import norm

    np.testing.assert_allclose(norm.cdf(draws).mean(axis=0), proba[:, 1], atol=1e-6)
    assert clf.traces_["log_likelihood"].shape == (200,)
    assert (clf.traces_["sigma2"] == 1).all()
    assert not hasattr(clf, "sigma_draws_")


def test_same_seed_same_model_any_thread_count(wave):
    X, y, Xt, _ = wave
    runs = [
        BARTRegressor(n_trees=10, n_iter=80, burn_in=40, random_state=5, n_jobs=n)
        .fit(X, y)
        .predict(Xt, return_std=True)
        for n in (None, 2, -1)
    ]
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])
    other = BARTRegressor(n_trees=10, n_iter=80, burn_in=40, random_state=6).fit(X, y)
    assert not np.array_equal(other.predict(Xt), runs[0][0])


def test_pickle_and_files_round_trip(wave, fitted, tmp_path):
    X, y, Xt, _ = wave
    back = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(back.predict(Xt), fitted.predict(Xt))
    for a, b in zip(back.predict(Xt, return_std=True), fitted.predict(Xt, return_std=True)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(back.predict_interval(Xt), fitted.predict_interval(Xt)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(back.posterior_draws(Xt), fitted.posterior_draws(Xt))
    np.testing.assert_array_equal(back.sigma_draws_, fitted.sigma_draws_)
    np.testing.assert_array_equal(back.log_likelihood_trace_, fitted.log_likelihood_trace_)
    labels = np.where(y > np.median(y), "up", "down")
    clf = BARTClassifier(n_trees=10, n_iter=60, burn_in=30, random_state=0).fit(X, labels)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_proba(Xt), clf.predict_proba(Xt))
    np.testing.assert_array_equal(again.predict(Xt), clf.predict(Xt))
    # Files: mondrian_ml.load gives the estimator back (labels 0 and 1 for the classifier).
    path = tmp_path / "bart.model"
    fitted.save(path)
    loaded = mondrian_ml.load(path)
    assert isinstance(loaded, BARTRegressor) and loaded.n_features_in_ == 3
    assert loaded.get_params()["n_trees"] == 30 and loaded.get_params()["n_iter"] == 300
    np.testing.assert_array_equal(loaded.predict(Xt), fitted.predict(Xt))
    clf.save(tmp_path / "clf.model")
    loaded = mondrian_ml.load(tmp_path / "clf.model")
    assert isinstance(loaded, BARTClassifier) and list(loaded.classes_) == [0, 1]
    np.testing.assert_array_equal(loaded.predict_proba(Xt), clf.predict_proba(Xt))
    # The kinds are checked; corrupt or cut bytes are a ValueError, never a crash.
    data = fitted._core.to_bytes()
    assert type(fitted._core).from_bytes(data).to_bytes() == data
    with pytest.raises(ValueError, match="expected"):
        type(clf._core).from_bytes(data)
    for at in (10, len(data) // 3, len(data) // 2, len(data) - 1):
        bad = bytearray(data)
        bad[at] ^= 0x55
        with pytest.raises(ValueError):
            type(fitted._core).from_bytes(bytes(bad))
    with pytest.raises(ValueError):
        type(fitted._core).from_bytes(data[:-10])
    cut = tmp_path / "cut.model"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError):
        mondrian_ml.load(cut)
    # An unfitted estimator pickles too.
    fresh = pickle.loads(pickle.dumps(BARTRegressor(n_trees=7)))
    assert fresh.n_trees == 7


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: BARTRegressor(n_trees=0), "n_trees"),
        (lambda: BARTRegressor(n_trees=2.5), "n_trees"),
        (lambda: BARTRegressor(n_particles=0), "particles"),
        (lambda: BARTRegressor(n_iter=10, burn_in=10), "burn_in"),
        (lambda: BARTRegressor(n_iter=10, burn_in=20), "burn_in"),
        (lambda: BARTRegressor(n_iter=0, burn_in=0), "n_iter"),
        (lambda: BARTRegressor(burn_in=-1), "burn_in"),
        (lambda: BARTRegressor(sampler="gibbs"), "sampler"),
        (lambda: BARTRegressor(sampler=None), "sampler"),
        (lambda: BARTRegressor(alpha_s=1.0), "alpha"),
        (lambda: BARTRegressor(beta_s=float("nan")), "beta"),
        (lambda: BARTRegressor(k=0.0), "k"),
        (lambda: BARTRegressor(nu=-1.0), "nu"),
        (lambda: BARTRegressor(q=1.0), "q"),
        (lambda: BARTRegressor(q="0.9"), "q"),
        (lambda: BARTRegressor(n_jobs=0), "n_jobs"),
        (lambda: BARTRegressor(random_state=-1), "random_state"),
        (lambda: BARTClassifier(n_trees=0), "n_trees"),
        (lambda: BARTClassifier(sampler="pg", n_particles=0), "particles"),
        (lambda: BARTClassifier(n_iter=5, burn_in=5), "burn_in"),
    ],
)
def test_bad_parameters_are_value_errors(make, match, wave):
    X, y, _, _ = wave
    est = make()
    if isinstance(est, BARTClassifier):
        y = (y > y.mean()).astype(int)
    with pytest.raises(ValueError, match=match):
        est.fit(X[:50], y[:50])


def test_bad_data_is_refused(wave):
    X, y, Xt, _ = wave
    small = dict(n_trees=3, n_iter=10, burn_in=5)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        BARTRegressor(**small).fit(bad, y)
    yb = y.copy()
    yb[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        BARTRegressor(**small).fit(X, yb)
    with pytest.raises(ValueError, match="equal"):
        BARTRegressor(**small).fit(X, np.ones(len(X)))
    with pytest.raises(ValueError, match="n_samples = 1"):
        BARTRegressor(**small).fit(X[:1], y[:1])
    three = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    with pytest.raises(ValueError, match="Only binary classification"):
        BARTClassifier(**small).fit(X, three)
    with pytest.raises(ValueError, match="1 class"):
        BARTClassifier(**small).fit(X, np.zeros(len(X), dtype=int))
    with pytest.raises(ValueError, match="Unknown label type"):
        BARTClassifier(**small).fit(X, y)  # continuous labels
    from sklearn.exceptions import NotFittedError

    for call in (
        lambda: BARTRegressor().posterior_draws(Xt),
        lambda: BARTRegressor().predict_interval(Xt),
        lambda: BARTRegressor().sigma_draws_,
        lambda: BARTClassifier().posterior_draws(Xt),
        lambda: BARTClassifier().ess_,
    ):
        with pytest.raises(NotFittedError):
            call()
    reg = BARTRegressor(**small, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        reg.predict(Xt[:, :2])
    bad = Xt.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        reg.predict(bad)


def test_gil_is_released_during_fit_and_predict(wave, runs_without_gil):
    X, y, Xt, _ = wave
    reg = BARTRegressor(n_trees=50, n_iter=200, burn_in=100, random_state=0)
    assert runs_without_gil(lambda: reg.fit(X, y))
    big = np.ascontiguousarray(np.tile(Xt, (50, 1)))
    assert runs_without_gil(lambda: reg.predict(big, return_std=True))
    assert runs_without_gil(lambda: reg.posterior_draws(big))
    clf = BARTClassifier(n_trees=50, n_iter=200, burn_in=100, random_state=0)
    assert runs_without_gil(lambda: clf.fit(X, (y > y.mean()).astype(int)))
    assert runs_without_gil(lambda: clf.predict_proba(big))
