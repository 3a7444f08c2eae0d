"""Bayesian decision trees fitted by top-down sequential Monte Carlo (spec
``bayesian-trees.md`` §3): a weighted set of trees approximating the posterior
p(T | Y, X) under the Chipman–George–McCulloch prior, with conjugate leaves."""

from __future__ import annotations

import os

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import _FLOATS, _BayesCommon, _is_integer
from ._core import SmcClassifierCore, SmcRegressorCore

_PARAMS_DOC = """
    n_particles : int, default=100
        C, the particles in all, shared out among the islands. More particles give a
        better approximation of the posterior (and a better estimate of the evidence).
    n_islands : int, default=1
        I, independent particle systems of C/I particles each (the first C mod I get one
        more); at most ``n_particles``.
    proposal : {"prior", "empirical", "optimal"}, default="prior"
        How a particle proposes the decision at a node: the CGM prior itself (the
        Bayesian bootstrap filter), the prior with the split drawn within a gap between
        the node's data values, or the one-step optimal proposal (every split of the
        node scored; slower per particle, far fewer particles needed).
    expansion : {"breadth_first", "min_marginal", "layer_wise"}, default="breadth_first"
        Which open nodes a stage decides: the oldest (one per stage), the one whose data
        fit worst (lowest marginal likelihood), or every open node at once.
    alpha_split, beta_split : float, default=0.95, 0.5
        The CGM prior: a node at depth d splits with probability
        ``alpha_split * (1 + d) ** -beta_split`` (0 < alpha_split < 1, beta_split ≥ 0).
    min_samples_split : int or None, default=2
        A node of fewer training rows does not split (a rule of the prior). 2, like None,
        adds nothing to the prior: a node of one row cannot split anyway.
    ess_threshold : float, default=0.1
        Resample an island when its effective sample size falls below this fraction of
        its particles (0 never resamples).
    resampler : {"multinomial", "systematic"}, default="multinomial"
    island_weighting : {"equal", "evidence"}, default="equal"
        Each island counts 1/I (an ensemble of I posterior approximations) or by its
        estimate of the evidence (one consistent posterior).
    random_state : int, RandomState instance or None, default=None
        Seeds the sampler. An int gives the same trees on every fit.
    n_jobs : int or None, default=None
        Threads: ``None`` means 1, ``-1`` every core. The fitted model is the same
        whatever the number.
"""


class _SMCCommon(_BayesCommon):
    """Parameters and conventions shared by the SMC estimators."""

    def _smc_params(self):
        self._check_types(
            counts=("n_particles", "n_islands"),
            reals=("alpha_split", "beta_split", "ess_threshold"),
            strings=("proposal", "expansion", "resampler", "island_weighting"),
        )
        mss = self.min_samples_split
        if mss is not None and (not _is_integer(mss) or mss < 0):
            raise ValueError(
                f"min_samples_split must be a non-negative integer or None, got {mss!r}"
            )
        return dict(
            n_particles=int(self.n_particles),
            n_islands=int(self.n_islands),
            proposal=self.proposal,
            expansion=self.expansion,
            alpha_split=float(self.alpha_split),
            beta_split=float(self.beta_split),
            min_samples_split=None if mss is None else int(mss),
            ess_threshold=float(self.ess_threshold),
            resampler=self.resampler,
            island_weighting=self.island_weighting,
            seed=self._seed(),
            n_threads=self._n_threads(),
        )

    @property
    def log_evidence_(self):
        """log Ẑ, the SMC estimate of the evidence log p(y | X) of the training labels
        (nats): an unbiased estimate of p(y | X) itself, so its log is biased low for few
        particles."""
        check_is_fitted(self)
        return self._core.log_evidence

    def summary(self):
        """The posterior's shape: ``n_trees`` (distinct final trees), ``effective_trees``
        (1/Σw²), the posterior means ``mean_leaves`` and ``mean_depth``, ``truncated``
        (whether a run hit the stage limit) and ``log_evidence``."""
        check_is_fitted(self)
        return self._core.summary()

    def save(self, path):
        """Saves the fitted model in the library's file format (the Rust
        ``SmcTreeClassifier::save`` / ``SmcTreeRegressor::save``), which
        :func:`mondrian_ml.load` reads back. Class labels are not part of that format
        (``load`` gives classes 0 to K − 1); use pickle to keep the whole estimator."""
        check_is_fitted(self)
        self._core.save(os.fspath(path))


