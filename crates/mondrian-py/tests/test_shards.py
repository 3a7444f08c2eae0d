"""The shard methods of the cores (tree-parallel shards of one forest), without Dask."""

import pickle

import numpy as np
import pytest

from mondrian_ml._core import ClassifierCore, PolyaCore, RegressorCore


def data(n=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, d))
    return x, (x[:, 0] > 0.5).astype(np.int64), x[:, 1] + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize("batch", [True, False])
def test_classifier_shards_merge_bit_for_bit(batch):
    x, y, _ = data()
    whole = ClassifierCore(n_trees=7, seed=4)
    shards = [whole.new_shard(0, 3), whole.new_shard(3, 4)]
    assert [s.shard_range for s in shards] == [(0, 3), (3, 7)]
    assert all(s.is_shard for s in shards) and not whole.is_shard
    for m in [whole, *shards]:
        if batch:
            m.fit(x, y)
        else:
            for i in range(0, len(x), 50):
                m.partial_fit(np.ascontiguousarray(x[i : i + 50]), y[i : i + 50])
    merged = ClassifierCore.merge(shards[::-1])
    assert merged.to_bytes() == whole.to_bytes()
    # Shards pickle through their own file kind, range included.
    again = [pickle.loads(pickle.dumps(s)) for s in shards]
    assert [s.shard_range for s in again] == [(0, 3), (3, 7)]
    assert ClassifierCore.merge(again).to_bytes() == whole.to_bytes()
    combined = ClassifierCore.combine_proba([s.predict_proba_sum(x) for s in shards])
    np.testing.assert_allclose(combined, whole.predict_proba(x), rtol=1e-13)
    one = ClassifierCore.combine_proba([whole.predict_proba_sum(x)])
    assert np.array_equal(one, whole.predict_proba(x))


def test_split_is_the_inverse_of_merge():
    x, y, yr = data()
    clf = ClassifierCore(n_trees=10, seed=1)
    clf.fit(x, y)
    parts = clf.split(3)
    assert [p.shard_range for p in parts] == [(0, 4), (4, 7), (7, 10)]
    assert ClassifierCore.merge(parts).to_bytes() == clf.to_bytes()
    reg = RegressorCore(n_trees=6, seed=2)
    reg.fit(x, yr)
    rparts = reg.split(2)
    assert RegressorCore.merge(rparts).to_bytes() == reg.to_bytes()
    mean, var, between = RegressorCore.combine_predictions([p.predict_sums(x) for p in rparts])
    want = reg.predict(x)
    for got, w in zip((mean, var, between), want):
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-12)


def test_shards_that_do_not_fit_are_refused():
    x, y, _ = data()
    clf = ClassifierCore(n_trees=6, seed=0)
    clf.fit(x, y)
    a, b, c = clf.split(3)
    with pytest.raises(ValueError, match="missing"):
        ClassifierCore.merge([a, c])
    with pytest.raises(ValueError, match="missing"):
        ClassifierCore.combine_proba([a.predict_proba_sum(x), c.predict_proba_sum(x)])
    with pytest.raises(ValueError):
        clf.new_shard(5, 3)
    with pytest.raises(ValueError):
        a.add_trees(1)


def polya_queries(x):
    """The training rows' neighbours and rows far outside the domain."""
    far = np.full((3, x.shape[1]), 7.0)
    return np.ascontiguousarray(np.vstack([x[:40] + 0.01, far]))


def assert_scores_close(got, want):
    mass, log_density, outside = got
    np.testing.assert_allclose(mass, want[0], rtol=1e-12, atol=0)
    assert np.array_equal(np.isinf(log_density), np.isinf(want[1]))
    np.testing.assert_allclose(log_density, want[1], rtol=1e-12, atol=1e-12)
    assert np.array_equal(outside, want[2])


