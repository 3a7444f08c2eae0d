"""mondrian_ml.dask as an estimator: parameters (scikit-learn's get_params / set_params /
clone), DataFrame column names, bounded partitions in flight, periodic checkpoints."""

import json

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from sklearn.base import clone  # noqa: E402

from mondrian_ml import MondrianForestClassifier, MondrianForestRegressor  # noqa: E402
from mondrian_ml.dask import (  # noqa: E402
    DaskMondrianForestClassifier,
    DaskMondrianForestRegressor,
)

N, D, CHUNK, TREES = 400, 4, 50, 6


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((N, D))
    return x, (x[:, 0] + x[:, 1] > 1).astype(np.int64), x[:, 2] + 0.1 * rng.standard_normal(N)


def test_parameters_are_scikit_learn_parameters(dask_client):
    est = DaskMondrianForestClassifier(
        client=dask_client, n_estimators=TREES, random_state=0, window=100
    )
    params = est.get_params()
    assert params["n_estimators"] == TREES and params["window"] == 100
    assert params["client"] is dask_client and params["max_pending"] == 4
    twin = clone(est)
    assert type(twin) is type(est) and twin.get_params() == params
    assert "n_estimators=6" in repr(est) and "client" not in repr(est)
    est.set_params(max_pending=2, lifetime=3.0)
    assert est.max_pending == 2 and est.get_params()["lifetime"] == 3.0
    with pytest.raises(TypeError, match="n_trees"):
        DaskMondrianForestRegressor(client=dask_client, n_trees=5)
    with pytest.raises(ValueError, match="invalid parameters"):
        est.set_params(depth=3)
    x, y, _ = data()
    est.partial_fit(da.from_array(x, chunks=CHUNK), da.from_array(y, chunks=CHUNK))
    with pytest.raises(ValueError, match="cannot change"):
        est.set_params(n_estimators=10)
    est.set_params(verbose=0)  # the estimator's own parameters may change


def test_dataframe_column_names_are_kept_and_checked(dask_client):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    x, _, y = data(1)
    names = [f"f{i}" for i in range(D)]
    frame = dd.from_pandas(pd.DataFrame(x, columns=names), npartitions=4)
    target = dd.from_pandas(pd.Series(y), npartitions=4)
    dist = DaskMondrianForestRegressor(client=dask_client, n_estimators=TREES, random_state=0)
    dist.partial_fit(frame, target)
    assert list(dist.feature_names_in_) == names and dist.n_features_in_ == D
    local = MondrianForestRegressor(n_estimators=TREES, random_state=0)
    for part in np.array_split(np.arange(N), 4):
        local.partial_fit(pd.DataFrame(x[part], columns=names), y[part])
    merged = dist.to_local()
    assert list(merged.feature_names_in_) == names
    assert merged._core.to_bytes() == local._core.to_bytes()
    # Predictions take a frame with the same columns, and refuse others.
    pred = dist.predict(frame).compute()
    np.testing.assert_allclose(pred, local.predict(pd.DataFrame(x, columns=names)), rtol=1e-12)
    renamed = dd.from_pandas(pd.DataFrame(x, columns=names[::-1]), npartitions=2)
    with pytest.raises(ValueError, match="feature names differ"):
        dist.predict(renamed)
    with pytest.raises(ValueError, match="3 features"):
        dist.predict(da.from_array(x[:, :3], chunks=CHUNK))


def _tag(block):
    return block


