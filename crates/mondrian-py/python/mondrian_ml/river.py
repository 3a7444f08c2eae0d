"""river faces of the Mondrian forests: ``river.base.Classifier``, ``river.base.Regressor`` and
``river.anomaly.base.AnomalyDetector`` subclasses over the same Rust core as the
scikit-learn estimators.

Importing this module imports river (an optional dependency of ``mondrian_ml``)::

    from mondrian_ml.river import MondrianForestClassifier

    model = MondrianForestClassifier(n_estimators=10, seed=0)
    for x, y in stream:
        model.predict_proba_one(x)
        model.learn_one(x, y)

They pass ``river.checks.check_estimator`` and follow river's conventions where they differ
from scikit-learn's: the seed is ``seed``, ``clone``, ``mutate`` and ``_get_params`` are
river's, and a dict may lack features or carry new ones (see below). Each face keeps a
scikit-learn estimator of ``mondrian_ml`` (``forest_``, once trained) and hands it the
rows, so the trees, their law and their speed are the same.

**Features.** The features are those of the first example (or the keys of
``feature_ranges`` when it is a dict), sorted by name, so that the forest does not depend on
the order of a dict's keys. A feature missing from a later example takes the mean of its
values learnt so far (the middle of its range before any); a feature the forest does not
have is ignored. A forest's dimension is fixed once it has trees, so features that appear
later cannot be learnt; give them all in the first example or in ``feature_ranges``.
"""

from __future__ import annotations

import math

from river import base

from ._classifier import MondrianForestClassifier as _SkClassifier
from ._polya import MondrianPolyaForest as _SkPolya
from ._regressor import MondrianForestRegressor as _SkRegressor

__all__ = ["MondrianForestClassifier", "MondrianForestRegressor", "MondrianPolyaForest"]


def _name_key(name):
    # Names of mixed types still sort, by type first.
    return (type(name).__name__, name if isinstance(name, str) else repr(name))


class _DictFeatures:
    """What both faces share: the feature names, the means that fill missing features, the
    scikit-learn estimator underneath and its memory."""

    def _ranges_by_name(self):
        ranges = self.feature_ranges
        if ranges is None or isinstance(ranges, str):
            return None
        if not isinstance(ranges, dict):
            raise ValueError(
                "feature_ranges must be None, 'identity' or a dict of feature name -> "
                f"(min, max), got {ranges!r}"
            )
        return ranges

    def _start(self, x):
        """Fixes the features from the first example (or the ranges), sorted by name."""
        ranges = self._ranges_by_name()
        names = sorted(ranges if ranges is not None else x, key=_name_key)
        if not names:
            raise ValueError("x has no features")
        self._names = names
        self._sums = dict.fromkeys(names, 0.0)
        self._counts = dict.fromkeys(names, 0)
        if ranges is None:
            self._defaults = dict.fromkeys(names, 0.0)
            spec = self.feature_ranges  # None or "identity"
        else:
            spec = [tuple(map(float, ranges[n])) for n in names]
            self._defaults = {n: (lo + hi) / 2 for n, (lo, hi) in zip(names, spec)}
        return spec

    def _full(self, x):
        """``x`` over the forest's features: missing ones filled, unknown ones dropped."""
        row = {}
        for name in self._names:
            if name in x:
                row[name] = x[name]
            elif self._counts[name]:
                row[name] = self._sums[name] / self._counts[name]
            else:
                row[name] = self._defaults[name]
        return row

    def _remember(self, x):
        """Counts the values an example gives, for the means that fill missing ones."""
        for name in self._names:
            if name in x:
                self._sums[name] += float(x[name])
                self._counts[name] += 1

    def _trained(self):
        return getattr(self, "forest_", None) is not None

    @property
    def _raw_memory_usage(self):
        # The trees live in Rust, out of the garbage collector's sight.
        if not self._trained():
            return 0
        return int(self.forest_._raw_memory_usage) + 200 * len(self._names)


