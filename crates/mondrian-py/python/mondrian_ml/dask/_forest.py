"""The client side shared by the Dask estimators: shards placed as actors, partitions
streamed to every shard with a bounded number in flight, lost workers, checkpoints,
parameters."""

from __future__ import annotations

import base64
import collections
import json
import os
import pickle
import sys
import time
import uuid

import numpy as np

from . import _worker
from ._worker import CORES, ShardActor

MANIFEST = "mondrian-shards.json"
_OWN_PARAMS = ("client", "n_shards", "max_pending", "checkpoint_dir", "checkpoint_every", "verbose")


class ShardLostError(RuntimeError):
    """A worker holding a shard of the forest was lost: its trees are gone from the
    cluster (restore the shards from a checkpoint)."""


class Partitions:
    """Row partitions of X (and y, sample weights) as lists of Dask objects with the
    same rows, from Dask arrays, Dask DataFrames/Series or in-memory arrays."""

    def __init__(self, X, y=None, sample_weight=None):
        import dask.array as da
        import dask.dataframe as dd

        self.names = None
        if isinstance(X, dd.DataFrame):
            self.names = [str(c) for c in X.columns]
            if any(not isinstance(c, str) for c in X.columns):
                self.names = None  # as scikit-learn: names only when all are strings
            self.n_features = len(X.columns)
            self.x = list(X.to_delayed())
            self.lengths = None
            self.frame = True
        else:
            if not isinstance(X, da.Array):
                X = np.asarray(X)
                X = da.from_array(X, chunks=(max(1, len(X)), -1))
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D (n_samples, n_features), got {X.ndim}-D")
            X = X.rechunk({1: -1})
            self.n_features = X.shape[1]
            self.x = list(X.to_delayed()[:, 0])
            self.lengths = X.chunks[0]
            self.frame = False
        self.array = X
        self.y = self._align(y)
        self.w = self._align(sample_weight)

    def _align(self, a):
        import dask.array as da
        import dask.dataframe as dd

        if a is None:
            return None
        if isinstance(a, (dd.DataFrame, dd.Series)):
            parts = list(a.to_delayed())
            if len(parts) != len(self.x):
                raise ValueError(
                    f"y or sample_weight has {len(parts)} partitions and X {len(self.x)}: "
                    "give them the same partitions"
                )
            return parts
        if not isinstance(a, da.Array):
            a = da.from_array(np.asarray(a), chunks=-1)
        if self.lengths is None:
            raise ValueError("with a Dask DataFrame X, give y as a Dask Series of its partitions")
        if a.shape[0] != sum(self.lengths):
            raise ValueError(f"X has {sum(self.lengths)} rows and y or sample_weight {a.shape[0]}")
        return list(a.rechunk({0: self.lengths}).to_delayed())

    def __len__(self):
        return len(self.x)


class Progress:
    """One line per step on stderr while partitions stream (``verbose``); the tasks are
    ordinary Dask tasks (``mondrian-fit-…``), so the dashboard shows them as well."""

    def __init__(self, verbose, what, total):
        self.verbose, self.what, self.total = verbose, what, total
        self.done = self.rows = 0
        self.start = time.perf_counter()

    def step(self, rows):
        self.done += 1
        self.rows += rows
        if not self.verbose:
            return
        secs = max(time.perf_counter() - self.start, 1e-9)
        end = "\n" if self.done == self.total else "\r"
        print(
            f"[mondrian.dask] {self.what}: {self.done}/{self.total} partitions "
            f"({100 * self.done // max(self.total, 1)}%), {self.rows:,} rows, "
            f"{self.rows / secs:,.0f} rows/s",
            end=end, file=sys.stderr, flush=True,
        )


