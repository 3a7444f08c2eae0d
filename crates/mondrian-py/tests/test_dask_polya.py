"""DaskMondrianPolyaForest on a LocalCluster of 2 worker processes: the distributed forest
is the single-process forest (bit for bit), for both variants, batch and streamed, with
windows and forget; the shards' scores equal the merged forest's."""

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from mondrian_ml import MondrianPolyaForest  # noqa: E402
from mondrian_ml.dask import DaskMondrianPolyaForest  # noqa: E402

N, D, CHUNK, TREES = 400, 3, 100, 7


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, D))
    x[:5] += 6.0  # a few far points
    probe = np.vstack([rng.normal(size=(60, D)), rng.normal(size=(20, D)) * 4.0])
    return x, probe


def same_scores(dist, local, probe):
    """The shards' combined scores against the single-process forest's: masses and
    log-densities to rounding (the shards sum within themselves first), flags exactly."""
    dp = da.from_array(probe, chunks=30)
    np.testing.assert_allclose(
        dist.score_samples(dp).compute(), local.score_samples(probe), rtol=1e-12, atol=0
    )
    want = local.log_density(probe)
    got = dist.log_density(dp).compute()
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12, atol=1e-12)
    assert np.array_equal(dist.out_of_domain(dp).compute(), local.out_of_domain(probe))
    assert np.array_equal(dist.predict(dp).compute(), local.predict(probe))
    np.testing.assert_allclose(
        dist.mass_per_tree(dp).compute(), local.mass_per_tree(probe), rtol=0, atol=0
    )


@pytest.mark.parametrize("variant", ["streaming", "batch"])
def test_fit_is_the_single_process_forest(dask_client, variant):
    x, probe = data(0)
    params = dict(n_estimators=TREES, variant=variant, random_state=3)
    local = MondrianPolyaForest(**params).fit(x)
    dist = DaskMondrianPolyaForest(client=dask_client, **params).fit(
        da.from_array(x, chunks=CHUNK)
    )
    assert dist._ranges == [(0, 4), (4, 7)]
    merged = dist.to_local()
    assert merged._core.to_bytes() == local._core.to_bytes()
    assert merged.offset_ == local.offset_ == dist.offset_
    assert np.array_equal(merged.score_samples(probe), local.score_samples(probe))
    same_scores(dist, local, probe)


@pytest.mark.parametrize("variant", ["streaming", "batch"])
def test_partial_fit_with_a_window_and_forget(dask_client, variant):
    x, probe = data(1)
    params = dict(n_estimators=TREES, variant=variant, random_state=5, window=250)
    local = MondrianPolyaForest(**params)
    for i in range(0, N, CHUNK):
        local.partial_fit(x[i : i + CHUNK])
    local.forget([200, 390])
    dist = DaskMondrianPolyaForest(client=dask_client, n_shards=3, **params)
    dist.partial_fit(da.from_array(x[:200], chunks=CHUNK))
    dist.partial_fit(da.from_array(x[200:], chunks=CHUNK))
    dist.forget([200, 390])
    assert dist.n_points_ == local.n_points_ == 248
    assert dist.to_local()._core.to_bytes() == local._core.to_bytes()
    same_scores(dist, local, probe)


def test_contamination_offset_and_scatter(dask_client):
    x, probe = data(2)
    params = dict(n_estimators=TREES, random_state=0, contamination=0.05)
    local = MondrianPolyaForest(**params).fit(x)
    dist = DaskMondrianPolyaForest(client=dask_client, **params).fit(
        da.from_array(x, chunks=CHUNK)
    )
    assert dist.offset_ == pytest.approx(local.offset_, rel=1e-12)
    assert np.array_equal(
        dist.predict(da.from_array(probe, chunks=40)).compute(), local.predict(probe)
    )
    back = DaskMondrianPolyaForest.from_local(local, dask_client, n_shards=2)
    assert back.to_local()._core.to_bytes() == local._core.to_bytes()
    same_scores(back, local, probe)
