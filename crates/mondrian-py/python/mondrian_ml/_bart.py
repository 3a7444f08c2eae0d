"""BART, Bayesian additive regression trees (spec ``bayesian-trees.md`` §4): a sum of M
trees under the Chipman–George–McCulloch prior, sampled by Bayesian backfitting MCMC
with a particle Gibbs, CGM or grow/prune tree kernel. The kept draws of the chain are the
posterior sample every prediction averages over."""

from __future__ import annotations

import numbers
import os

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import _FLOATS, _BayesCommon
from ._core import BartClassifierCore, BartRegressorCore

_PARAMS_DOC = """
    n_trees : int, default=200
        M, the trees in the sum.
    sampler : {"pg", "cgm", "growprune"}, default="pg"
        The kernel that moves one tree given its residual: one conditional-SMC sweep
        with the current tree as reference particle (particle Gibbs, Lakshminarayanan,
        Roy & Teh 2015), one Chipman–George–McCulloch grow / prune / change / swap
        Metropolis–Hastings move, or one grow / prune move.
    n_particles : int, default=10
        C, the particles of a particle Gibbs sweep (reference included); only used by
        ``sampler="pg"``.
    n_iter : int, default=2000
        Iterations of the Gibbs sampler (each visits every tree once).
    burn_in : int, default=1000
        Leading iterations left out of the posterior draws and the ESS; less than
        ``n_iter``. The model keeps ``n_iter - burn_in`` draws.
    alpha_s, beta_s : float, default=0.95, 2.0
        The CGM tree prior: a node at depth d splits with probability
        ``alpha_s * (1 + d) ** -beta_s`` (0 < alpha_s < 1, beta_s ≥ 0).
    k : float, default=2.0
        Shrinks each tree's leaf values: their prior standard deviation is
        ``0.5 / (k * sqrt(n_trees))`` on targets rescaled to [-0.5, 0.5]
        (``3 / (k * sqrt(n_trees))`` on the probit scale)."""

_RUN_DOC = """
    random_state : int, RandomState instance or None, default=None
        Seeds the chain. An int gives the same draws on every fit.
    n_jobs : int or None, default=None
        Threads for prediction (``None`` means 1, ``-1`` every core); the chain itself is
        sequential. The model is the same whatever the number.
"""

_TRACES_DOC = """
    traces_ : dict
        Per-iteration traces, burn-in included: ``log_likelihood`` (training),
        ``sigma2``, ``mean_leaves`` and ``total_leaves``, ``train_mse``, ``move_rate``
        (share of tree updates that moved), ``seconds``, with ``burn_in``, ``ess`` and
        ``ess_per_second``.
    log_likelihood_trace_ : ndarray of shape (n_iter,)
        The training log-likelihood at each iteration.
    mean_leaves_trace_ : ndarray of shape (n_iter,)
        Mean leaves per tree at each iteration.
    ess_ : float
        Effective sample size (CODA's) of the post-burn-in log-likelihood trace.
    ess_per_second_ : float
        ``ess_`` per second of post-burn-in sampling.
    n_draws_ : int
        Kept draws, ``n_iter - burn_in``.
"""


class _BARTCommon(_BayesCommon):
    """Parameters and conventions shared by the BART estimators."""

    def _bart_params(self):
        self._check_types(
            counts=("n_trees", "n_particles", "n_iter", "burn_in"),
            reals=("alpha_s", "beta_s", "k"),
            strings=("sampler",),
        )
        return dict(
            n_trees=int(self.n_trees),
            sampler=self.sampler,
            n_particles=int(self.n_particles),
            n_iter=int(self.n_iter),
            burn_in=int(self.burn_in),
            alpha_s=float(self.alpha_s),
            beta_s=float(self.beta_s),
            k=float(self.k),
            seed=self._seed(),
            n_threads=self._n_threads(),
        )

    @property
    def traces_(self):
        check_is_fitted(self)
        return self._core.traces()

    @property
    def log_likelihood_trace_(self):
        return self.traces_["log_likelihood"]

    @property
    def mean_leaves_trace_(self):
        return self.traces_["mean_leaves"]

    @property
    def ess_(self):
        return self.traces_["ess"]

    @property
    def ess_per_second_(self):
        return self.traces_["ess_per_second"]

    @property
    def n_draws_(self):
        check_is_fitted(self)
        return self._core.n_draws

    def save(self, path):
        """Saves the fitted model in the library's file format (the Rust
        ``BartRegressor::save`` / ``BartClassifier::save``), which :func:`mondrian_ml.load`
        reads back. Class labels are not part of that format (``load`` gives classes 0
        and 1); use pickle to keep the whole estimator."""
        check_is_fitted(self)
        self._core.save(os.fspath(path))