class MondrianForestClassifier(_DictFeatures, base.Classifier):
    """Online Mondrian forest classifier (Lakshminarayanan, Roy & Teh, 2014) for river.

    The trees follow a Mondrian process restricted to the data, and learning one example at
    a time gives trees with exactly the distribution of trees fitted in a batch. The same
    model as :class:`mondrian_ml.MondrianForestClassifier`, with river's conventions.

    Parameters
    ----------
    n_estimators
        Number of trees.
    lifetime
        Lifetime of the Mondrian process (``math.inf``: grow until blocks are pure).
    discount_factor
        The label-smoothing discount is ``discount_factor`` × the number of features.
    bagging
        Online bagging: each tree takes each example a Poisson(1) number of times.
    min_samples_split
        Blocks with fewer points wait for more.
    pause_on_pure
        Blocks whose labels are all equal wait for another label.
    branch_counts
        ``"paper"`` or ``"reference"``: the counts of the branch-off node.
    feature_ranges
        ``None`` (features are only shifted by the first example; give ranges for
        streams), ``"identity"`` or a dict ``{name: (min, max)}``, which also names the
        features.
    window
        Keep only the last ``window`` examples (exact deletion of the oldest).
    n_jobs
        Threads (``None``: 1, ``-1``: all cores); the model does not depend on it.
    seed
        Seeds the trees.

    Examples
    --------
    >>> from river import datasets, evaluate, metrics
    >>> from mondrian_ml.river import MondrianForestClassifier
    >>> model = MondrianForestClassifier(n_estimators=10, seed=0)
    >>> score = evaluate.progressive_val_score(
    ...     datasets.Phishing(), model, metrics.Accuracy())
    >>> score.get() > 0.8
    True
    """

    def __init__(
        self,
        n_estimators: int = 100,
        lifetime: float = math.inf,
        discount_factor: float = 10.0,
        bagging: bool = False,
        min_samples_split: int = 2,
        pause_on_pure: bool = True,
        branch_counts: str = "paper",
        feature_ranges: dict | str | None = None,
        window: int | None = None,
        n_jobs: int | None = None,
        seed: int | None = None,
    ):
        self.n_estimators = n_estimators
        self.lifetime = lifetime
        self.discount_factor = discount_factor
        self.bagging = bagging
        self.min_samples_split = min_samples_split
        self.pause_on_pure = pause_on_pure
        self.branch_counts = branch_counts
        self.feature_ranges = feature_ranges
        self.window = window
        self.n_jobs = n_jobs
        self.seed = seed
        self.forest_ = None

    @classmethod
    def _unit_test_params(cls):
        yield {"n_estimators": 10}

    @property
    def _multiclass(self):
        return True

    def learn_one(self, x, y):
        if not self._trained():
            spec = self._start(x)
            forest = _SkClassifier(
                n_estimators=self.n_estimators,
                lifetime=self.lifetime,
                discount_factor=self.discount_factor,
                bagging=self.bagging,
                min_samples_split=self.min_samples_split,
                pause_on_pure=self.pause_on_pure,
                branch_counts=self.branch_counts,
                feature_ranges=spec,
                window=self.window,
                n_jobs=self.n_jobs,
                random_state=self.seed,
            )
            forest.learn_one(self._full(x), y)
            self.forest_ = forest
        else:
            self.forest_.learn_one(self._full(x), y)
        self._remember(x)

    def predict_proba_one(self, x):
        if not self._trained():
            return {}
        return self.forest_.predict_proba_one(self._full(x))

    def predict_one(self, x):
        proba = self.predict_proba_one(x)
        if not proba:
            return None
        return max(proba, key=proba.get)


