"""Mondrian Pólya forests: density estimation and anomaly scores, batch or streaming, with
exact deletion and sliding windows (spec ``mondrian-polya-forest.md``)."""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.base import BaseEstimator, OutlierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import _FLOATS, _ForestCommon
from ._core import PolyaCore

#: What :meth:`MondrianPolyaForest.score_one` gives a point outside the domain (mass 0):
#: a finite number above the score of any point inside, whose mass, a product of at most
#: ``2·max_depth`` Pólya shares, never comes near 1e-1000.
OUT_OF_DOMAIN_SCORE = 1000.0


class MondrianPolyaForest(_ForestCommon, OutlierMixin, BaseEstimator):
    """Mondrian Pólya forest: a Pólya tree on each tree of a Mondrian forest, for density
    estimation and anomaly detection.

    A tree's *mass* at ``x`` is the posterior predictive probability, under its finite
    Pólya tree, that the next observation falls in the same cell as ``x``; the forest
    averages it over random partitions. ``score_samples`` is ``log10`` of that mean mass
    (lower is more anomalous), ``log_density`` the log of the forest's density. A threshold
    ε on the mass reads "x lies in a region given at most ε predictive probability";
    roughly, fewer than ε·n of n similar observations would be expected there. It is a
    predictive probability, not a p-value: there is no null distribution behind it.

    Parameters
    ----------
    n_estimators : int, default=100
        Trees.
    variant : {"streaming", "batch"}, default="streaming"
        ``"streaming"`` (sMPF): the trees are Mondrian trees of the data, so they take
        insertions (``partial_fit``, ``learn_one``) and exact deletions (``forget``,
        ``window``) anywhere. ``"batch"`` (bMPF): each tree is a Mondrian process
        partition of the first batch's box, which does not depend on the points; later
        points outside that box lie in no cell (mass 0).
    max_depth : int or None, default=10
        No node deeper (the paper's setting); None for no cap.
    lifetime : float, default=inf
        Lifetime λ of the Mondrian process. A batch forest needs it or ``max_depth``
        finite.
    gamma : float, default=1.0
        Prior strength of the Pólya trees: larger spreads mass more evenly by volume.
    contamination : "auto" or float in (0, 0.5], default="auto"
        Where ``predict`` draws the line. ``"auto"``: a row is an outlier when its mean
        mass is below ``1 / n`` (n the training rows): fewer than one of n similar
        observations would be expected in its cell. A float: that share of the training
        rows is flagged.
    feature_ranges : None, "first_batch", "identity" or (min, max) pairs, default=None
        How features map into the trees' space. None: the paper's rule, min–max scaling
        from the first batch with 50 features or more, raw features otherwise. The cut
        dimensions are drawn in proportion to side lengths, so the scaling changes the
        model.
    window : int or None, default=None
        Keep only the last ``window`` points (the older ones are deleted exactly).
    n_jobs : int or None, default=None
        Worker threads (-1: every core). Never changes the model.
    random_state : int, RandomState or None, default=None
        Seed of the trees.
    max_memory : int, str or None, default=None
        Refuse training that would need more memory than this (bytes or e.g. "4G"):
        ``MemoryError`` before anything is allocated.

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian_ml import MondrianPolyaForest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2))
    >>> mpf = MondrianPolyaForest(n_estimators=20, random_state=0).fit(X)
    >>> s = mpf.score_samples(np.array([[0.0, 0.0], [2.5, 2.5]]))
    >>> bool(s[0] > s[1])
    True
    """

    def __init__(
        self,
        n_estimators=100,
        *,
        variant="streaming",
        max_depth=10,
        lifetime=math.inf,
        gamma=1.0,
        contamination="auto",
        feature_ranges=None,
        window=None,
        n_jobs=None,
        random_state=None,
        max_memory=None,
    ):
        self.n_estimators = n_estimators
        self.variant = variant
        self.max_depth = max_depth
        self.lifetime = lifetime
        self.gamma = gamma
        self.contamination = contamination
        self.feature_ranges = feature_ranges
        self.window = window
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.max_memory = max_memory

    def _scaling(self):
        if self.feature_ranges == "first_batch":
            return "first_batch"
        return super()._scaling()

    def _new_core(self):
        self._check_types(
            counts=("n_estimators", "window"), reals=("lifetime", "gamma"), strings=("variant",)
        )
        depth = self.max_depth
        if depth is not None and (not isinstance(depth, numbers.Integral) or depth < 0):
            raise ValueError(f"max_depth must be a non-negative integer or None, got {depth!r}")
        return PolyaCore(
            n_trees=int(self.n_estimators),
            variant=self.variant,
            max_depth=None if depth is None else int(depth),
            lifetime=float(self.lifetime),
            gamma=float(self.gamma),
            seed=self._seed(),
            n_threads=self._n_threads(),
            scaling=self._scaling(),
            window=self._window(),
            max_memory=self.max_memory,
        )

    def _check_contamination(self):
        c = self.contamination
        if isinstance(c, str):
            if c != "auto":
                raise ValueError(f"contamination must be 'auto' or a float, got {c!r}")
            return None
        if not isinstance(c, numbers.Real) or isinstance(c, bool) or not 0.0 < c <= 0.5:
            raise ValueError(f"contamination must be 'auto' or a float in (0, 0.5], got {c!r}")
        return float(c)

    def _set_offset(self, X):
        c = self._check_contamination()
        if c is None:
            self.offset_ = -math.log10(max(self._core.n_points, 1))
        else:
            self.offset_ = float(np.percentile(self.score_samples(X), 100.0 * c))

    def fit(self, X, y=None):
        """Trains a new forest on ``X`` (n_samples, n_features); ``y`` is ignored."""
        X = validate_data(self, X, dtype=_FLOATS, order="C")
        self._check_contamination()
        core = self._new_core()
        core.fit(X)
        self._core = core
        self._river_names = self._fitted_names()
        self._set_offset(X)
        return self

    def partial_fit(self, X, y=None):
        """Adds rows in order (exact: the forest is distributed as one fitted on every
        point it holds); with ``window`` the oldest leave first. The first call fixes the
        number of features, the scaling and, for ``variant="batch"``, the domain."""
        first = not self.__sklearn_is_fitted__()
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=first)
        if first:
            self._check_contamination()
            core = self._new_core()
            core.partial_fit(X)
            self._core = core
            self._river_names = self._fitted_names()
        else:
            self._core_for_use().partial_fit(X)
        if self._check_contamination() is None:
            self.offset_ = -math.log10(max(self._core.n_points, 1))
        elif first:
            self._set_offset(X)
        return self

    def _evaluate(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        return self._core_for_use().evaluate(X)

    def score_samples(self, X):
        """``log10`` of the mean leaf mass per row: higher is more normal; ``-inf`` for a
        row outside the domain (where no point was ever seen)."""
        mass, _, _ = self._evaluate(X)
        with np.errstate(divide="ignore"):
            return np.log10(mass)

    def decision_function(self, X):
        """``score_samples(X) - offset_``: negative for outliers."""
        return self.score_samples(X) - self.offset_

    def predict(self, X):
        """+1 for inliers, -1 for outliers (see ``contamination``)."""
        return np.where(self.decision_function(X) >= 0, 1, -1)

    def log_density(self, X):
        """ln of the forest density per row, in the features' units (over the features
        the training data vary in); ``-inf`` outside the domain."""
        _, log_density, _ = self._evaluate(X)
        return log_density

    def out_of_domain(self, X):
        """Whether each row lies outside every tree's domain."""
        _, _, outside = self._evaluate(X)
        return outside

    def mass_per_tree(self, X):
        """Each tree's leaf mass per row, shape (n_samples, n_estimators)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        return self._core_for_use().mass_per_tree(X)

    def is_anomaly(self, X, epsilon, phi=0.5):
        """Whether each row is an (ε, φ)-anomaly: its leaf mass is at most ``epsilon`` in
        at least a share ``phi`` of the trees (φ in (0, 1])."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        return self._core_for_use().is_anomaly(X, float(epsilon), float(phi))

    def order_stat_score(self, X, phi=0.5):
        """The ⌈φ·M⌉-th smallest tree mass per row: a row is an (ε, φ)-anomaly iff this is
        at most ε."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        return self._core_for_use().order_stat_score(X, float(phi))

    def score_stream(self, X, prequential=False):
        """Streams the rows one at a time, each scored right after it is inserted (with
        ``window``, once the oldest point has left); ``prequential=True`` scores each row
        before inserting it. Returns ``score_samples``-like values (log10 of the mean
        mass). Trains the model: the same as ``partial_fit`` on each row in turn."""
        first = not self.__sklearn_is_fitted__()
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=first)
        if first:
            self._check_contamination()
            self._core = self._new_core()
            self._river_names = self._fitted_names()
        mass, _, _ = self._core_for_use().score_stream(X, bool(prequential))
        if self._check_contamination() is None or first:
            self.offset_ = -math.log10(max(self._core.n_points, 1))
        with np.errstate(divide="ignore"):
            return np.log10(mass)

    def explain(self, x):
        """Why one row scores as it does (an extension of the paper): a dict with the
        forest's ``mass`` and ``log_density``, ``attribution`` (per feature, the share of
        mass the paths lost to it), ``out_of_box`` (per feature, how far outside the boxes
        of the data the row lies where its leaf is a region without data), and ``trees``:
        each tree's leaf ``kind``, region ``encoding`` and path ``steps`` (cuts with
        thresholds in the features' units, restrictions), with its ``critical_step``."""
        check_is_fitted(self)
        row = np.asarray(x, dtype=np.float64).reshape(-1)
        if row.size != self.n_features_in_:
            raise ValueError(
                f"x has {row.size} features, but the forest was trained with "
                f"{self.n_features_in_}"
            )
        out = self._core.explain(row.tolist())
        names = self._fitted_names()
        if names is not None:
            out["feature_names"] = names
        return out

    # ------------------------------------------------------------------ river

    def learn_one(self, x):
        """Learns one example, a dict of feature name -> number (river)."""
        if not self.__sklearn_is_fitted__():
            names = list(x)
            if not names:
                raise ValueError("x has no features")
            self._river_names = names
            row = self._row_of(x)
            self._check_contamination()
            core = self._new_core()
            core.partial_fit_one(row)
            self._core = core
            self.n_features_in_ = len(names)
            if all(isinstance(n, str) for n in names):
                self.feature_names_in_ = np.asarray(names, dtype=object)
            self.offset_ = 0.0
            return
        self._core.partial_fit_one(self._row_of(x))
        self.offset_ = -math.log10(max(self._core.n_points, 1))

    def score_one(self, x):
        """Anomaly score of one example (river: higher is more anomalous): ``-log10`` of
        the mean leaf mass; ``OUT_OF_DOMAIN_SCORE`` (1000, finite so that metrics can
        rank it) outside the domain, where no point was seen; 0.0 before any training."""
        if not self.__sklearn_is_fitted__():
            return 0.0
        mass, _ = self._core.evaluate_one(self._row_of(x))
        return OUT_OF_DOMAIN_SCORE if mass <= 0.0 else -math.log10(mass)

    @property
    def _raw_memory_usage(self):
        return 0

    @classmethod
    def _from_core(cls, core, names=None):
        est = super()._from_core(core, names)
        est.offset_ = -math.log10(max(core.n_points, 1))
        return est


def _register_with_river():
    try:
        from river import base
    except ImportError:  # river is optional
        return
    base.AnomalyDetector.register(MondrianPolyaForest)


_register_with_river()
