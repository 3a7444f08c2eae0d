"""SMC decision trees from Python: scikit-learn's checks, accuracy, the posterior
predictive, pickling through the library's checked format, errors and the GIL."""

import pickle

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator, parametrize_with_checks

from mondrian_ml import SMCTreeClassifier, SMCTreeRegressor


# Every check of scikit-learn's suite applies and passes, for each proposal and expansion
# family. The one that reports "skipped" is check_array_api_input, which scikit-learn
# itself skips unless SCIPY_ARRAY_API is set and which only concerns estimators that
# declare array-API support (these take numpy). The checks that need `sample_weight`
# do not apply: `fit` takes none.
@parametrize_with_checks(
    [
        SMCTreeClassifier(n_particles=20, random_state=0),
        SMCTreeClassifier(
            n_particles=12, n_islands=3, proposal="optimal", expansion="min_marginal", random_state=0
        ),
        SMCTreeRegressor(n_particles=20, random_state=0),
        SMCTreeRegressor(
            n_particles=12, proposal="empirical", expansion="layer_wise", random_state=0
        ),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("make", [SMCTreeClassifier, SMCTreeRegressor])
def test_default_estimators_pass_too(make):
    results = check_estimator(make(), on_fail=None)
    bad = [r for r in results if r["status"] == "failed"]
    assert not bad, bad
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= {"check_array_api_input"}, skipped


@pytest.fixture(scope="module")
def wave():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(400, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 2] + 0.05 * rng.normal(size=400)
    return X[:300], y[:300], X[300:], y[300:]


def test_accuracy_on_satimage_subset(small):
    # 600 training rows of satimage and the test file's first 300 rows (easier than the
    # whole test file, where the same fits score 0.77-0.80): the posterior over trees
    # scores 0.93 (prior proposal) and 0.99 (optimal) with seed 1; 0.85 leaves room for
    # other seeds and builds.
    X, y, Xt, yt = small
    for proposal in ("prior", "optimal"):
        clf = SMCTreeClassifier(n_particles=100, proposal=proposal, random_state=1).fit(X, y)
        assert clf.score(Xt, yt) > 0.85, proposal
        assert list(clf.classes_) == [0, 1, 2, 3, 4, 5] and clf.n_features_in_ == 36
        lp = clf.log_predictive(Xt, yt)
        # The mean test log-likelihood beats the uniform ln(1/6) = -1.79 by far.
        assert lp.shape == (300,) and -0.5 < lp.mean() < 0
        assert np.isfinite(clf.log_evidence_) and clf.log_evidence_ < 0


def test_posterior_predictive_is_consistent(small):
    X, y, Xt, yt = small
    clf = SMCTreeClassifier(n_particles=30, n_islands=2, random_state=4).fit(X, y)
    proba = clf.predict_proba(Xt)
    assert proba.shape == (300, 6) and (proba > 0).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(clf.predict(Xt), clf.classes_[proba.argmax(axis=1)])
    np.testing.assert_allclose(clf.log_predictive(Xt, yt), np.log(proba[np.arange(300), yt]))
    np.testing.assert_allclose(clf.predict_log_proba(Xt), np.log(proba))
    s = clf.summary()
    assert 1 <= s["n_trees"] <= 30 and 1 <= s["effective_trees"] <= s["n_trees"] + 1e-9
    assert s["mean_leaves"] >= 1 and s["log_evidence"] == clf.log_evidence_
    with pytest.raises(ValueError, match="not among classes_"):
        clf.log_predictive(Xt[:2], [0, 9])


def test_labels_of_any_type():
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(120, 2))
    y = np.where(X[:, 0] > 0.5, "high", "low")
    clf = SMCTreeClassifier(n_particles=20, random_state=0).fit(X, y)
    assert list(clf.classes_) == ["high", "low"]
    assert clf.score(X, y) > 0.95
    assert clf.log_predictive(X, y).mean() > np.log(0.5)


def test_regression_with_std(wave):
    X, y, Xt, yt = wave
    reg = SMCTreeRegressor(n_particles=100, proposal="optimal", random_state=0).fit(X, y)
    mean, std = reg.predict(Xt, return_std=True)
    np.testing.assert_array_equal(mean, reg.predict(Xt))
    # y = sin(4 x0) + x2 + noise (s.d. 0.05) has s.d. about 0.55: R² about 0.93, RMSE 0.15.
    assert reg.score(Xt, yt) > 0.85
    assert np.sqrt(np.mean((mean - yt) ** 2)) < 0.2
    # The predictive s.d. covers the error: about 95% of the rows within 2 s.d.
    assert (std > 0).all() and np.mean(np.abs(mean - yt) < 2 * std) > 0.85
    lp = reg.log_predictive(Xt, yt)
    assert lp.shape == (100,) and lp.mean() > 0  # a density of s.d. ~0.2 peaks near 2
    assert np.isfinite(reg.log_evidence_)


def test_same_seed_same_model_any_thread_count(small, wave):
    X, y, Xt, _ = small
    probas = [
        SMCTreeClassifier(n_particles=24, n_islands=3, random_state=5, n_jobs=n)
        .fit(X, y)
        .predict_proba(Xt)
        for n in (None, 2, -1)
    ]
    np.testing.assert_array_equal(probas[0], probas[1])
    np.testing.assert_array_equal(probas[0], probas[2])
    other = SMCTreeClassifier(n_particles=24, n_islands=3, random_state=6).fit(X, y)
    assert not np.array_equal(other.predict_proba(Xt), probas[0])
    X, y, Xt, _ = wave
    a = SMCTreeRegressor(n_particles=20, random_state=2).fit(X, y).predict(Xt, return_std=True)
    b = SMCTreeRegressor(n_particles=20, random_state=2, n_jobs=2).fit(X, y).predict(Xt, return_std=True)
    np.testing.assert_array_equal(a, b)


def test_pickle_and_files_round_trip(small, wave, tmp_path):
    X, y, Xt, yt = small
    clf = SMCTreeClassifier(n_particles=30, n_islands=2, proposal="optimal", random_state=0).fit(X, y)
    back = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(back.predict_proba(Xt), clf.predict_proba(Xt))
    np.testing.assert_array_equal(back.log_predictive(Xt, yt), clf.log_predictive(Xt, yt))
    assert back.log_evidence_ == clf.log_evidence_
    assert back.summary() == clf.summary()
    Xr, yr, Xrt, _ = wave
    reg = SMCTreeRegressor(n_particles=30, random_state=0).fit(Xr, yr)
    again = pickle.loads(pickle.dumps(reg))
    for a, b in zip(again.predict(Xrt, return_std=True), reg.predict(Xrt, return_std=True)):
        np.testing.assert_array_equal(a, b)
    # The library's file format: to_bytes / from_bytes and files, kinds checked.
    core = clf._core
    data = core.to_bytes()
    assert type(core).from_bytes(data).to_bytes() == data
    path = tmp_path / "smc.model"
    clf.save(path)
    loaded = type(core).load(str(path))
    np.testing.assert_array_equal(loaded.predict_proba(np.ascontiguousarray(Xt)), clf.predict_proba(Xt))
    with pytest.raises(ValueError, match="expected"):
        type(reg._core).from_bytes(data)
    # Corrupt bytes are a ValueError, never a crash.
    for at in (10, len(data) // 3, len(data) // 2, len(data) - 1):
        bad = bytearray(data)
        bad[at] ^= 0x55
        with pytest.raises(ValueError):
            type(core).from_bytes(bytes(bad))
    with pytest.raises(ValueError):
        type(core).from_bytes(data[:-10])
    # An unfitted estimator pickles too.
    fresh = pickle.loads(pickle.dumps(SMCTreeRegressor(n_particles=7)))
    assert fresh.n_particles == 7


@pytest.mark.parametrize(
    "make",
    [
        lambda: SMCTreeClassifier(n_particles=0),
        lambda: SMCTreeClassifier(n_particles=1.5),
        lambda: SMCTreeClassifier(n_particles=-3),
        lambda: SMCTreeClassifier(n_islands=0),
        lambda: SMCTreeClassifier(n_particles=4, n_islands=5),
        lambda: SMCTreeClassifier(proposal="magic"),
        lambda: SMCTreeClassifier(expansion="depth_first"),
        lambda: SMCTreeClassifier(alpha_split=1.0),
        lambda: SMCTreeClassifier(alpha_split=0.0),
        lambda: SMCTreeClassifier(beta_split=-1.0),
        lambda: SMCTreeClassifier(beta_split=float("nan")),
        lambda: SMCTreeClassifier(alpha=0.0),
        lambda: SMCTreeClassifier(alpha="5"),
        lambda: SMCTreeClassifier(ess_threshold=1.5),
        lambda: SMCTreeClassifier(resampler="stratified"),
        lambda: SMCTreeClassifier(island_weighting="mean"),
        lambda: SMCTreeClassifier(min_samples_split=-1),
        lambda: SMCTreeClassifier(min_samples_split=2.5),
        lambda: SMCTreeClassifier(n_jobs=0),
        lambda: SMCTreeClassifier(random_state=-1),
        lambda: SMCTreeRegressor(n_particles=0),
        lambda: SMCTreeRegressor(proposal=None),
        lambda: SMCTreeRegressor(alpha_split=2.0),
        lambda: SMCTreeRegressor(ess_threshold=-0.1),
    ],
)
def test_bad_parameters_are_value_errors(make, wave):
    X, y, _, _ = wave
    est = make()
    if isinstance(est, SMCTreeClassifier):
        y = (y > y.mean()).astype(int)
    with pytest.raises(ValueError):
        est.fit(X, y)


def test_bad_data_is_refused(wave):
    X, y, Xt, _ = wave
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError):
        SMCTreeRegressor(n_particles=5).fit(bad, y)
    yb = y.copy()
    yb[0] = np.inf
    with pytest.raises(ValueError):
        SMCTreeRegressor(n_particles=5).fit(X, yb)
    with pytest.raises(ValueError):
        SMCTreeClassifier(n_particles=5).fit(X, y)  # continuous labels
    reg = SMCTreeRegressor(n_particles=5, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        reg.predict(Xt[:, :2])


def test_gil_is_released_during_fit_and_predict(satimage, runs_without_gil):
    X, y, Xt, _ = satimage
    # 1000 particles: the fit must take well over the check's 50 ms (about 0.6 s here;
    # 100 particles took 75 ms once splits became one pass, and the check flaked).
    clf = SMCTreeClassifier(n_particles=1000, random_state=0)
    assert runs_without_gil(lambda: clf.fit(X, y))
    big = np.ascontiguousarray(np.tile(Xt, (10, 1)))
    assert runs_without_gil(lambda: clf.predict_proba(big))