class MondrianForestRegressor(_DictFeatures, base.Regressor):
    """Mondrian forest regression with predictive uncertainty (Lakshminarayanan, Roy & Teh,
    2016) for river: the model of :class:`mondrian_ml.MondrianForestRegressor`, with river's
    conventions. ``predict_one`` gives the predictive mean; ``predict_std_one`` also the
    standard deviation.

    Parameters
    ----------
    n_estimators
        Number of trees.
    min_samples_split
        Blocks with fewer points are leaves.
    mode
        ``"exact"``, ``"quadrature"`` or ``"fast"`` (O(depth) per example: the stream's
        choice, and the default here).
    bagging
        Online bagging.
    feature_ranges
        As for :class:`MondrianForestClassifier`.
    window
        Keep only the last ``window`` examples.
    n_jobs
        Threads (``None``: 1, ``-1``: all cores).
    seed
        Seeds the trees.

    Examples
    --------
    >>> from river import datasets, evaluate, metrics
    >>> from mondrian_ml.river import MondrianForestRegressor
    >>> model = MondrianForestRegressor(seed=0)
    >>> score = evaluate.progressive_val_score(
    ...     datasets.TrumpApproval(), model, metrics.MAE())
    >>> score.get() < 2.0
    True
    """

    def __init__(
        self,
        n_estimators: int = 10,
        min_samples_split: int = 10,
        mode: str = "fast",
        bagging: bool = False,
        feature_ranges: dict | str | None = None,
        window: int | None = None,
        n_jobs: int | None = None,
        seed: int | None = None,
    ):
        self.n_estimators = n_estimators
        self.min_samples_split = min_samples_split
        self.mode = mode
        self.bagging = bagging
        self.feature_ranges = feature_ranges
        self.window = window
        self.n_jobs = n_jobs
        self.seed = seed
        self.forest_ = None

    def learn_one(self, x, y):
        if not self._trained():
            spec = self._start(x)
            forest = _SkRegressor(
                n_estimators=self.n_estimators,
                min_samples_split=self.min_samples_split,
                mode=self.mode,
                bagging=self.bagging,
                feature_ranges=spec,
                window=self.window,
                n_jobs=self.n_jobs,
                random_state=self.seed,
            )
            forest.learn_one(self._full(x), y)
            self.forest_ = forest
        else:
            self.forest_.learn_one(self._full(x), y)
        self._remember(x)

    def predict_one(self, x):
        if not self._trained():
            return 0.0
        return self.forest_.predict_one(self._full(x))

    def predict_std_one(self, x):
        """Predictive mean and standard deviation of one example (``(0.0, inf)`` before
        any training)."""
        if not self._trained():
            return 0.0, math.inf
        mean, var = self.forest_._core.predict_one(
            self.forest_._row_of(self._full(x))
        )
        return mean, math.sqrt(var)


class MondrianPolyaForest(_DictFeatures, base.AnomalyDetector):
    """Mondrian Pólya forest for river's anomaly detection: the model of
    :class:`mondrian_ml.MondrianPolyaForest` (streaming variant), with river's conventions.
    ``score_one`` is ``-log10`` of the mean leaf mass: higher is more anomalous, 1000
    outside the box of the points seen so far (0.0 before any training). Learning is exact
    insertion; with ``window`` the oldest example is deleted exactly first.

    Parameters
    ----------
    n_estimators
        Number of trees.
    max_depth
        Depth cap (the paper's 10; None for none).
    gamma
        Prior strength of the Pólya trees.
    feature_ranges
        As for :class:`MondrianForestClassifier`: None keeps raw features (the paper's rule
        below 50 features).
    window
        Keep only the last ``window`` examples.
    n_jobs
        Threads (``None``: 1, ``-1``: all cores).
    seed
        Seeds the trees.

    Examples
    --------
    >>> from mondrian_ml.river import MondrianPolyaForest
    >>> model = MondrianPolyaForest(n_estimators=10, window=500, seed=0)
    >>> for i in range(300):
    ...     model.learn_one({"a": (i * 37 % 100) / 100, "b": (i * 11 % 100) / 100})
    >>> model.score_one({"a": 0.5, "b": 0.5}) < model.score_one({"a": 0.5, "b": 3.0})
    True
    """

    def __init__(
        self,
        n_estimators: int = 100,
        max_depth: int | None = 10,
        gamma: float = 1.0,
        feature_ranges: dict | str | None = None,
        window: int | None = None,
        n_jobs: int | None = None,
        seed: int | None = None,
    ):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.gamma = gamma
        self.feature_ranges = feature_ranges
        self.window = window
        self.n_jobs = n_jobs
        self.seed = seed
        self.forest_ = None

    @classmethod
    def _unit_test_params(cls):
        yield {"n_estimators": 5}

    def learn_one(self, x):
        if not self._trained():
            spec = self._start(x)
            forest = _SkPolya(
                n_estimators=self.n_estimators,
                max_depth=self.max_depth,
                gamma=self.gamma,
                feature_ranges=spec,
                window=self.window,
                n_jobs=self.n_jobs,
                random_state=self.seed,
            )
            forest.learn_one(self._full(x))
            self.forest_ = forest
        else:
            self.forest_.learn_one(self._full(x))
        self._remember(x)

    def score_one(self, x):
        if not self._trained():
            return 0.0
        return self.forest_.score_one(self._full(x))
