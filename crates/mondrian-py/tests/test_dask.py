"""mondrian_ml.dask on a LocalCluster of 2 worker processes: the distributed forest is the
single-process forest (bit for bit), shard predictions agree with the merged model, a lost
worker is reported and a checkpoint restores the shards."""

import os
import pickle
import signal
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from mondrian_ml import MondrianForestClassifier, MondrianForestRegressor  # noqa: E402
from mondrian_ml.dask import (  # noqa: E402
    DaskMondrianForestClassifier,
    DaskMondrianForestRegressor,
    ShardLostError,
)

N, D, CHUNK, TREES = 400, 4, 100, 10


@pytest.fixture
def client(dask_client):
    return dask_client


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((N, D))
    y_class = (x[:, 0] + 0.3 * x[:, 1] > 0.6).astype(np.int64) + (x[:, 2] > 0.8)
    y_reg = np.sin(4 * x[:, 0]) + x[:, 1] + 0.1 * rng.standard_normal(N)
    return x, y_class, y_reg


def parts(a):
    return [a[i : i + CHUNK] for i in range(0, len(a), CHUNK)]


def core_bytes(est):
    return est._core.to_bytes()


def saved_bytes(est, tmp_path, name):
    path = tmp_path / name
    est.save(path)
    return path.read_bytes()


def test_shards_are_spread_over_both_workers(client):
    x, y, _ = data()
    est = DaskMondrianForestClassifier(client=client, n_estimators=TREES, random_state=0)
    est.fit(da.from_array(x, chunks=CHUNK), da.from_array(y, chunks=CHUNK))
    assert len(set(est._shard_workers)) == 2
    assert est._ranges == [(0, 5), (5, 10)]


@pytest.mark.parametrize("n_shards", [2, 3])
def test_classifier_fit_is_the_single_process_forest(client, tmp_path, n_shards):
    x, y, _ = data()
    local = MondrianForestClassifier(n_estimators=TREES, random_state=3).fit(x, y)
    dist = DaskMondrianForestClassifier(
        client=client, n_shards=n_shards, n_estimators=TREES, random_state=3
    ).fit(da.from_array(x, chunks=CHUNK), da.from_array(y, chunks=CHUNK))
    merged = dist.to_local()
    assert core_bytes(merged) == core_bytes(local)
    assert saved_bytes(merged, tmp_path, "a") == saved_bytes(local, tmp_path, "b")
    assert pickle.loads(pickle.dumps(merged))._core.to_bytes() == core_bytes(local)
    assert np.array_equal(merged.predict_proba(x), local.predict_proba(x))
    # Predictions from the shards (combined without merging) equal the merged model's
    # up to rounding (the library sums within a shard first), and the labels exactly.
    dx = da.from_array(x, chunks=CHUNK)
    proba = dist.predict_proba(dx).compute()
    np.testing.assert_allclose(proba, local.predict_proba(x), rtol=1e-13, atol=1e-15)
    assert np.array_equal(dist.predict(dx).compute(), local.predict(x))


def test_classifier_partial_fit_over_partitions(client):
    x, y, _ = data(1)
    classes = np.unique(y)
    local = MondrianForestClassifier(n_estimators=TREES, random_state=5)
    for xp, yp in zip(parts(x), parts(y)):
        local.partial_fit(xp, yp, classes=classes)
    dist = DaskMondrianForestClassifier(client=client, n_estimators=TREES, random_state=5)
    # Two calls: the first two partitions, then the rest.
    half = 2 * CHUNK
    dist.partial_fit(da.from_array(x[:half], chunks=CHUNK), da.from_array(y[:half], chunks=CHUNK))
    dist.partial_fit(da.from_array(x[half:], chunks=CHUNK), da.from_array(y[half:], chunks=CHUNK))
    merged = dist.to_local()
    assert core_bytes(merged) == core_bytes(local)
    assert np.array_equal(merged.predict_proba(x), local.predict_proba(x))
    proba = dist.predict_proba(da.from_array(x, chunks=CHUNK)).compute()
    np.testing.assert_allclose(proba, local.predict_proba(x), rtol=1e-13, atol=1e-15)


def test_classifier_from_dataframes(client):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    x, y, _ = data(2)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(D)])
    dx = dd.from_pandas(frame, npartitions=4)
    dy = dd.from_pandas(pd.Series(y), npartitions=4)
    local = MondrianForestClassifier(n_estimators=TREES, random_state=1).fit(x, y)
    dist = DaskMondrianForestClassifier(client=client, n_estimators=TREES, random_state=1)
    dist.fit(dx, dy)
    assert core_bytes(dist.to_local()) == core_bytes(local)


