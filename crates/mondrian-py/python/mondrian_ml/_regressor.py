"""The Mondrian forest regressor: a scikit-learn regressor and a river regressor."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import _FLOATS, _MondrianBase
from ._core import RegressorCore


class MondrianForestRegressor(_MondrianBase, RegressorMixin, BaseEstimator):
    """Mondrian forest regression with calibrated predictive uncertainty
    (Lakshminarayanan, Roy & Teh, 2016).

    Each tree carries a Gaussian hierarchy over its node means (exact belief propagation in
    the thesis' ``mode="exact"``; the default ``"fast"`` mode uses each node's target mean
    and variance). Prediction at any x mixes the prediction at its leaf with those of nodes
    a new split could have inserted above the path ("branch-off"), so the predictive
    variance grows away from the training data and, far from it, returns to the prior
    N(mean(y), var(y)). Trees trained online (``partial_fit``, ``learn_one``) have the
    distribution of trees trained in one batch.

    The defaults were chosen by measurement on eight UCI regression sets (see the
    README's "Regression"): 100 trees, leaves of fewer than 5 points, the fast predictive,
    relevance feature weights whose power is chosen by cross-validation, and intervals
    recalibrated by the same cross-validation (``feature_weights="auto"`` and
    ``calibration="auto"``: a first training call of at least 100 rows learns them, a
    smaller one, e.g. ``learn_one``, keeps uniform weights and the mixture's own
    intervals). The thesis' settings are ``n_estimators=10, min_samples_split=10,
    mode="exact", feature_weights=None, calibration="none"``.

    Parameters
    ----------
    n_estimators : int, default=100
        Number of trees.
    min_samples_split : int, default=5
        Blocks with fewer points are leaves (paused online until they have enough).
    mode : {"exact", "quadrature", "fast"}, default="fast"
        ``"exact"``: belief propagation and the branch-off node's posterior at its expected
        insertion time (the thesis' predictive). ``"quadrature"``: the same averaged over
        that time by 16-point Gauss–Legendre quadrature. ``"fast"``: each node predicts the
        mean and variance of its training targets (plus noise); updates cost O(depth),
        suited to streams, and on the UCI sets it is the better predictive.
    noise : "thesis", "reference" or float, default="thesis"
        The noise variance σ²: the thesis' rule 2s²/(K+2), the authors' code's s²/K, or a
        known value (s² is the target variance, K = min(k_cap, 2N)).
    theta_estimate : {"heuristic", "marginal_likelihood"}, default="heuristic"
        How the hyper-parameters are set: the thesis' closed-form heuristic from the target
        moments, or empirical Bayes (maximising the trees' marginal likelihood of the
        targets over the noise share and the time scale; slower to train, usually a much
        better NLPD in the exact modes).
    k_cap : float, default=2000
        Cap of K in the noise rule.
    gamma2_divisor : float, default=20
        The time scale is γ2 = n_features / (gamma2_divisor · log2 N).
    bagging : bool, default=False
        Online bagging: each tree takes each example a Poisson(1) number of times.
    feature_ranges : None, "identity" or array-like of shape (n_features, 2), default=None
        As for :class:`MondrianForestClassifier`: min–max scaling from the first training
        call, given ranges, or none.
    feature_weights : "auto", None, "relevance", "relevance:P", "relevance:cv" or array-like of shape (n_features,), default="auto"
        Stretch of each (scaled) feature in the trees' space: cuts along feature d become
        ``w_d`` times as likely and its distances ``w_d`` times as large (the Mondrian
        process of the stretched box). ``None``: all 1, as in the papers. ``"relevance"``:
        learnt from the first training call by a pilot forest with weights 1, as the
        squared error its (target-blind) cuts along each feature remove, divided by the
        largest (``"relevance:P"`` raises that to the power P; ``"relevance:cv"`` chooses
        P among 0, 0.25, 0.5, 1 and 2 by 5-fold cross-validation of the held-out NLPD on
        the first training call, with forests of at most 25 trees, see
        ``relevance_choice_``); it helps most when few features matter. ``"auto"``:
        ``"relevance:cv"`` when the first training call has at least 100 rows, else
        ``None``. Or one weight ≥ 0 per feature. ``"relevance"`` and ``"relevance:cv"``
        need a first training call the pilot can split: a first ``learn_one`` (one point)
        is refused; learn the weights on a sample with ``fit`` and pass
        ``feature_weights_`` instead.
    calibration : {"auto", "none", "cv"}, default="auto"
        ``"cv"``: the first training call (at least 10 rows) recalibrates the mixture
        intervals of ``predict_interval`` by 5-fold cross-validation (quantile
        recalibration: each row's predictive CDF value, its PIT, under a forest fitted
        without it; with ``"relevance:cv"`` weights the cross-validation's own forests
        give them, otherwise about ``5 · 25 / n_estimators`` fits' extra work). The
        forest's own predictive tends to be too wide, its 90 % intervals covering 95–99 %
        on real data; the recalibrated interval runs between the mixture's quantiles at the
        PITs' order statistics instead. Mean, std and density are unchanged. A first
        ``learn_one`` (one point) is refused with ``"cv"``; on a stream, ``calibrate`` on
        held-out rows instead. ``"auto"``: ``"cv"`` when the first training call has at
        least 100 rows, else ``"none"``.
    window : int, default=None
        Keep only the last ``window`` training points (a sliding window, with exact
        deletion of the oldest), as for :class:`MondrianForestClassifier`; θ follows the
        points held. ``None`` keeps every point.
    warm_start : bool, default=False
        When the model is fitted, ``fit`` grows the trees a larger ``n_estimators`` adds,
        on the points the model holds (the X and y given are only checked against the
        model), as for :class:`MondrianForestClassifier`; θ is derived again, a
        calibration is kept.
    verbose : int, default=0
        Above 0, ``fit`` shows its progress in trees (tqdm when installed, else a line on
        stderr per group of trees).
    n_jobs : int, default=None
        Threads (None: 1, -1: all cores); the model does not depend on it.
    random_state : int, RandomState instance or None, default=None
        Seeds the trees.
    max_memory : int, str or None, default=None
        Memory budget for training, in bytes or as a size such as ``"500M"``, ``"4G"`` or
        ``"4GiB"``. A fit whose forest is estimated to need more raises ``MemoryError``
        before anything grows (the model is left as it was). ``None`` uses what the
        machine has left.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
    theta_ : dict
        The hyper-parameters in use: ``mu_h``, ``gamma1``, ``gamma2``, ``noise_var``.
    feature_weights_ : ndarray of shape (n_features_in_,)
        The feature weights in use (learnt ones with ``feature_weights="relevance"``).
    calibration_ : ndarray or None
        The sorted PITs recalibrating the intervals (``calibration="cv"`` or
        ``calibrate``), else None.
    n_samples_seen_, n_points_, point_ids_
        Rows given since the last ``fit``, points held, and their ids (for :meth:`forget`),
        as for :class:`MondrianForestClassifier`.

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian_ml import MondrianForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((300, 1))
    >>> y = np.sin(6 * X[:, 0]) + 0.1 * rng.standard_normal(300)
    >>> reg = MondrianForestRegressor(random_state=0).fit(X, y)
    >>> mean, std = reg.predict([[0.5], [3.0]], return_std=True)
    >>> bool(std[1] > std[0])
    True
    """

    def __init__(
        self,
        n_estimators=100,
        *,
        min_samples_split=5,
        mode="fast",
        noise="thesis",
        theta_estimate="heuristic",
        k_cap=2000.0,
        gamma2_divisor=20.0,
        bagging=False,
        feature_ranges=None,
        feature_weights="auto",
        calibration="auto",
        window=None,
        warm_start=False,
        verbose=0,
        n_jobs=None,
        random_state=None,
        max_memory=None,
    ):
        self.n_estimators = n_estimators
        self.min_samples_split = min_samples_split
        self.mode = mode
        self.noise = noise
        self.theta_estimate = theta_estimate
        self.k_cap = k_cap
        self.gamma2_divisor = gamma2_divisor
        self.bagging = bagging
        self.feature_ranges = feature_ranges
        self.feature_weights = feature_weights
        self.calibration = calibration
        self.window = window
        self.warm_start = warm_start
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.max_memory = max_memory

    def _new_core(self):
        self._check_types(
            counts=("n_estimators", "min_samples_split", "window"),
            reals=("k_cap", "gamma2_divisor"),
            flags=("bagging", "warm_start"),
            strings=("mode", "theta_estimate", "calibration"),
        )
        noise = self.noise
        if isinstance(noise, numbers.Real) and not isinstance(noise, bool):
            noise = float(noise)
        elif not isinstance(noise, str):
            raise ValueError(f"noise must be a string or a real number, got {noise!r}")
        return RegressorCore(
            n_trees=int(self.n_estimators),
            min_samples_split=int(self.min_samples_split),
            mode=self.mode,
            seed=self._seed(),
            n_threads=self._n_threads(),
            bagging=bool(self.bagging),
            scaling=self._scaling(),
            k_cap=float(self.k_cap),
            gamma2_divisor=float(self.gamma2_divisor),
            noise=noise,
            theta_estimate=self.theta_estimate,
            feature_weights=self._feature_weights(),
            calibration=self.calibration,
            window=self._window(),
            max_memory=self.max_memory,
        )

    @property
    def theta_(self):
        check_is_fitted(self)
        return self._core.theta()

    @property
    def calibration_(self):
        check_is_fitted(self)
        pits = self._core.calibration()
        return None if pits is None else np.asarray(pits)

    def fit(self, X, y, sample_weight=None):
        """Trains a new forest on ``X`` (n_samples, n_features) and real targets ``y``,
        each row with its ``sample_weight`` if given: integer weight k is k copies of the
        row (in the trees and in the target moments behind θ), 0 is no row (but keeps its
        id), a fractional weight is rounded at random per tree, as for
        :class:`MondrianForestClassifier`. Relevance weights and ``calibration="cv"`` use
        the weights too."""
        if self.warm_start and self.__sklearn_is_fitted__():
            return self._warm_start(X)
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C", y_numeric=True)
        sw = self._sample_weight(sample_weight, X)
        core = self._new_core()
        y = np.ascontiguousarray(y, dtype=np.float64)
        self._train(core, lambda: core.fit(X, y, sw), int(self.n_estimators))
        self._core = core
        self._river_names = self._fitted_names()
        return self

    def partial_fit(self, X, y, sample_weight=None):
        """Extends the forest online with a mini-batch, keeping the law of batch training
        on everything seen so far (a batch at least as large as what the forest holds goes
        in as one set, a smaller one row by row). The first call fixes the number of
        features and (unless ``feature_ranges`` is given) the scaling. ``sample_weight``
        as for :meth:`fit`."""
        first = not self.__sklearn_is_fitted__()
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C", y_numeric=True, reset=first)
        y = np.ascontiguousarray(y, dtype=np.float64)
        sw = self._sample_weight(sample_weight, X, streaming=True)
        if first:
            core = self._new_core()
            core.partial_fit(X, y, sw)
            self._core = core
            self._river_names = self._fitted_names()
        else:
            self._core_for_use().partial_fit(X, y, sw)
        return self

    def _moments(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        return self._core_for_use().predict(X)

    def predict(self, X, return_std=False):
        """Predictive mean of each row; with ``return_std=True`` also the predictive
        standard deviation (the convention of GaussianProcessRegressor)."""
        mean, var, _ = self._moments(X)
        if return_std:
            return mean, np.sqrt(var)
        return mean

    def predict_variance_parts(self, X):
        """The predictive variance of each row split by the law of total variance over
        the trees: ``(within, between)``, with ``within + between`` the variance
        ``predict(X, return_std=True)`` reports.

        ``within`` is the mean of the trees' own predictive variances (the labels' spread
        in the blocks around ``x``, smoothed along each tree's path); ``between`` is the
        variance of the trees' predictive means (how much the random partitions disagree
        at ``x``).
        """
        _, var, between = self._moments(X)
        return var - between, between

    def predict_interval(self, X, level=0.9, kind="mixture"):
        """Central predictive interval ``(lower, upper)`` at ``level`` per row.

        ``kind="mixture"``: the ``(1 − level)/2`` and ``(1 + level)/2`` quantiles of the
        forest's full predictive mixture, or with a calibration (``calibration="cv"``,
        ``calibrate``) its quantiles at the PITs' order statistics. ``kind="gaussian"``:
        mean ± z·std, the Gaussian moment match of that mixture (as the thesis' calibration
        table uses).
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        return self._core_for_use().interval(X, level, kind)

    def predict_cdf(self, X, y):
        """The predictive CDF P(Y ≤ y | x) of the forest's full mixture per row (the
        probability integral transform: uniform on (0, 1) for calibrated predictions)."""
        check_is_fitted(self)
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C", y_numeric=True, reset=False)
        return self._core_for_use().cdf(X, np.ascontiguousarray(y, dtype=np.float64))

    def calibrate(self, X, y):
        """Recalibrates ``predict_interval`` from rows the forest was not trained on:
        their PITs under the current forest replace any earlier calibration (quantile
        recalibration, see ``calibration``). Returns self."""
        check_is_fitted(self)
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C", y_numeric=True, reset=False)
        self._core_for_use().calibrate(X, np.ascontiguousarray(y, dtype=np.float64))
        return self

    def log_density(self, X, y):
        """log p(y | x) of the forest's full predictive mixture per row (the negative of
        the NLPD summand)."""
        check_is_fitted(self)
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C", y_numeric=True, reset=False)
        return self._core_for_use().log_density(X, np.ascontiguousarray(y, dtype=np.float64))

    # ------------------------------------------------------------------ river

    def learn_one(self, x, y):
        """Learns one example: ``x`` a dict of feature name → number, ``y`` a number."""
        if not self.__sklearn_is_fitted__():
            names = list(x)
            if not names:
                raise ValueError("x has no features")
            self._river_names = names
            row = self._row_of(x)
            core = self._new_core()
            core.partial_fit_one(row, float(y))
            self._core = core
            self.n_features_in_ = len(names)
            if all(isinstance(n, str) for n in names):
                self.feature_names_in_ = np.asarray(names, dtype=object)
            return
        self._core.partial_fit_one(self._row_of(x), float(y))

    def predict_one(self, x):
        """Predictive mean of one example (0.0 before any training, as river's regressors
        do)."""
        if not self.__sklearn_is_fitted__():
            return 0.0
        return self._core.predict_one(self._row_of(x))[0]


def _register_with_river():
    try:
        from river import base
    except ImportError:  # river is optional
        return
    base.Regressor.register(MondrianForestRegressor)


_register_with_river()
