"""What runs on the workers: the shard actor, the training tasks pinned to a shard's
worker, and the prediction blocks that combine every shard's part."""

from __future__ import annotations

import threading

import numpy as np

from .._core import ClassifierCore, PolyaCore, RegressorCore

CORES = {"classifier": ClassifierCore, "regressor": RegressorCore, "polya": PolyaCore}


class ShardActor:
    """One shard of a forest in a worker's memory (a Dask actor). Its methods take a lock:
    the training tasks call the object directly on its worker (no copy of the partition
    through the actor's RPC), predictions and saves come through the actor's RPC."""

    def __init__(self, kind, data=None, path=None):
        core_type = CORES[kind]
        self.kind = kind
        self.core = core_type.load(path) if path is not None else core_type.from_bytes(data)
        self.calls = 0
        self.lock = threading.Lock()

    def train(self, method, x, y, sw):
        """``core.fit`` or ``core.partial_fit`` on these rows (a Pólya forest takes no
        labels nor weights)."""
        with self.lock:
            args = (x,) if self.kind == "polya" else (x, y, sw)
            getattr(self.core, method)(*args)
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

    def n_points(self):
        return self.core.n_points

    def to_bytes(self):
        with self.lock:
            return self.core.to_bytes()

    def save(self, path):
        with self.lock:
            self.core.save(path)
            return path

    def proba_sum(self, x):
        return self.core.predict_proba_sum(rows(x))

    def predict_sums(self, x):
        return self.core.predict_sums(rows(x))

    def evaluate_sum(self, x):
        return self.core.evaluate_sum(rows(x))

    def mass_per_tree(self, x):
        return self.core.mass_per_tree(rows(x))


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


def call(actor, method, *args):
    """``actor.method(*args)``: directly when this task runs on the actor's worker, else
    through the actor's RPC."""
    shard = _local(actor)
    if shard is not None:
        return getattr(shard, method)(*args)
    return getattr(actor, method)(*args).result()


def aligned(a):
    """``a`` C-contiguous and aligned (arrays Dask deserialises from its frames may be
    misaligned, which the cores refuse), copied only when needed."""
    return np.require(a, requirements=["C", "A"])


def rows(x):
    """A C-contiguous, aligned float64/float32 matrix, copied only when needed (a pandas
    frame gives its values)."""
    x = np.asarray(x)
    if x.dtype not in (np.float64, np.float32):
        x = x.astype(np.float64)
    return aligned(x)


def labels(y, classes):
    """Labels as indices into the sorted ``classes``; a label outside them is an error."""
    y = np.asarray(y)
    index = np.clip(np.searchsorted(classes, y), 0, len(classes) - 1)
    if not np.array_equal(classes[index], y):
        unknown = np.setdiff1d(np.unique(y), classes)
        raise ValueError(f"y holds labels {unknown[:5]!r} that are not in classes {classes!r}")
    return index.astype(np.int64)


def targets(y, classes):
    if y is None:
        return None
    if classes is not None:
        return labels(y, classes)
    return aligned(np.asarray(y, dtype=np.float64))


def weights(sw):
    if sw is None:
        return None
    return aligned(np.asarray(sw, dtype=np.float64))


def feed(actor, previous, x, y, sw, classes):
    """One partition into one shard (a task pinned to the shard's worker); returns the
    shard's call count and the partition's rows."""
    del previous  # only orders the shard's tasks
    x = rows(x)
    calls = call(actor, "train", "partial_fit", x, targets(y, classes), weights(sw))
    return calls, len(x)


def fit_all(actor, classes, n_parts, has_y, *parts):
    """Batch fit of one shard on every partition at once (gathered on its worker)."""
    xs = parts[:n_parts]
    rest = parts[n_parts:]
    ys, ws = (rest[:n_parts], rest[n_parts:]) if has_y else (None, rest)
    x = rows(np.concatenate([np.asarray(p) for p in xs]))
    y = targets(np.concatenate([np.asarray(p) for p in ys]), classes) if ys else None
    sw = weights(np.concatenate([np.asarray(p) for p in ws])) if ws else None
    return call(actor, "train", "fit", x, y, sw), len(x)


def proba_block(x, actors):
    """Class probabilities of a block of rows, every shard's part combined."""
    x = rows(x)
    futures = [a.proba_sum(x) for a in actors]
    parts = [(*p[:4], aligned(p[4])) for p in (f.result() for f in futures)]
    return ClassifierCore.combine_proba(parts)


def moments_block(x, actors):
    """Predictive mean, variance and between-tree variance of a block, as columns."""
    x = rows(x)
    futures = [a.predict_sums(x) for a in actors]
    parts = [tuple(aligned(v) if isinstance(v, np.ndarray) else v for v in f.result())
             for f in futures]
    mean, var, between = RegressorCore.combine_predictions(parts)
    return np.stack([mean, var, between], axis=1)


def evaluation_block(x, actors):
    """The Pólya forest's mass, log-density and out-of-domain flag of a block, as
    columns (the flag as 0.0 / 1.0)."""
    x = rows(x)
    futures = [a.evaluate_sum(x) for a in actors]
    parts = [tuple(aligned(v) if isinstance(v, np.ndarray) else v for v in f.result())
             for f in futures]
    mass, log_density, outside = PolyaCore.combine_evaluations(parts)
    return np.stack([mass, log_density, np.asarray(outside, dtype=np.float64)], axis=1)


def tree_mass_block(x, actors):
    """Every tree's leaf mass at each row of a block (n_rows × n_trees): the shards'
    columns side by side, in tree order."""
    x = rows(x)
    futures = [a.mass_per_tree(x) for a in actors]
    return np.concatenate([aligned(f.result()) for f in futures], axis=1)
