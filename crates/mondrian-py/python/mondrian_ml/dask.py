"""Mondrian forests trained and served on a Dask cluster by tree parallelism.

Each shard holds the trees ``[first, end)`` of the forest and lives in a Dask actor on one
worker. Every data partition reaches every shard: ``fit`` and ``partial_fit`` submit, for
each shard, a task pinned to the shard's worker that takes the partition as a dependency
(so Dask moves it worker to worker, never through the client) and calls the actor. The
tasks of one shard are chained, so each shard sees the partitions in order; the shards run
in parallel. Because a tree depends only on (seed, tree index) and the rows, the shards
merge (``to_local``) into the forest one process grows with the same seed, bit for bit.

``predict`` / ``predict_proba`` are lazy ``map_blocks`` over the rows: each block is sent
to every shard's actor and the shards' partial sums are combined exactly as the library
combines them.

Progress: the tasks are ordinary Dask tasks (named ``mondrian-fit-…``), so the dashboard
and ``distributed.progress`` show them; ``verbose=1`` prints ``distributed.progress``.

Faults: a shard lives in its worker's memory. If that worker is lost, the next call
raises :class:`ShardLostError` naming the trees lost (never a silently smaller forest);
``checkpoint(directory)`` saves every shard with the library's crash-safe format and
``restore(directory, client)`` rebuilds the estimator from such a directory.

Prototype (issue 24): DataFrame column names are not kept, classes are always declared
(computed with ``dask.array.unique`` when not given).
"""

from __future__ import annotations

import json
import os
import time
import uuid

import numpy as np

from ._classifier import MondrianForestClassifier
from ._core import ClassifierCore, RegressorCore
from ._regressor import MondrianForestRegressor

_CORES = {"classifier": ClassifierCore, "regressor": RegressorCore}
_MANIFEST = "mondrian-shards.json"


class ShardLostError(RuntimeError):
    """A worker holding a shard of the forest was lost: its trees are gone from the
    cluster (restore the shards from a checkpoint)."""


# ---------------------------------------------------------------------- worker side


class _ShardActor:
    """One shard of a forest in a worker's memory (a Dask actor). Its methods take a lock:
    the training tasks call the object directly on its worker (no copy of the partition
    through the actor's RPC), predictions and saves come through the actor's RPC."""

    def __init__(self, kind, data=None, path=None):
        import threading

        core_type = _CORES[kind]
        self.core = core_type.load(path) if path is not None else core_type.from_bytes(data)
        self.calls = 0
        self.lock = threading.Lock()

    def partial_fit(self, x, y, sw):
        with self.lock:
            self.core.partial_fit(_rows(x), y, sw)
            self.calls += 1
            return self.calls

    def fit(self, x, y, sw):
        with self.lock:
            self.core.fit(_rows(x), y, sw)
            self.calls += 1
            return self.calls

    def forget(self, ids):
        with self.lock:
            self.core.forget(np.ascontiguousarray(ids, dtype=np.uint64))
            self.calls += 1
            return self.calls

    def n_calls(self):
        return self.calls

    def shard_range(self):
        return self.core.shard_range

    def to_bytes(self):
        with self.lock:
            return self.core.to_bytes()

    def save(self, path):
        with self.lock:
            self.core.save(path)
            return path

    def proba_sum(self, x):
        return self.core.predict_proba_sum(_rows(x))

    def predict_sums(self, x):
        return self.core.predict_sums(_rows(x))


