"""The shard methods of the cores (tree-parallel shards of one forest), without Dask."""

import pickle

import numpy as np
import pytest

from mondrian_ml._core import ClassifierCore, RegressorCore


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