class SMCTreeClassifier(_SMCCommon, ClassifierMixin, BaseEstimator):
    __doc__ = (
        """Bayesian decision-tree classifier fitted by top-down sequential Monte Carlo
    (Lakshminarayanan, Roy & Teh, 2013).

    Unlike a Mondrian forest, the splits are chosen with the labels: the particles grow
    trees from the root, each decision drawn from a proposal and weighted so that the
    final weighted trees approximate the posterior p(T | y, X) under the CGM tree prior,
    with Dirichlet–multinomial leaves (the leaf probabilities integrated out).
    ``predict_proba`` is the posterior predictive: the weighted average over the trees of
    each tree's leaf predictive ``(c_k + alpha/K) / (n + alpha)``. Fitting and prediction
    run in the Rust library with the GIL released.

    Parameters
    ----------"""
        + _PARAMS_DOC
        + """    alpha : float, default=5.0
        The Dirichlet's total concentration over the K classes (``alpha/K`` each): the
        leaves' smoothing towards uniform probabilities.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The sorted labels of ``fit``, in the order of :meth:`predict_proba`'s columns.
    n_features_in_ : int
    log_evidence_ : float
        log Ẑ, the SMC estimate of log p(y | X).

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian_ml import SMCTreeClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 2)); y = (X[:, 0] > 0.5).astype(int)
    >>> clf = SMCTreeClassifier(n_particles=50, random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.95
    True
    """
    )

    def __init__(
        self,
        n_particles=100,
        n_islands=1,
        proposal="prior",
        expansion="breadth_first",
        alpha_split=0.95,
        beta_split=0.5,
        min_samples_split=2,
        alpha=5.0,
        ess_threshold=0.1,
        resampler="multinomial",
        island_weighting="equal",
        random_state=None,
        n_jobs=None,
    ):
        self._keep(locals())

    def fit(self, X, y):
        """Samples the weighted trees on ``X`` (n_samples, n_features) and labels ``y``,
        replacing any previous fit."""
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C")
        check_classification_targets(y)
        self._check_types(reals=("alpha",))
        classes, y_index = np.unique(y, return_inverse=True)
        core = SmcClassifierCore(
            alpha=float(self.alpha), n_classes=len(classes), **self._smc_params()
        )
        core.fit(X, np.ascontiguousarray(y_index, dtype=np.int64))
        self._core = core
        self.classes_ = classes
        return self

    def predict_proba(self, X):
        """Posterior predictive class probabilities, shape (n_samples, n_classes)."""
        X = self._rows(X)
        return self._core.predict_proba(X)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (the Dirichlet smoothing keeps every
        probability above 0)."""
        return np.log(self.predict_proba(X))

    def predict(self, X):
        """The most probable class of each row."""
        check_is_fitted(self)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def log_predictive(self, X, y):
        """log p(y_i | x_i) of each row under the posterior predictive (nats); its mean is
        the test log-likelihood. Every label must be one of ``classes_``."""
        X = self._rows(X)
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != X.shape[0]:
            raise ValueError(f"y must hold one label per row of X, got shape {y.shape}")
        index = np.searchsorted(self.classes_, y)
        index = np.clip(index, 0, len(self.classes_) - 1)
        unknown = self.classes_[index] != y
        if np.any(unknown):
            raise ValueError(f"labels {np.unique(y[unknown])!r} are not among classes_")
        return self._core.log_predictive(X, index.astype(np.int64))

    @property
    def n_classes_(self):
        check_is_fitted(self)
        return len(self.classes_)


class SMCTreeRegressor(_SMCCommon, RegressorMixin, BaseEstimator):
    __doc__ = (
        """Bayesian regression tree fitted by top-down sequential Monte Carlo.

    The particles grow trees as :class:`SMCTreeClassifier`'s do, with
    Normal–inverse-gamma leaves (each leaf its own mean and noise variance, both
    integrated out) whose hyper-parameters are calibrated from the training targets
    (prior mean their mean, scale from their variance). ``predict`` is the mean of the
    posterior predictive mixture; ``predict(X, return_std=True)`` adds its standard
    deviation, which covers both the noise and the uncertainty about the tree.

    Parameters
    ----------"""
        + _PARAMS_DOC
        + """
    Attributes
    ----------
    n_features_in_ : int
    log_evidence_ : float
        log Ẑ, the SMC estimate of log p(y | X) (a density: it depends on the units of y).

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian_ml import SMCTreeRegressor
    >>> X = np.linspace(0, 1, 200)[:, None]; y = (X[:, 0] > 0.5) * 2.0
    >>> reg = SMCTreeRegressor(n_particles=50, random_state=0).fit(X, y)
    >>> mean, std = reg.predict([[0.25], [0.75]], return_std=True)
    >>> bool(abs(mean[0]) < 0.1 and abs(mean[1] - 2) < 0.1)
    True
    """
    )

    def __init__(
        self,
        n_particles=100,
        n_islands=1,
        proposal="prior",
        expansion="breadth_first",
        alpha_split=0.95,
        beta_split=0.5,
        min_samples_split=2,
        ess_threshold=0.1,
        resampler="multinomial",
        island_weighting="equal",
        random_state=None,
        n_jobs=None,
    ):
        self._keep(locals())

    def fit(self, X, y):
        """Samples the weighted trees on ``X`` and real targets ``y``, replacing any
        previous fit."""
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C", y_numeric=True)
        core = SmcRegressorCore(**self._smc_params())
        core.fit(X, np.ascontiguousarray(y, dtype=np.float64))
        self._core = core
        return self

    def predict(self, X, return_std=False):
        """Posterior predictive means, and with ``return_std`` their standard
        deviations."""
        X = self._rows(X)
        mean, variance = self._core.predict_mean_variance(X)
        if return_std:
            return mean, np.sqrt(variance)
        return mean

    def log_predictive(self, X, y):
        """log p(y_i | x_i) of each row under the posterior predictive mixture (a log
        density, nats); its mean is the test log-likelihood."""
        X = self._rows(X)
        y = np.ascontiguousarray(y, dtype=np.float64)
        if y.ndim != 1:
            raise ValueError(f"y must be one-dimensional, got shape {y.shape}")
        return self._core.log_predictive(X, y)