class DaskForest:
    """Base of the Dask estimators (see the package's docstring)."""

    _kind = None
    _local = None

    def __init__(
        self,
        client=None,
        n_shards=None,
        max_pending=4,
        checkpoint_dir=None,
        checkpoint_every=None,
        verbose=0,
        **forest_params,
    ):
        unknown = sorted(set(forest_params) - set(self._local().get_params()))
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got parameters {unknown} that "
                f"{self._local.__name__} does not have"
            )
        self.client = client
        self.n_shards = n_shards
        self.max_pending = max_pending
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.verbose = verbose
        self.forest_params = forest_params

    # ------------------------------------------------------------------ parameters

    def get_params(self, deep=True):
        """The estimator's parameters: its own and the local forest's (scikit-learn)."""
        del deep
        own = {name: getattr(self, name) for name in _OWN_PARAMS}
        return {**own, **self.forest_params}

    def set_params(self, **params):
        """Sets parameters (its own or the local forest's); refused once shards exist
        for the forest's own, which the shards already hold."""
        unknown = sorted(set(params) - set(_OWN_PARAMS) - set(self._local().get_params()))
        if unknown:
            raise ValueError(f"invalid parameters {unknown} for {type(self).__name__}")
        forest = {k: v for k, v in params.items() if k not in _OWN_PARAMS}
        if forest and hasattr(self, "_actors"):
            raise ValueError(
                "the shards are built: the forest's parameters cannot change (to_local(), "
                "or a new estimator)"
            )
        for k, v in params.items():
            if k in _OWN_PARAMS:
                setattr(self, k, v)
        self.forest_params = {**self.forest_params, **forest}
        return self

    def __sklearn_clone__(self):
        """An unfitted copy with the same parameters, sharing the client (which cannot
        be deep-copied; scikit-learn's ``clone`` calls this)."""
        import copy

        params = {k: v for k, v in self.get_params().items() if k != "client"}
        return type(self)(client=self.client, **copy.deepcopy(params))

    def __repr__(self):
        shown = {k: v for k, v in self.get_params().items() if k != "client"}
        args = ", ".join(f"{k}={v!r}" for k, v in shown.items())
        return f"{type(self).__name__}({args})"

    # ------------------------------------------------------------------ shards

    def _client(self):
        from distributed import default_client

        return self.client if self.client is not None else default_client()

    def _workers(self):
        return _workers(self._client())

    def _place(self, items, from_paths=False):
        """Actors around shard cores (or shard files), spread over the workers."""
        client = self._client()
        workers = self._workers()
        futures = []
        for j, item in enumerate(items):
            kwargs = {"path": item} if from_paths else {"data": item.to_bytes()}
            futures.append(
                client.submit(
                    ShardActor, self._kind, actor=True, workers=[workers[j % len(workers)]],
                    allow_other_workers=False, key=f"mondrian-shard-{j}-{uuid.uuid4().hex}",
                    **kwargs,
                )
            )
        self._actors = [f.result() for f in futures]
        self._actor_futures = futures  # an actor lives as long as its future is held
        self._shard_workers = [a._address for a in self._actors]
        self._ranges = [tuple(a.shard_range().result()) for a in self._actors]
        self._calls = [a.n_calls().result() for a in self._actors]
        if not hasattr(self, "n_partitions_seen_"):
            self.n_partitions_seen_ = 0

    def _new_core(self, n_classes=None):
        return self._local(**self.forest_params)._new_core()

    def _new_shards(self, n_classes=None):
        core = self._new_core(n_classes)
        k = self.n_shards or len(self._workers())
        self._place(core.split(k))

    def _lost(self):
        alive = set(self._workers())
        return [(w, r) for w, r in zip(self._shard_workers, self._ranges) if w not in alive]

    def _check_alive(self):
        lost = self._lost()
        if lost:
            trees = ", ".join(f"trees {a}..{b} on {w}" for w, (a, b) in lost)
            raise ShardLostError(
                f"a worker holding part of the forest was lost ({trees}); the forest "
                "cannot go on with fewer trees: restore it from a checkpoint "
                f"({type(self).__name__}.restore(directory, client))"
            )

    def _wait(self, futures):
        """The results of ``futures``, checking that no shard's worker is lost meanwhile."""
        from distributed import wait

        pending = list(futures)
        while pending:
            try:
                wait(pending, timeout=0.5)
            except TimeoutError:
                pass
            if self._lost():
                self._client().cancel(list(futures))
                self._check_alive()
            pending = [f for f in pending if not f.done()]
        return self._results(futures)

    def _results(self, futures):
        """The results of finished futures. A task (or an actor call) that failed because
        its shard's worker died is reported as that loss: the scheduler may take a moment
        to drop the worker, so the check waits up to 5 s for it."""
        try:
            return [f.result() for f in futures]
        except Exception:
            for _ in range(25):
                self._check_alive()
                time.sleep(0.2)
            raise

    def _agree(self, calls):
        self._calls = calls
        if len(set(calls)) != 1:
            raise RuntimeError(
                f"the shards have taken different numbers of training calls ({calls}): "
                "restore them from a checkpoint"
            )

    def _broadcast(self, parts, classes):
        """Streams the partitions in order to every shard, with at most ``max_pending``
        partitions in flight (made but not yet taken by every shard), so that neither
        the workers nor the client hold more than that however long the stream; saves
        a checkpoint every ``checkpoint_every`` partitions."""
        client = self._client()
        token = uuid.uuid4().hex[:8]
        self._check_alive()
        window = max(1, int(self.max_pending))
        every = self.checkpoint_every
        if every is not None and self.checkpoint_dir is None:
            raise ValueError("checkpoint_every needs checkpoint_dir")
        progress = Progress(self.verbose, "partial_fit", len(parts))
        in_flight = collections.deque()
        # Each shard's last task so far: the next one waits for it (order within a shard).
        tokens = [None] * len(self._actors)

        def settle():
            results = self._wait(in_flight.popleft())
            self._agree([c for c, _ in results])
            self.n_partitions_seen_ += 1
            progress.step(results[0][1])

        for i in range(len(parts)):
            if len(in_flight) >= window:
                settle()
            wanted = [parts.x[i]]
            wanted += [] if parts.y is None else [parts.y[i]]
            wanted += [] if parts.w is None else [parts.w[i]]
            # The partition as futures made on the cluster; the scheduler frees it once
            # every shard's task has taken it.
            got = iter(client.compute(wanted))
            x = next(got)
            y = None if parts.y is None else next(got)
            w = None if parts.w is None else next(got)
            for j, actor in enumerate(self._actors):
                tokens[j] = client.submit(
                    _worker.feed, actor, tokens[j], x, y, w, classes,
                    workers=[self._shard_workers[j]], allow_other_workers=False, pure=False,
                    key=f"mondrian-fit-shard{j}-part{i}-{token}",
                )
            in_flight.append(list(tokens))
            del x, y, w, got
            if every and (i + 1) % every == 0:
                while in_flight:
                    settle()
                self.checkpoint(self.checkpoint_dir)
        while in_flight:
            settle()

    # ------------------------------------------------------------------ training

    def _start(self, parts, n_classes=None):
        self.n_features_in_ = parts.n_features
        if parts.names is not None:
            self.feature_names_in_ = np.asarray(parts.names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.n_partitions_seen_ = 0
        self._new_shards(n_classes)

    def _check_features(self, parts):
        if parts.n_features != self.n_features_in_:
            raise ValueError(
                f"X has {parts.n_features} features, but {type(self).__name__} was fitted "
                f"with {self.n_features_in_}"
            )
        names = getattr(self, "feature_names_in_", None)
        if names is not None and parts.names is not None and list(names) != parts.names:
            raise ValueError(
                f"the feature names differ from those seen in fit: {parts.names} against "
                f"{list(names)}"
            )

    def _fit(self, parts, classes):
        """Batch fit: every shard gathers all partitions on its worker and fits once, as
        the local estimator's ``fit`` on the whole data (each shard holds every row)."""
        client = self._client()
        self._start(parts, None)
        self._check_alive()
        n = len(parts)
        args = client.compute(list(parts.x) + list(parts.y or []) + list(parts.w or []))
        futures = [
            client.submit(
                _worker.fit_all, actor, classes, n, parts.y is not None, *args,
                workers=[self._shard_workers[j]], allow_other_workers=False, pure=False,
                key=f"mondrian-fit-shard{j}-{uuid.uuid4().hex[:8]}",
            )
            for j, actor in enumerate(self._actors)
        ]
        if self.verbose:
            from distributed import progress

            progress(futures, notebook=False)
        results = self._wait(futures)
        self._agree([c for c, _ in results])
        self.n_partitions_seen_ = n
        return self

    def _partial_fit(self, parts, classes, n_classes=None):
        if not hasattr(self, "_actors"):
            self._start(parts, n_classes)
        else:
            self._check_features(parts)
        self._broadcast(parts, classes)
        return self

    def forget(self, ids):
        """Removes the training points with these ids from every shard (as on one
        machine: ids are arrival indices)."""
        self._fitted()
        self._check_alive()
        ids = np.asarray(ids, dtype=np.uint64)
        self._agree(self._results([a.forget(ids) for a in self._actors]))
        return self

    @property
    def n_points_(self):
        """Points the forest holds (every shard holds them all)."""
        self._fitted()
        return self._actors[0].n_points().result()

    # ------------------------------------------------------------------ shards out and in

    def _fitted(self):
        if not hasattr(self, "_actors"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(f"this {type(self).__name__} is not fitted yet")

    def shard_bytes(self):
        """Each shard's bytes (the library's shard file format), in tree order."""
        self._fitted()
        self._check_alive()
        return self._results([a.to_bytes() for a in self._actors])

    def _merged_core(self):
        core_type = CORES[self._kind]
        return core_type.merge([core_type.from_bytes(b) for b in self.shard_bytes()])

    def _names(self):
        names = getattr(self, "feature_names_in_", None)
        return None if names is None else list(names)

    def _extra_state(self):
        return {}

    def _set_extra_state(self, state):
        del state

    def checkpoint(self, directory):
        """Saves every shard (crash-safe files written by the shard's worker: the
        directory must be reachable from the workers, a shared file system on a real
        cluster) and then, atomically, a manifest naming them; a crash mid-checkpoint
        leaves the previous manifest whole."""
        self._fitted()
        self._check_alive()
        directory = os.path.abspath(directory)
        os.makedirs(directory, exist_ok=True)
        seen, calls = self.n_partitions_seen_, self._calls[0]
        # Named by the shards' call count: the files the current manifest names are never
        # overwritten by a newer state.
        paths = [os.path.join(directory, f"shard-{a}-{b}-c{calls}.mf") for a, b in self._ranges]
        self._results([a.save(p) for a, p in zip(self._actors, paths)])
        state = {
            "forest_params": self.forest_params,
            "n_features_in_": self.n_features_in_,
            "feature_names_in_": self._names(),
            "n_partitions_seen_": seen,
            **self._extra_state(),
        }
        manifest = {
            "kind": self._kind,
            "shards": [os.path.basename(p) for p in paths],
            "n_partitions_seen": seen,
            "forest_params": {k: repr(v) for k, v in self.forest_params.items()},
            "state": base64.b64encode(pickle.dumps(state)).decode("ascii"),
        }
        tmp = os.path.join(directory, MANIFEST + ".tmp")
        with open(tmp, "w") as f:
            json.dump(manifest, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        old = _manifest_shards(directory)
        os.replace(tmp, os.path.join(directory, MANIFEST))
        for name in set(old) - set(manifest["shards"]):
            try:
                os.remove(os.path.join(directory, name))
            except OSError:
                pass
        return self

    @classmethod
    def restore(cls, directory, client=None, **params):
        """An estimator whose shards the workers load from the checkpoint in
        ``directory``; ``n_partitions_seen_`` says where the stream stood (continue with
        ``X.blocks[est.n_partitions_seen_:]`` to go on from there)."""
        with open(os.path.join(directory, MANIFEST)) as f:
            manifest = json.load(f)
        if manifest["kind"] != cls._kind:
            raise ValueError(f"{directory} holds {manifest['kind']} shards, not {cls._kind}")
        state = pickle.loads(base64.b64decode(manifest["state"]))
        est = cls(client=client, **params, **state["forest_params"])
        est.n_partitions_seen_ = state["n_partitions_seen_"]
        paths = [os.path.join(os.path.abspath(directory), s) for s in manifest["shards"]]
        est._place(paths, from_paths=True)
        est.n_shards = len(paths)
        est.n_features_in_ = state["n_features_in_"]
        if state["feature_names_in_"] is not None:
            est.feature_names_in_ = np.asarray(state["feature_names_in_"], dtype=object)
        est._set_extra_state(state)
        return est

    @classmethod
    def _scatter(cls, est, core, client, n_shards, params):
        """A Dask estimator whose shards are ``core`` cut in ``n_shards`` (default: one
        per worker)."""
        if client is None:
            from distributed import default_client

            client = default_client()
        n_shards = n_shards or len(_workers(client))
        out = cls(client=client, n_shards=n_shards, **params)
        out._place(core.split(n_shards))
        out.n_features_in_ = core.n_features
        names = getattr(est, "feature_names_in_", None)
        if names is not None:
            out.feature_names_in_ = np.asarray(names, dtype=object)
        return out

    def _blocks(self, X):
        """X as a Dask array of row blocks for prediction, checked against the fit."""
        self._fitted()
        parts = Partitions(X)
        self._check_features(parts)
        self._check_alive()
        X = parts.array
        if parts.frame:
            X = X.to_dask_array()
        return X if X.numblocks[1] == 1 else X.rechunk({1: -1})


def _workers(client):
    """The workers' addresses, asked of the scheduler now. (``scheduler_info()`` returns
    the client's cached identity, which its background refresh may replace with one that
    lists no workers: every shard would look lost.)"""
    return sorted(client.nthreads())


def _manifest_shards(directory):
    try:
        with open(os.path.join(directory, MANIFEST)) as f:
            return json.load(f)["shards"]
    except (OSError, ValueError, KeyError):
        return []
