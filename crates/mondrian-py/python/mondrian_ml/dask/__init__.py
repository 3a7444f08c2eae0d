"""Mondrian forests trained and served on a Dask cluster by tree parallelism.

Each shard holds the trees ``[first, end)`` of the forest and lives in a Dask actor on
one worker (``n_shards``, default one per worker). Every data partition reaches every
shard: ``fit`` and ``partial_fit`` submit, for each shard, a task pinned to the shard's
worker that takes the partition as a dependency (so Dask moves it worker to worker, never
through the client) and calls the shard. The tasks of one shard are chained, so each
shard sees the partitions in order; the shards run in parallel. Because a tree depends
only on (seed, tree index) and the rows, the shards merge (``to_local``) into the forest
one process grows with the same seed, bit for bit.

**Back-pressure.** At most ``max_pending`` partitions (default 4) are in flight, made but
not yet taken by every shard: a stream of any length holds that much on the workers, and
the client holds a few futures, never rows.

``predict`` / ``predict_proba`` / ``score_samples`` are lazy ``map_blocks`` over the
rows: each block goes to every shard's actor and the shards' partial sums are combined
as the library combines them.

**Progress.** The tasks are ordinary Dask tasks (``mondrian-fit-shard…``), so the
dashboard and Dask's diagnostics show them; ``verbose=1`` prints a line per partition
(and ``distributed.progress`` for a batch ``fit``).

**Faults.** A shard lives in its worker's memory. If that worker is lost, the running or
next call raises :class:`ShardLostError` naming the trees lost (never a silently smaller
forest). ``checkpoint(directory)`` saves every shard with the library's crash-safe format
(then a manifest, atomically); ``checkpoint_dir`` with ``checkpoint_every=k`` does it every
``k`` partitions; ``restore(directory, client)`` rebuilds the estimator, and its
``n_partitions_seen_`` says where to resume the stream.

Parameters: ``client`` (default: the current ``distributed`` client), ``n_shards``,
``max_pending``, ``checkpoint_dir``, ``checkpoint_every``, ``verbose``, then the local
estimator's own parameters by name (``get_params`` / ``set_params`` show both).

Example::

    from dask.distributed import Client, LocalCluster
    import dask.array as da
    from mondrian_ml.dask import DaskMondrianForestClassifier

    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    X = da.random.random((100_000, 8), chunks=(10_000, 8))
    y = (X[:, 0] + X[:, 1] > 1).astype(int)
    est = DaskMondrianForestClassifier(client=client, n_estimators=10, random_state=0)
    est.partial_fit(X, y, classes=[0, 1])
    accuracy = (est.predict(X[:10_000]) == y[:10_000]).mean().compute()
    local = est.to_local()  # an ordinary MondrianForestClassifier
"""

from ._forest import ShardLostError
from ._models import (
    DaskMondrianForestClassifier,
    DaskMondrianForestRegressor,
    DaskMondrianPolyaForest,
)

__all__ = [
    "DaskMondrianForestClassifier",
    "DaskMondrianForestRegressor",
    "DaskMondrianPolyaForest",
    "ShardLostError",
]
