"""The Mondrian kernel from Python: scikit-learn's checks, pipelines, the Laplace link,
the search along one sweep, online ridge, pickling, errors and the GIL."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from mondrian_ml import (
    MondrianKernelFeatures,
    MondrianKernelRidge,
    MondrianKernelRidgeCV,
    kernel_sweep,
)


@parametrize_with_checks(
    [
        MondrianKernelFeatures(n_trees=8, lifetime=2.0, random_state=0),
        MondrianKernelRidge(n_trees=8, lifetime=2.0, alpha=1e-2, random_state=0),
        MondrianKernelRidgeCV(
            n_trees=8, lifetimes=[0.5, 2.0, 8.0], alpha=1e-2, random_state=0
        ),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture
def wave():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(400, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 2] + 0.05 * rng.normal(size=400)
    return X[:300], y[:300], X[300:], y[300:]


def test_features_are_sparse_with_m_per_row_and_feed_a_pipeline(wave):
    X, y, Xt, yt = wave
    f = MondrianKernelFeatures(n_trees=20, lifetime=3.0, random_state=1).fit(X)
    phi = f.transform(X)
    assert sp.isspmatrix_csr(phi) and phi.shape == (300, f.n_features_out_)
    assert (np.diff(phi.indptr) == 20).all()
    np.testing.assert_allclose(phi.data, 1 / np.sqrt(20))
    gram = (phi @ phi.T).toarray()
    np.testing.assert_allclose(np.diag(gram), 1.0)
    # Rows placed by the exact extension have at most M features.
    assert (np.diff(f.transform(Xt).indptr) <= 20).all()
    pipe = make_pipeline(MondrianKernelFeatures(n_trees=50, lifetime=3.0, random_state=0), Ridge(1e-3))
    assert pipe.fit(X, y).score(Xt, yt) > 0.8


def test_the_kernel_estimates_the_laplace_kernel():
    # k_M(x, x') -> exp(-λ‖x − x′‖₁) (Proposition 1); with M = 3000 the standard error is
    # at most 0.5/√3000 = 0.009, and 5 sigma is 0.046.
    rng = np.random.default_rng(2)
    X = rng.uniform(size=(30, 2))
    lam = 2.0
    phi = MondrianKernelFeatures(n_trees=3000, lifetime=lam, random_state=3).fit_transform(X)
    k = (phi[:10] @ phi[:10].T).toarray()
    exact = np.exp(-lam * np.abs(X[:10, None, :] - X[None, :10, :]).sum(-1))
    assert np.abs(k - exact).max() < 0.046


def test_ridge_predicts_with_std_and_grows_online(wave):
    X, y, Xt, yt = wave
    model = MondrianKernelRidge(n_trees=40, lifetime=3.0, alpha=1e-3, random_state=0).fit(X, y)
    mean, std = model.predict(Xt, return_std=True)
    np.testing.assert_array_equal(mean, model.predict(Xt))
    assert np.sqrt(np.mean((mean - yt) ** 2)) < 0.25
    assert (std >= np.sqrt(model.noise_variance_) - 1e-12).all()
    _, far = model.predict(Xt + 10.0, return_std=True)
    assert far.min() > std.max()
    # Online: batch then rows one at a time is the exact ridge on all rows (same centre).
    online = MondrianKernelRidge(n_trees=10, lifetime=3.0, alpha=1e-3, random_state=4)
    online.partial_fit(X[:100], y[:100])
    for i in range(100, 150):
        online.partial_fit(X[i : i + 1], y[i : i + 1])
    phi = online.features(X[:150]).toarray()
    c = online.intercept_
    a = phi.T @ phi + 1e-3 * np.eye(phi.shape[1])
    w = np.linalg.solve(a, phi.T @ (y[:150] - c))
    np.testing.assert_allclose(online.coef_, w, rtol=1e-7, atol=1e-9)


def test_cv_reads_one_sweep_and_refits_at_its_choice(wave):
    X, y, Xt, yt = wave
    grid = np.geomspace(0.3, 30, 12)
    for criterion in ("validation", "evidence"):
        cv = MondrianKernelRidgeCV(
            lifetimes=grid, criterion=criterion, n_trees=20, alpha=1e-3, random_state=5
        ).fit(X, y)
        assert cv.scores_.shape == (12,)
        assert cv.lifetime_ == grid[np.argmin(cv.scores_)]
        direct = MondrianKernelRidge(
            n_trees=20, lifetime=cv.lifetime_, alpha=1e-3, random_state=5
        ).fit(X, y)
        np.testing.assert_array_equal(cv.predict(Xt), direct.predict(Xt))
        assert cv.score(Xt, yt) > 0.8


def test_cv_patience_stops_the_sweep_after_k_readings_without_improvement(wave):
    X, y, _, _ = wave
    grid = np.geomspace(0.3, 300, 16)
    full = MondrianKernelRidgeCV(lifetimes=grid, n_trees=10, alpha=1e-3, random_state=2).fit(X, y)
    for k in (1, 2):
        cv = MondrianKernelRidgeCV(
            lifetimes=grid, n_trees=10, alpha=1e-3, patience=k, random_state=2
        ).fit(X, y)
        # Where the rule stops, from the full search's scores.
        best, since, read = np.inf, 0, 0
        for s in full.scores_:
            read += 1
            best, since = (s, 0) if s < best else (best, since + 1)
            if since >= k:
                break
        np.testing.assert_array_equal(cv.scores_[:read], full.scores_[:read])
        assert np.isnan(cv.scores_[read:]).all()
        assert cv.lifetime_ == grid[np.nanargmin(cv.scores_)]


def test_kernel_sweep_learners(wave):
    X, y, Xt, yt = wave
    allx = np.vstack([X, Xt])
    grid = [0.5, 2.0, 8.0]
    ridge = kernel_sweep(allx, y, grid, n_trees=10, learner="ridge", alpha=1e-3, random_state=0)
    assert ridge["predictions"].shape == (3, 400)
    assert (np.diff(ridge["n_features"]) > 0).all() and np.isfinite(ridge["log_evidence"]).all()
    sgd = kernel_sweep(allx, y, grid, n_trees=10, learner="sgd", random_state=0)
    forest = kernel_sweep(allx, y, grid, n_trees=10, learner="forest", alpha=1e-3, random_state=0)
    assert np.isnan(sgd["log_evidence"]).all()
    np.testing.assert_array_equal(sgd["n_features"], ridge["n_features"])
    np.testing.assert_array_equal(forest["events"], ridge["events"])
    avg = kernel_sweep(
        allx, y, grid, n_trees=10, alpha=1e-3, random_state=0, average="log_uniform", average_lo=0.1
    )["average"]
    assert avg["predictions"].shape == (400,) and (avg["variances"] > 0).all()
    assert np.isfinite(avg["log_evidence"]) and avg["intervals"] == ridge["events"][-1] + 1
    assert np.sqrt(np.mean((avg["predictions"][300:] - yt) ** 2)) < 0.3
    # Read at the same lifetime, the sweep's ridge is the transductive fit.
    err = np.sqrt(np.mean((ridge["predictions"][-1, 300:] - yt) ** 2))
    assert err < 0.3


def test_pickle_and_files_round_trip(wave, tmp_path):
    X, y, Xt, _ = wave
    for est in (
        MondrianKernelFeatures(n_trees=6, lifetime=2.0, random_state=0).fit(X),
        MondrianKernelRidge(n_trees=6, lifetime=2.0, random_state=0).fit(X, y),
    ):
        back = pickle.loads(pickle.dumps(est))
        f = "transform" if hasattr(est, "transform") else "features"
        a, b = getattr(est, f)(Xt), getattr(back, f)(Xt)
        assert (a != b).nnz == 0
    model = MondrianKernelRidge(n_trees=6, lifetime=2.0, random_state=0).fit(X, y)
    back = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(back.predict(Xt, return_std=True)[1], model.predict(Xt, return_std=True)[1])
    core = model._core
    data = bytearray(core.to_bytes())
    data[len(data) // 2] ^= 0x55
    with pytest.raises(ValueError):
        type(core).from_bytes(bytes(data))


@pytest.mark.parametrize(
    "make",
    [
        lambda: MondrianKernelFeatures(lifetime=0.0),
        lambda: MondrianKernelFeatures(lifetime=-1.0),
        lambda: MondrianKernelFeatures(lifetime=float("nan")),
        lambda: MondrianKernelFeatures(n_trees=0),
        lambda: MondrianKernelRidge(alpha=0.0),
        lambda: MondrianKernelRidgeCV(lifetimes=[]),
        lambda: MondrianKernelRidgeCV(lifetimes=[1.0, -2.0]),
        lambda: MondrianKernelRidgeCV(lifetimes=[1.0], criterion="magic"),
        lambda: MondrianKernelRidgeCV(lifetimes=[1.0], patience=0),
        lambda: MondrianKernelRidgeCV(lifetimes=[1.0], patience=1.5),
    ],
)
def test_bad_parameters_are_clear_errors(make, wave):
    X, y, _, _ = wave
    est = make()
    with pytest.raises(ValueError):
        if isinstance(est, MondrianKernelFeatures):
            est.fit(X)
        else:
            est.fit(X, y)


def test_wrong_width_and_nan_are_refused(wave):
    X, y, Xt, _ = wave
    f = MondrianKernelFeatures(n_trees=5, random_state=0).fit(X)
    with pytest.raises(ValueError, match="features"):
        f.transform(Xt[:, :2])
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError):
        MondrianKernelRidge(n_trees=5).fit(bad, y)


def test_gil_is_released_during_fit(runs_without_gil):
    X = np.random.default_rng(0).uniform(size=(20000, 5))
    y = X.sum(axis=1)
    assert runs_without_gil(lambda: MondrianKernelRidge(n_trees=20, lifetime=2.0).fit(X, y))