def _local(actor):
    """The shard object itself when the calling task runs on the actor's worker (it is
    pinned there), else None."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:
        return None
    if worker.address != actor._address:
        return None
    return worker.state.actors.get(actor.key)


def _call(actor, method, *args):
    shard = _local(actor)
    if shard is not None:
        return getattr(shard, method)(*args)
    return getattr(actor, method)(*args).result()


def _rows(x):
    """A C-contiguous, aligned float64/float32 matrix (arrays Dask deserialises from its
    frames may be misaligned, which the core refuses), copied only when needed."""
    x = np.asarray(x)
    if x.dtype not in (np.float64, np.float32):
        x = x.astype(np.float64)
    return np.require(x, requirements=["C", "A"])


def _labels(y, classes):
    y = np.asarray(y)
    index = np.searchsorted(classes, y)
    index = np.clip(index, 0, len(classes) - 1)
    if not np.array_equal(classes[index], y):
        raise ValueError(f"y holds labels that are not in classes {classes!r}")
    return index.astype(np.int64)


def _targets(y, classes):
    if classes is not None:
        return _labels(y, classes)
    return np.require(np.asarray(y, dtype=np.float64), requirements=["C", "A"])


def _weights(sw):
    if sw is None:
        return None
    return np.require(np.asarray(sw, dtype=np.float64), requirements=["C", "A"])


def _feed(actor, previous, x, y, sw, classes):
    """One partition into one shard (a task pinned to the shard's worker)."""
    del previous  # only orders the shard's tasks
    return _call(actor, "partial_fit", _rows(x), _targets(y, classes), _weights(sw))


def _fit_all(actor, classes, n_parts, *parts):
    """Batch fit of one shard on every partition at once (gathered on its worker)."""
    xs, ys, ws = parts[:n_parts], parts[n_parts : 2 * n_parts], parts[2 * n_parts :]
    x = _rows(np.concatenate([np.asarray(p) for p in xs]))
    y = _targets(np.concatenate([np.asarray(p) for p in ys]), classes)
    sw = _weights(np.concatenate([np.asarray(p) for p in ws])) if ws else None
    return _call(actor, "fit", x, y, sw)


def _proba_block(x, actors):
    x = _rows(x)
    parts = [a.proba_sum(x) for a in actors]
    # The sums come back through the actors' RPC, maybe misaligned: realigned here.
    parts = [(*p[:4], np.require(p[4], requirements=["C", "A"])) for p in (f.result() for f in parts)]
    return ClassifierCore.combine_proba(parts)


def _moments_block(x, actors):
    x = _rows(x)
    parts = [a.predict_sums(x) for a in actors]
    mean, var, between = RegressorCore.combine_predictions([p.result() for p in parts])
    return np.stack([mean, var, between], axis=1)


# ---------------------------------------------------------------------- client side


def _row_chunks(X, y=None, sample_weight=None):
    """Row partitions of X (and y, sample_weight) as lists of Dask delayed objects with
    the same row chunks."""
    import dask.array as da
    import dask.dataframe as dd

    def as_array(a):
        if isinstance(a, (dd.DataFrame, dd.Series)):
            return a.to_dask_array(lengths=True)
        if isinstance(a, da.Array):
            return a
        return da.from_array(np.asarray(a), chunks=max(1, len(a)))

    X = as_array(X)
    if X.ndim != 2:
        raise ValueError("X must be 2-D")
    X = X.rechunk({1: -1})
    out = [list(X.to_delayed()[:, 0])]
    for a in (y, sample_weight):
        if a is None:
            out.append(None)
            continue
        a = as_array(a).rechunk({0: X.chunks[0]})
        out.append(list(a.to_delayed()))
    return X, out[0], out[1], out[2]


class _DaskForest:
    _kind = None
    _local = None

    def __init__(self, client=None, n_shards=None, verbose=0, **forest_params):
        self.client = client
        self.n_shards = n_shards
        self.verbose = verbose
        self.forest_params = forest_params

    # ------------------------------------------------------------------ shards

    def _client(self):
        from distributed import default_client

        return self.client if self.client is not None else default_client()

    def _workers(self):
        return sorted(self._client().scheduler_info(n_workers=-1)["workers"])

    def _place(self, cores_or_paths, from_paths=False):
        """Actors around shard cores (or shard files), spread over the workers."""
        client = self._client()
        workers = self._workers()
        futures = []
        for j, item in enumerate(cores_or_paths):
            w = workers[j % len(workers)]
            kwargs = {"path": item} if from_paths else {"data": item.to_bytes()}
            futures.append(
                client.submit(
                    _ShardActor, self._kind, actor=True, workers=[w],
                    allow_other_workers=False, key=f"mondrian-shard-{j}-{uuid.uuid4().hex}",
                    **kwargs,
                )
            )
        self._actors = [f.result() for f in futures]
        self._actor_futures = futures
        self._shard_workers = [a._address for a in self._actors]
        self._ranges = [tuple(a.shard_range().result()) for a in self._actors]
        self._calls = [a.n_calls().result() for a in self._actors]
        self._tokens = [None] * len(self._actors)

    def _new_shards(self, n_classes=None):
        template = self._local(**self.forest_params)
        core = template._new_core(n_classes) if self._kind == "classifier" else template._new_core()
        k = self.n_shards or len(self._workers())
        self._place(core.split(k))

    def _lost(self):
        alive = set(self._workers())
        return [
            (w, r) for w, r in zip(self._shard_workers, self._ranges) if w not in alive
        ]

    def _check_alive(self):
        lost = self._lost()
        if lost:
            trees = ", ".join(f"trees {a}..{b} on {w}" for w, (a, b) in lost)
            raise ShardLostError(
                f"a worker holding part of the forest was lost ({trees}); the forest "
                "cannot go on with fewer trees: restore it from a checkpoint "
                f"({type(self).__name__}.restore(directory, client))"
            )

    def _wait(self, futures, what):
        """Waits for ``futures``, checking that no shard's worker is lost meanwhile."""
        from distributed import progress, wait

        if self.verbose:
            progress(futures, notebook=False)
        pending = list(futures)
        while pending:
            try:
                wait(pending, timeout=0.5)
            except TimeoutError:
                pass
            if self._lost():
                self._client().cancel(list(futures))
                self._check_alive()
            done = [f for f in pending if f.done()]
            for f in done:
                if f.status == "error":
                    f.result()  # raises the task's error
            pending = [f for f in pending if not f.done()]
        return [f.result() for f in futures]

    def _actor_results(self, futures):
        """The results of actor calls; a shard's worker lost meanwhile is reported."""
        try:
            return [f.result() for f in futures]
        except (OSError, RuntimeError):
            self._check_alive()
            raise

    def _broadcast(self, parts_x, parts_y, parts_w, classes):
        client = self._client()
        token = uuid.uuid4().hex[:8]
        self._check_alive()
        tokens = list(self._tokens)
        for i, x in enumerate(parts_x):
            # The partition as futures computed on the cluster; the client drops them once
            # every shard's task holds them (the scheduler frees a partition after them).
            wanted = [x, parts_y[i]] + ([] if parts_w is None else [parts_w[i]])
            got = client.compute(wanted)
            x, y = got[0], got[1]
            w = None if parts_w is None else got[2]
            for j, actor in enumerate(self._actors):
                tokens[j] = client.submit(
                    _feed, actor, tokens[j], x, y, w, classes,
                    workers=[self._shard_workers[j]], allow_other_workers=False, pure=False,
                    key=f"mondrian-fit-shard{j}-part{i}-{token}",
                )
        calls = self._wait(tokens, "partial_fit")
        self._tokens = [None] * len(self._actors)
        self._calls = calls
        if len(set(calls)) != 1:
            raise RuntimeError(
                f"the shards have taken different numbers of training calls ({calls}): "
                "restore them from a checkpoint"
            )

    # ------------------------------------------------------------------ scikit-learn

    def _fit(self, X, y, sample_weight, classes):
        X, px, py, pw = _row_chunks(X, y, sample_weight)
        self.n_features_in_ = X.shape[1]
        client = self._client()
        # As MondrianForestClassifier.fit: the class count follows the rows (not declared).
        self._new_shards(None)
        self._check_alive()
        n = len(px)
        futures = []
        args = client.compute(list(px) + list(py) + (list(pw) if pw is not None else []))
        for j, actor in enumerate(self._actors):
            futures.append(
                client.submit(
                    _fit_all, actor, classes, n, *args,
                    workers=[self._shard_workers[j]], allow_other_workers=False, pure=False,
                    key=f"mondrian-fit-shard{j}-{uuid.uuid4().hex[:8]}",
                )
            )
        self._calls = self._wait(futures, "fit")
        return self

    def _partial_fit(self, X, y, sample_weight, classes, n_classes=None):
        X, px, py, pw = _row_chunks(X, y, sample_weight)
        if not hasattr(self, "_actors"):
            self.n_features_in_ = X.shape[1]
            self._new_shards(n_classes)
        self._broadcast(px, py, pw, classes)
        return self

    def forget(self, ids):
        """Removes the training points with these ids from every shard."""
        self._check_alive()
        ids = np.asarray(ids, dtype=np.uint64)
        self._calls = self._actor_results([a.forget(ids) for a in self._actors])
        return self

    # ------------------------------------------------------------------ shards out and in

    def shard_bytes(self):
        """Each shard's bytes (the library's shard file format), in tree order."""
        self._check_alive()
        return [a.to_bytes().result() for a in self._actors]

    def _merged_core(self):
        core_type = _CORES[self._kind]
        return core_type.merge([core_type.from_bytes(b) for b in self.shard_bytes()])

    def checkpoint(self, directory):
        """Saves every shard (crash-safe files, written by the shard's worker: the
        directory must be reachable from the workers) and a manifest."""
        self._check_alive()
        os.makedirs(directory, exist_ok=True)
        paths = [
            os.path.join(os.path.abspath(directory), f"shard-{a}-{b}.mf")
            for a, b in self._ranges
        ]
        self._actor_results([a.save(p) for a, p in zip(self._actors, paths)])
        manifest = {
            "kind": self._kind,
            "shards": [os.path.basename(p) for p in paths],
            "forest_params": self.forest_params,
            "classes": None if getattr(self, "classes_", None) is None else self.classes_.tolist(),
            "n_features_in": getattr(self, "n_features_in_", None),
        }
        tmp = os.path.join(directory, _MANIFEST + ".tmp")
        with open(tmp, "w") as f:
            json.dump(manifest, f)
        os.replace(tmp, os.path.join(directory, _MANIFEST))
        return self

    @classmethod
    def restore(cls, directory, client=None, **kwargs):
        """An estimator whose shards are loaded (by the workers) from a checkpoint."""
        with open(os.path.join(directory, _MANIFEST)) as f:
            manifest = json.load(f)
        if manifest["kind"] != cls._kind:
            raise ValueError(f"{directory} holds {manifest['kind']} shards")
        est = cls(client=client, **kwargs, **manifest["forest_params"])
        paths = [os.path.join(os.path.abspath(directory), s) for s in manifest["shards"]]
        est._place(paths, from_paths=True)
        est.n_shards = len(paths)
        if manifest["n_features_in"] is not None:
            est.n_features_in_ = manifest["n_features_in"]
        if manifest["classes"] is not None:
            est.classes_ = np.asarray(manifest["classes"])
        return est

    @classmethod
    def _from_core(cls, core, client, n_shards, forest_params):
        est = cls(client=client, n_shards=n_shards, **forest_params)
        est._place(core.split(n_shards))
        if core.n_features is not None:
            est.n_features_in_ = core.n_features
        return est

    def _blocks(self, X):
        X, _, _, _ = _row_chunks(X)
        self._check_alive()
        return X


class DaskMondrianForestClassifier(_DaskForest):
    """A Mondrian forest classifier whose trees are spread in shards over a Dask cluster.

    ``forest_params`` are those of :class:`mondrian_ml.MondrianForestClassifier`; give
    ``random_state`` an int for a reproducible forest.
    """

    _kind = "classifier"
    _local = MondrianForestClassifier

    def fit(self, X, y, sample_weight=None, classes=None):
        """Batch fit: every shard gathers all partitions on its worker and fits once, as
        ``MondrianForestClassifier.fit`` on the whole data."""
        import dask.array as da

        if classes is None:
            classes = da.unique(_as_1d(y)).compute()
        self.classes_ = np.unique(np.asarray(classes))
        return self._fit(X, y, sample_weight, self.classes_)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Streams each partition, in order, to every shard (``partial_fit`` per
        partition). The first call fixes the classes: ``classes``, or all the labels of
        ``y`` (computed on the cluster)."""
        import dask.array as da

        if not hasattr(self, "_actors"):
            if classes is None:
                classes = da.unique(_as_1d(y)).compute()
            self.classes_ = np.unique(np.asarray(classes))
            return self._partial_fit(X, y, sample_weight, self.classes_, len(self.classes_))
        return self._partial_fit(X, y, sample_weight, self.classes_)

    def predict_proba(self, X):
        """Class probabilities, a lazy Dask array (n_samples, n_classes)."""
        X = self._blocks(X).rechunk({1: -1})
        k = len(self.classes_)
        return X.map_blocks(
            _proba_block, self._actors, dtype=np.float64,
            chunks=(X.chunks[0], (k,)), name=f"mondrian-predict-proba-{uuid.uuid4().hex[:8]}",
        )

    def predict(self, X):
        """Most probable class of each row, a lazy Dask array."""
        proba = self.predict_proba(X)
        classes = self.classes_
        return proba.map_blocks(
            lambda p: classes[np.argmax(p, axis=1)], drop_axis=1, dtype=classes.dtype
        )

    def to_local(self):
        """The merged forest as an ordinary :class:`MondrianForestClassifier`."""
        return MondrianForestClassifier._from_core(self._merged_core(), classes=self.classes_)

    @classmethod
    def from_local(cls, est, client=None, n_shards=None):
        """Scatters a fitted :class:`MondrianForestClassifier` into shards."""
        n_shards = n_shards or len(client.scheduler_info(n_workers=-1)["workers"])
        params = {k: v for k, v in est.get_params().items()}
        out = cls._from_core(est._core, client, n_shards, params)
        out.classes_ = np.asarray(est.classes_)
        return out


class DaskMondrianForestRegressor(_DaskForest):
    """A Mondrian forest regressor whose trees are spread in shards over a Dask cluster
    (``forest_params`` as for :class:`mondrian_ml.MondrianForestRegressor`)."""

    _kind = "regressor"
    _local = MondrianForestRegressor

    def fit(self, X, y, sample_weight=None):
        """Batch fit: every shard gathers all partitions on its worker and fits once."""
        return self._fit(X, y, sample_weight, None)

    def partial_fit(self, X, y, sample_weight=None):
        """Streams each partition, in order, to every shard."""
        return self._partial_fit(X, y, sample_weight, None)

    def _moments(self, X):
        X = self._blocks(X).rechunk({1: -1})
        return X.map_blocks(
            _moments_block, self._actors, dtype=np.float64,
            chunks=(X.chunks[0], (3,)), name=f"mondrian-predict-{uuid.uuid4().hex[:8]}",
        )

    def predict(self, X, return_std=False):
        """Predictive mean (and with ``return_std`` the standard deviation), lazy."""
        m = self._moments(X)
        if return_std:
            return m[:, 0], np.sqrt(m[:, 1])
        return m[:, 0]

    def to_local(self):
        """The merged forest as an ordinary :class:`MondrianForestRegressor`."""
        return MondrianForestRegressor._from_core(self._merged_core())

    @classmethod
    def from_local(cls, est, client=None, n_shards=None):
        """Scatters a fitted :class:`MondrianForestRegressor` into shards."""
        n_shards = n_shards or len(client.scheduler_info(n_workers=-1)["workers"])
        return cls._from_core(est._core, client, n_shards, est.get_params())


def _as_1d(y):
    import dask.array as da
    import dask.dataframe as dd

    if isinstance(y, (dd.DataFrame, dd.Series)):
        return y.to_dask_array(lengths=True)
    if isinstance(y, da.Array):
        return y
    return da.from_array(np.asarray(y))