def test_regressor_fit_and_partial_fit(client, tmp_path):
    x, _, y = data(3)
    dx, dy = da.from_array(x, chunks=CHUNK), da.from_array(y, chunks=CHUNK)
    local = MondrianForestRegressor(n_estimators=TREES, random_state=2).fit(x, y)
    dist = DaskMondrianForestRegressor(client=client, n_estimators=TREES, random_state=2)
    merged = dist.fit(dx, dy).to_local()
    assert core_bytes(merged) == core_bytes(local)
    assert saved_bytes(merged, tmp_path, "a") == saved_bytes(local, tmp_path, "b")
    assert np.array_equal(merged.predict(x), local.predict(x))
    mean, std = dist.predict(dx, return_std=True)
    want_mean, want_std = local.predict(x, return_std=True)
    np.testing.assert_allclose(mean.compute(), want_mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(std.compute(), want_std, rtol=1e-12, atol=1e-12)

    local = MondrianForestRegressor(n_estimators=TREES, random_state=4)
    for xp, yp in zip(parts(x), parts(y)):
        local.partial_fit(xp, yp)
    dist = DaskMondrianForestRegressor(client=client, n_estimators=TREES, random_state=4)
    merged = dist.partial_fit(dx, dy).to_local()
    assert core_bytes(merged) == core_bytes(local)
    assert np.array_equal(merged.predict(x), local.predict(x))


def test_from_local_scatters_and_merges_back(client):
    x, y, yr = data(4)
    local = MondrianForestClassifier(n_estimators=TREES, random_state=0).fit(x, y)
    dist = DaskMondrianForestClassifier.from_local(local, client, n_shards=3)
    assert [b - a for a, b in dist._ranges] == [4, 3, 3]
    assert core_bytes(dist.to_local()) == core_bytes(local)
    proba = dist.predict_proba(da.from_array(x, chunks=CHUNK)).compute()
    np.testing.assert_allclose(proba, local.predict_proba(x), rtol=1e-13, atol=1e-15)
    reg = MondrianForestRegressor(n_estimators=TREES, random_state=0).fit(x, yr)
    dreg = DaskMondrianForestRegressor.from_local(reg, client)
    assert core_bytes(dreg.to_local()) == core_bytes(reg)


def test_forget_on_every_shard(client):
    x, y, _ = data(5)
    local = MondrianForestClassifier(n_estimators=TREES, random_state=0, window=300)
    classes = np.unique(y)
    for xp, yp in zip(parts(x), parts(y)):
        local.partial_fit(xp, yp, classes=classes)
    local.forget([150, 151, 399])
    dist = DaskMondrianForestClassifier(
        client=client, n_estimators=TREES, random_state=0, window=300
    )
    dist.partial_fit(da.from_array(x, chunks=CHUNK), da.from_array(y, chunks=CHUNK), classes=classes)
    dist.forget([150, 151, 399])
    assert core_bytes(dist.to_local()) == core_bytes(local)


def _kill_worker(client, address):
    pid = client.run(os.getpid, workers=[address])[address]
    os.kill(pid, signal.SIGKILL)
    for _ in range(300):  # the scheduler notices within a few heartbeats
        if address not in client.nthreads():
            return
        time.sleep(0.1)
    pytest.fail("the killed worker is still listed")


def _wait_for_workers(client, n):
    client.wait_for_workers(n, timeout=60)


def test_lost_worker_is_reported_and_checkpoint_restores(tmp_path):
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0"
    )
    client = distributed.Client(cluster)
    try:
        x, y, _ = data(6)
        classes = np.unique(y)
        local = MondrianForestClassifier(n_estimators=TREES, random_state=9)
        for xp, yp in zip(parts(x), parts(y)):
            local.partial_fit(xp, yp, classes=classes)

        dist = DaskMondrianForestClassifier(client=client, n_estimators=TREES, random_state=9)
        half = 2 * CHUNK
        dist.partial_fit(
            da.from_array(x[:half], chunks=CHUNK), da.from_array(y[:half], chunks=CHUNK),
            classes=classes,
        )
        dist.checkpoint(tmp_path / "ckpt")
        _kill_worker(client, dist._shard_workers[1])
        with pytest.raises(ShardLostError, match="trees 5..10"):
            dist.partial_fit(
                da.from_array(x[half:], chunks=CHUNK), da.from_array(y[half:], chunks=CHUNK)
            )
        with pytest.raises(ShardLostError):
            dist.to_local()

        _wait_for_workers(client, 2)  # the nanny starts a new worker
        again = DaskMondrianForestClassifier.restore(tmp_path / "ckpt", client)
        again.partial_fit(
            da.from_array(x[half:], chunks=CHUNK), da.from_array(y[half:], chunks=CHUNK)
        )
        assert core_bytes(again.to_local()) == core_bytes(local)
    finally:
        client.close()
        cluster.close()


def _slow(block):
    time.sleep(0.5)
    return block


def test_worker_killed_mid_fit_is_a_clear_error():
    import threading

    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0"
    )
    client = distributed.Client(cluster)
    try:
        x, y, _ = data(7)
        dist = DaskMondrianForestClassifier(client=client, n_estimators=TREES, random_state=0)
        # Partitions that take a while to make, so that the kill lands during the stream.
        dx = da.from_array(x, chunks=20).map_blocks(_slow, dtype=x.dtype)
        dy = da.from_array(y, chunks=20)
        dist.partial_fit(dx[:20], dy[:20], classes=np.unique(y))
        victim = dist._shard_workers[0]
        killer = threading.Timer(1.5, _kill_worker, (client, victim))
        killer.start()
        with pytest.raises(ShardLostError, match="trees 0..5"):
            dist.partial_fit(dx, dy)
        killer.join()
    finally:
        client.close()
        cluster.close()


def test_progress_through_dask_diagnostics(client, capsys):
    x, _, y = data(8)
    dist = DaskMondrianForestRegressor(
        client=client, n_estimators=TREES, random_state=0, verbose=1
    )
    dist.partial_fit(da.from_array(x, chunks=CHUNK), da.from_array(y, chunks=CHUNK))
    out = capsys.readouterr()
    assert "4/4 partitions (100%), 400 rows" in out.err