@pytest.mark.parametrize("variant", ["streaming", "batch"])
@pytest.mark.parametrize("batch", [True, False])
def test_polya_shards_merge_bit_for_bit(variant, batch):
    x, _, _ = data()
    q = polya_queries(x)
    whole = PolyaCore(n_trees=7, seed=4, variant=variant, window=250)
    shards = [whole.new_shard(0, 3), whole.new_shard(3, 4)]
    assert [s.shard_range for s in shards] == [(0, 3), (3, 7)]
    assert all(s.is_shard for s in shards) and not whole.is_shard
    for m in [whole, *shards]:
        if batch:
            m.fit(x)
        else:
            for i in range(0, len(x), 50):
                m.partial_fit(np.ascontiguousarray(x[i : i + 50]))
    want = whole.evaluate(q)
    assert want[2].any() and not want[2].all()
    merged = PolyaCore.merge(shards[::-1])
    assert merged.to_bytes() == whole.to_bytes()
    for got, w in zip(merged.evaluate(q), want):
        assert np.array_equal(got, w)
    # Shards pickle through their own file kind, range included.
    again = [pickle.loads(pickle.dumps(s)) for s in shards]
    assert [s.shard_range for s in again] == [(0, 3), (3, 7)]
    assert PolyaCore.merge(again).to_bytes() == whole.to_bytes()
    # Partial scores combine into the whole forest's; one part exactly.
    parts = [s.evaluate_sum(q) for s in shards]
    assert parts[1][:3] == (3, 4, 7) and len(parts[1][3]) == len(q)
    assert_scores_close(PolyaCore.combine_evaluations(parts[::-1]), want)
    one = PolyaCore.combine_evaluations([whole.evaluate_sum(q)])
    for got, w in zip(one, want):
        assert np.array_equal(got, w)
    # A shard's per-tree masses are its own columns of the forest's.
    columns = np.hstack([s.mass_per_tree(q) for s in shards])
    assert np.array_equal(columns, whole.mass_per_tree(q))
    # What needs all the trees is refused on a shard.
    with pytest.raises(ValueError, match="merge the shards"):
        shards[0].evaluate(q)
    with pytest.raises(ValueError, match="merge the shards"):
        shards[0].is_anomaly(q, 0.01, 0.5)


@pytest.mark.parametrize("variant", ["streaming", "batch"])
def test_polya_split_merge_and_misaligned_parts(variant):
    x, _, _ = data()
    q = polya_queries(x)
    core = PolyaCore(n_trees=10, seed=1, variant=variant)
    unfitted = core.split(2)
    core.fit(x)
    parts = core.split(3)
    assert [p.shard_range for p in parts] == [(0, 4), (4, 7), (7, 10)]
    assert PolyaCore.merge(parts).to_bytes() == core.to_bytes()
    # Unfitted shards keep their ranges (also pickled) until they are fitted.
    unfitted = [pickle.loads(pickle.dumps(s)) for s in unfitted]
    assert [s.shard_range for s in unfitted] == [(0, 5), (5, 10)]
    for s in unfitted:
        s.fit(x)
    assert PolyaCore.merge(unfitted).to_bytes() == core.to_bytes()

    # Arrays from an RPC layer may be misaligned views: they are copied, not refused.
    def misaligned(a):
        raw = np.zeros(a.nbytes + 1, dtype=np.uint8)
        view = raw[1:].view(a.dtype)
        view[:] = a
        assert a.dtype == np.bool_ or not view.flags.aligned
        return view

    sums = [p.evaluate_sum(q) for p in parts]
    moved = [(*s[:3], misaligned(s[3]), misaligned(s[4]), s[5]) for s in sums]
    assert_scores_close(PolyaCore.combine_evaluations(moved), core.evaluate(q))
    with pytest.raises(ValueError, match="missing"):
        PolyaCore.combine_evaluations(sums[:2])
    with pytest.raises(ValueError, match="overlap"):
        PolyaCore.combine_evaluations([sums[0], *sums])
    with pytest.raises(ValueError, match="missing"):
        PolyaCore.merge([parts[0], parts[2]])
    other = PolyaCore(n_trees=10, seed=2, variant=variant).new_shard(0, 4)
    other.fit(x)
    with pytest.raises(ValueError, match="parameters"):
        PolyaCore.merge([other, parts[1], parts[2]])
