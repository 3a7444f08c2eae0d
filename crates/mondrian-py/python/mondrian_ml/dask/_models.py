"""The Dask estimators: classifier, regressor and Pólya (anomaly and density) forest."""

from __future__ import annotations

import math
import uuid

import numpy as np

from .._classifier import MondrianForestClassifier
from .._polya import MondrianPolyaForest
from .._regressor import MondrianForestRegressor
from . import _worker
from ._forest import DaskForest, Partitions


def _unique(y):
    """The sorted distinct labels of ``y`` (computed on the cluster: only they reach the
    client)."""
    import dask.array as da
    import dask.dataframe as dd

    if isinstance(y, (dd.Series, dd.DataFrame)):
        return np.unique(np.asarray(y.unique().compute()))
    if isinstance(y, da.Array):
        return np.unique(da.unique(y).compute())
    return np.unique(np.asarray(y))


def _lazy(X, block, actors, width, name):
    """``block(rows, actors)`` over the row blocks of X: a lazy (n_rows, width) array."""
    return X.map_blocks(
        block, actors, dtype=np.float64, chunks=(X.chunks[0], (width,)),
        name=f"mondrian-{name}-{uuid.uuid4().hex[:8]}",
    )


class DaskMondrianForestClassifier(DaskForest):
    """A Mondrian forest classifier whose trees are spread in shards over a Dask cluster.

    ``forest_params`` are those of :class:`mondrian_ml.MondrianForestClassifier`; give
    ``random_state`` an int for a reproducible forest. See :mod:`mondrian_ml.dask` for
    ``client``, ``n_shards``, ``max_pending``, ``checkpoint_dir``, ``checkpoint_every``
    and ``verbose``.
    """

    _kind = "classifier"
    _local = MondrianForestClassifier

    def _new_core(self, n_classes=None):
        return self._local(**self.forest_params)._new_core(n_classes)

    def fit(self, X, y, sample_weight=None, classes=None):
        """Batch fit: every shard gathers all partitions on its worker and fits once, as
        ``MondrianForestClassifier.fit`` on the whole data."""
        self.classes_ = _unique(y if classes is None else classes)
        return self._fit(Partitions(X, y, sample_weight), self.classes_)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Streams each partition, in order, to every shard (``partial_fit`` per
        partition). The first call fixes the classes: ``classes``, or all the labels of
        ``y`` (computed on the cluster, a pass over ``y``)."""
        parts = Partitions(X, y, sample_weight)
        if not hasattr(self, "_actors"):
            self.classes_ = _unique(y if classes is None else classes)
            return self._partial_fit(parts, self.classes_, len(self.classes_))
        return self._partial_fit(parts, self.classes_)

    def predict_proba(self, X):
        """Class probabilities, a lazy Dask array (n_samples, n_classes)."""
        X = self._blocks(X)
        return _lazy(X, _worker.proba_block, self._actors, len(self.classes_), "proba")

    def predict(self, X):
        """Most probable class of each row, a lazy Dask array."""
        proba = self.predict_proba(X)
        classes = self.classes_
        return proba.map_blocks(
            lambda p: classes[np.argmax(p, axis=1)], drop_axis=1, dtype=classes.dtype
        )

    def to_local(self):
        """The merged forest as an ordinary :class:`MondrianForestClassifier`."""
        return MondrianForestClassifier._from_core(
            self._merged_core(), classes=self.classes_, names=self._names()
        )

    @classmethod
    def from_local(cls, est, client=None, n_shards=None, **params):
        """Scatters a fitted :class:`MondrianForestClassifier` into ``n_shards`` shards
        (default: one per worker)."""
        out = cls._scatter(est, est._core, client, n_shards, {**est.get_params(), **params})
        out.classes_ = np.asarray(est.classes_)
        return out

    def _extra_state(self):
        return {"classes_": self.classes_}

    def _set_extra_state(self, state):
        self.classes_ = np.asarray(state["classes_"])


class DaskMondrianForestRegressor(DaskForest):
    """A Mondrian forest regressor whose trees are spread in shards over a Dask cluster
    (``forest_params`` as for :class:`mondrian_ml.MondrianForestRegressor`)."""

    _kind = "regressor"
    _local = MondrianForestRegressor

    def fit(self, X, y, sample_weight=None):
        """Batch fit: every shard gathers all partitions on its worker and fits once."""
        return self._fit(Partitions(X, y, sample_weight), None)

    def partial_fit(self, X, y, sample_weight=None):
        """Streams each partition, in order, to every shard."""
        return self._partial_fit(Partitions(X, y, sample_weight), None)

    def predict(self, X, return_std=False):
        """Predictive mean (and with ``return_std`` the standard deviation), lazy."""
        if self.forest_params.get("theta_estimate") == "marginal_likelihood":
            raise ValueError(
                "θ by marginal likelihood depends on every tree, so the shards cannot "
                "predict apart: predict with to_local()"
            )
        m = _lazy(self._blocks(X), _worker.moments_block, self._actors, 3, "predict")
        if return_std:
            return m[:, 0], np.sqrt(m[:, 1])
        return m[:, 0]

    def to_local(self):
        """The merged forest as an ordinary :class:`MondrianForestRegressor`."""
        return MondrianForestRegressor._from_core(self._merged_core(), names=self._names())

    @classmethod
    def from_local(cls, est, client=None, n_shards=None, **params):
        """Scatters a fitted :class:`MondrianForestRegressor` into shards."""
        return cls._scatter(est, est._core, client, n_shards, {**est.get_params(), **params})


class DaskMondrianPolyaForest(DaskForest):
    """A Mondrian Pólya forest (density estimation and anomaly scores) whose trees are
    spread in shards over a Dask cluster (``forest_params`` as for
    :class:`mondrian_ml.MondrianPolyaForest`). With ``contamination="auto"`` the offset
    is ``−log10(n_points)``, as on one machine; with a float, ``fit`` computes the scores
    of its rows on the cluster and only their percentile reaches the client."""

    _kind = "polya"
    _local = MondrianPolyaForest

    def _contamination(self):
        """None for "auto", else the float (checked as the local estimator checks it)."""
        return self._local(**self.forest_params)._check_contamination()

    def _set_offset(self, X, first):
        c = self._contamination()
        if c is None:
            self.offset_ = -math.log10(max(self.n_points_, 1))
        elif first:
            scores = self.score_samples(X).compute()
            self.offset_ = float(np.percentile(scores, 100.0 * c))

    def fit(self, X, y=None):
        """Trains a new forest on the rows of X (every shard gathers the partitions on
        its worker and fits once, as ``MondrianPolyaForest.fit``); ``y`` is ignored."""
        del y
        self._contamination()
        self._fit(Partitions(X), None)
        self._set_offset(X, True)
        return self

    def partial_fit(self, X, y=None):
        """Streams each partition, in order, to every shard (``partial_fit`` per
        partition; with ``window`` the oldest points leave first)."""
        del y
        self._contamination()
        first = not hasattr(self, "_actors")
        self._partial_fit(Partitions(X), None)
        self._set_offset(X, first)
        return self

    def _evaluation(self, X):
        return _lazy(self._blocks(X), _worker.evaluation_block, self._actors, 3, "evaluate")

    def score_samples(self, X):
        """``log10`` of the mean leaf mass per row (higher is more normal; ``-inf``
        outside the domain), lazy."""
        import dask.array as da

        with np.errstate(divide="ignore"):
            return da.log10(self._evaluation(X)[:, 0])

    def decision_function(self, X):
        """``score_samples(X) - offset_``: negative for outliers, lazy."""
        return self.score_samples(X) - self.offset_

    def predict(self, X):
        """+1 for inliers, -1 for outliers (see ``contamination``), lazy."""
        import dask.array as da

        return da.where(self.decision_function(X) >= 0, 1, -1)

    def log_density(self, X):
        """ln of the forest density per row in the features' units, lazy."""
        return self._evaluation(X)[:, 1]

    def out_of_domain(self, X):
        """Whether each row lies outside every tree's domain, lazy."""
        return self._evaluation(X)[:, 2] > 0.5

    def mass_per_tree(self, X):
        """Each tree's leaf mass per row, (n_samples, n_estimators), lazy: the shards'
        columns side by side in tree order."""
        X = self._blocks(X)
        n_trees = self._ranges[-1][1]
        return _lazy(X, _worker.tree_mass_block, self._actors, n_trees, "mass-per-tree")

    def to_local(self):
        """The merged forest as an ordinary :class:`MondrianPolyaForest`."""
        est = MondrianPolyaForest._from_core(self._merged_core(), names=self._names())
        est.offset_ = self.offset_
        return est

    @classmethod
    def from_local(cls, est, client=None, n_shards=None, **params):
        """Scatters a fitted :class:`MondrianPolyaForest` into shards."""
        out = cls._scatter(est, est._core, client, n_shards, {**est.get_params(), **params})
        out.offset_ = est.offset_
        return out

    def _extra_state(self):
        return {"offset_": getattr(self, "offset_", None)}

    def _set_extra_state(self, state):
        if state.get("offset_") is not None:
            self.offset_ = state["offset_"]