class BARTRegressor(_BARTCommon, RegressorMixin, BaseEstimator):
    __doc__ = (
        """Bayesian additive regression trees (Chipman, George & McCulloch, 2010).

    y = f(x) + e with f(x) = Σ_m g(x; T_m, μ_m) a sum of small trees and e ~ N(0, σ²).
    The trees, their leaf values and σ² are sampled by Bayesian backfitting; targets are
    rescaled to [-0.5, 0.5] inside, where the priors are calibrated (σ² ~ IG(ν/2, νλ/2)
    with P(σ ≤ σ̂) = q for σ̂ the sample standard deviation of y), and everything returned
    is on the scale of y. ``predict`` is the posterior mean of f(x). Fitting and
    prediction run in the Rust library with the GIL released.

    Parameters
    ----------"""
        + _PARAMS_DOC
        + """
    nu : float, default=3.0
        ν, the degrees of freedom of the σ² prior.
    q : float, default=0.9
        P(σ ≤ σ̂) under the σ² prior, in (0, 1)."""
        + _RUN_DOC
        + """
    Attributes
    ----------
    n_features_in_ : int
    sigma_draws_ : ndarray of shape (n_draws,)
        σ of each kept draw, on the scale of y."""
        + _TRACES_DOC
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from mondrian_ml import BARTRegressor
    >>> X = np.linspace(0, 1, 100)[:, None]; y = (X[:, 0] > 0.5) * 2.0
    >>> reg = BARTRegressor(n_trees=20, n_iter=200, burn_in=100, random_state=0).fit(X, y)
    >>> lower, upper = reg.predict_interval([[0.25], [0.75]], coverage=0.9)
    >>> bool(lower[0] < 0 < upper[0] and lower[1] < 2 < upper[1])
    True
    """
    )

    def __init__(
        self,
        n_trees=200,
        sampler="pg",
        n_particles=10,
        n_iter=2000,
        burn_in=1000,
        alpha_s=0.95,
        beta_s=2.0,
        k=2.0,
        nu=3.0,
        q=0.9,
        random_state=None,
        n_jobs=None,
    ):
        self._keep(locals())

    def fit(self, X, y):
        """Runs the chain on ``X`` (n_samples, n_features) and real targets ``y``,
        replacing any previous fit. The targets must not all be equal."""
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C", y_numeric=True)
        if X.shape[0] < 2:
            raise ValueError(
                f"BARTRegressor needs at least 2 samples, got n_samples = {X.shape[0]}"
            )
        self._check_types(reals=("nu", "q"))
        core = BartRegressorCore(nu=float(self.nu), q=float(self.q), **self._bart_params())
        core.fit(X, np.ascontiguousarray(y, dtype=np.float64))
        self._core = core
        return self

    def predict(self, X, return_std=False):
        """Posterior means of f(x); with ``return_std`` also the standard deviation of
        the posterior predictive distribution of a new y at x, which includes the noise:
        Var = mean_s(σ_s² + f_s(x)²) − mean_s(f_s(x))² over the kept draws s. For the
        uncertainty of f(x) alone use ``posterior_draws(X).std(axis=0)``."""
        X = self._rows(X)
        if return_std:
            return self._core.predict_mean_std(X)
        return self._core.predict(X)

    def predict_interval(self, X, coverage=0.9):
        """The central posterior predictive interval of probability ``coverage`` for a
        new y at each row (noise included): the (1 ∓ coverage)/2 quantiles of the mixture
        of N(f_s(x), σ_s²) over the kept draws. Returns ``(lower, upper)``, two arrays of
        shape (n_samples,)."""
        X = self._rows(X)
        if not isinstance(coverage, numbers.Real) or isinstance(coverage, bool):
            raise ValueError(f"coverage must be a real number in (0, 1), got {coverage!r}")
        return self._core.predict_interval(X, float(coverage))

    def posterior_draws(self, X):
        """f_s(x) for every kept draw s and row: shape (n_draws, n_samples), on the scale
        of y (no noise added)."""
        X = self._rows(X)
        return self._core.posterior_draws(X)

    @property
    def sigma_draws_(self):
        check_is_fitted(self)
        return self._core.sigma_draws()

    @property
    def sigma2_trace_(self):
        """σ² at each iteration, on the scale of y."""
        return self.traces_["sigma2"]


class BARTClassifier(_BARTCommon, ClassifierMixin, BaseEstimator):
    __doc__ = (
        """Probit BART for two classes (Chipman, George & McCulloch, 2010 §4).

    P(y = classes_[1] | x) = Φ(f(x)) with f a sum of trees as in :class:`BARTRegressor`,
    sampled through latent z ~ N(f(x), 1) (Albert & Chib, 1993). ``predict_proba`` is the
    posterior predictive mean_s Φ(f_s(x)) over the kept draws. Any two labels work (ints,
    strings, ...); more than two classes are refused.

    Parameters
    ----------"""
        + _PARAMS_DOC
        + _RUN_DOC
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The sorted labels of ``fit``, in the order of :meth:`predict_proba`'s columns.
    n_features_in_ : int"""
        + _TRACES_DOC
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from mondrian_ml import BARTClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 2)); y = np.where(X[:, 0] > 0.5, "yes", "no")
    >>> clf = BARTClassifier(n_trees=20, n_iter=200, burn_in=100, random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """
    )

    def __init__(
        self,
        n_trees=200,
        sampler="pg",
        n_particles=10,
        n_iter=2000,
        burn_in=1000,
        alpha_s=0.95,
        beta_s=2.0,
        k=2.0,
        random_state=None,
        n_jobs=None,
    ):
        self._keep(locals())

    def fit(self, X, y):
        """Runs the chain on ``X`` and labels ``y`` of exactly two classes, replacing any
        previous fit."""
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C")
        check_classification_targets(y)
        y_type = type_of_target(y, input_name="y")
        if y_type != "binary":
            raise ValueError(
                "Only binary classification is supported. The type of the target is "
                f"{y_type}: BARTClassifier is the probit model of two classes."
            )
        classes, y_index = np.unique(y, return_inverse=True)
        if len(classes) != 2:
            raise ValueError(
                f"BARTClassifier needs two classes, got {len(classes)} class "
                f"({classes[0]!r})"
            )
        core = BartClassifierCore(**self._bart_params())
        core.fit(X, np.ascontiguousarray(y_index, dtype=np.int64))
        self._core = core
        self.classes_ = classes
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def predict_proba(self, X):
        """Posterior predictive class probabilities, shape (n_samples, 2)."""
        X = self._rows(X)
        return self._core.predict_proba(X)

    def predict(self, X):
        """The more probable class of each row (``classes_[0]`` on a tie)."""
        X = self._rows(X)
        return self.classes_[self._core.predict(X)]

    def posterior_draws(self, X):
        """f_s(x) on the probit scale for every kept draw s and row: shape (n_draws,
        n_samples); Φ of it is P(y = classes_[1] | x) under draw s."""
        X = self._rows(X)
        return self._core.posterior_draws(X)

    @property
    def n_classes_(self):
        check_is_fitted(self)
        return len(self.classes_)