def test_partitions_in_flight_are_bounded(dask_client):
    """With max_pending = w, partition i is made only after every shard has taken
    partition i − w: the task stream's start and stop times (one clock, one machine)
    order them."""
    x, y, _ = data(2)
    w = 2
    dx = da.from_array(x, chunks=(CHUNK, D)).map_blocks(_tag, dtype=x.dtype, name="made-rows")
    dist = DaskMondrianForestClassifier(
        client=dask_client, n_estimators=TREES, random_state=1, max_pending=w
    )
    with distributed.get_task_stream(client=dask_client) as ts:
        dist.partial_fit(dx, da.from_array(y, chunks=CHUNK), classes=[0, 1])
    made, taken = {}, {}
    for event in ts.data:
        key = event["key"]
        compute = [s for s in event["startstops"] if s["action"] == "compute"]
        if not compute:
            continue
        if isinstance(key, tuple) and str(key[0]).startswith("made-rows"):
            made[key[1]] = compute[0]["start"]
        elif isinstance(key, str) and key.startswith("mondrian-fit-shard"):
            part = int(key.split("-part")[1].split("-")[0])
            taken[part] = max(taken.get(part, 0.0), compute[-1]["stop"])
    n = N // CHUNK
    assert sorted(made) == list(range(n)) and sorted(taken) == list(range(n))
    for i in range(w, n):
        assert made[i] >= taken[i - w], (i, made[i], taken[i - w])
    local = MondrianForestClassifier(n_estimators=TREES, random_state=1)
    for i in range(0, N, CHUNK):
        local.partial_fit(x[i : i + CHUNK], y[i : i + CHUNK], classes=[0, 1])
    assert dist.to_local()._core.to_bytes() == local._core.to_bytes()


def test_periodic_checkpoints_resume_the_stream(dask_client, tmp_path):
    x, y, _ = data(3)
    dx, dy = da.from_array(x, chunks=CHUNK), da.from_array(y, chunks=CHUNK)
    directory = tmp_path / "ckpt"
    dist = DaskMondrianForestClassifier(
        client=dask_client, n_estimators=TREES, random_state=2, window=120,
        checkpoint_dir=str(directory), checkpoint_every=3,
    )
    dist.partial_fit(dx, dy)
    assert dist.n_partitions_seen_ == N // CHUNK
    manifest = json.loads((directory / "mondrian-shards.json").read_text())
    assert manifest["n_partitions_seen"] == 6  # the last multiple of 3
    # Only the files of the last checkpoint are left.
    assert sorted(p.name for p in directory.glob("*.mf")) == sorted(manifest["shards"])
    again = DaskMondrianForestClassifier.restore(directory, dask_client)
    assert again.n_partitions_seen_ == 6 and list(again.classes_) == [0, 1]
    assert again.get_params()["window"] == 120
    k = again.n_partitions_seen_
    again.partial_fit(dx.blocks[k:], dy.blocks[k:])
    assert again.n_partitions_seen_ == N // CHUNK
    assert again.to_local()._core.to_bytes() == dist.to_local()._core.to_bytes()
    with pytest.raises(ValueError, match="checkpoint_every needs checkpoint_dir"):
        DaskMondrianForestClassifier(
            client=dask_client, n_estimators=TREES, checkpoint_every=2
        ).partial_fit(dx, dy)


def test_unfitted_and_bad_input_are_clear_errors(dask_client):
    from sklearn.exceptions import NotFittedError

    est = DaskMondrianForestClassifier(client=dask_client, n_estimators=TREES)
    with pytest.raises(NotFittedError):
        est.predict(da.zeros((10, D), chunks=5))
    with pytest.raises(NotFittedError):
        est.to_local()
    x, y, _ = data(4)
    est.partial_fit(da.from_array(x, chunks=CHUNK), da.from_array(y, chunks=CHUNK))
    with pytest.raises(ValueError, match="not in classes"):
        est.partial_fit(da.from_array(x, chunks=CHUNK), da.from_array(y + 5, chunks=CHUNK))
    with pytest.raises(ValueError, match="rows"):
        est.partial_fit(da.from_array(x, chunks=CHUNK), da.from_array(y[:10], chunks=5))


def test_marginal_likelihood_theta_asks_for_the_merged_forest(dask_client):
    x, _, y = data(5)
    dx, dy = da.from_array(x, chunks=CHUNK), da.from_array(y, chunks=CHUNK)
    params = dict(n_estimators=TREES, random_state=0, theta_estimate="marginal_likelihood")
    dist = DaskMondrianForestRegressor(client=dask_client, **params).fit(dx, dy)
    with pytest.raises(ValueError, match="to_local"):
        dist.predict(dx)
    local = MondrianForestRegressor(**params).fit(x, y)
    merged = dist.to_local()
    assert merged._core.to_bytes() == local._core.to_bytes()
    assert np.array_equal(merged.predict(x), local.predict(x))
