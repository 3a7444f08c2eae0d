"""MondrianPolyaForest: scikit-learn's outlier-detector checks, river's anomaly-detector
interface, streaming, windows and forgetting, pickling, the GIL, and bad input."""

import math
import pickle

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

import mondrian_ml
from mondrian_ml import MondrianPolyaForest


# Every check of scikit-learn's suite applies and passes, for both variants and with a
# window smaller than most of the checks' data.
@parametrize_with_checks(
    [
        MondrianPolyaForest(n_estimators=10, random_state=0),
        MondrianPolyaForest(n_estimators=10, variant="batch", random_state=0),
        MondrianPolyaForest(n_estimators=10, window=40, random_state=0),
        MondrianPolyaForest(n_estimators=10, contamination=0.1, random_state=0),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def blob():
    """A Gaussian blob with a few far points appended (the last 10 rows)."""
    rng = np.random.default_rng(3)
    inliers = rng.normal(size=(600, 3))
    outliers = rng.uniform(-6, 6, size=(10, 3))
    outliers[:, 0] = 6 * np.sign(outliers[:, 0])
    return np.ascontiguousarray(np.vstack([inliers, outliers]))


@pytest.mark.parametrize("variant", ["streaming", "batch"])
def test_far_points_score_lower_and_are_flagged(blob, variant):
    m = MondrianPolyaForest(n_estimators=30, variant=variant, random_state=0).fit(blob)
    s = m.score_samples(blob)
    # Each far point scores below the median inlier (they sit at the edge of the box, in
    # cells of their own).
    assert (s[-10:] < np.median(s[:-10])).all()
    # "auto": flagged iff the mean mass is below 1/n.
    mass = 10.0 ** s
    assert np.array_equal(m.predict(blob) == -1, mass < 1.0 / len(blob))
    assert np.allclose(m.decision_function(blob), s - m.offset_)


def test_contamination_flags_that_share_of_the_training_rows(blob):
    m = MondrianPolyaForest(n_estimators=20, contamination=0.05, random_state=0).fit(blob)
    share = (m.predict(blob) == -1).mean()
    # The offset is the 5th percentile of the training scores: ties aside, 5 % fall below.
    assert abs(share - 0.05) <= 2 / len(blob)


def test_outside_the_domain(blob):
    m = MondrianPolyaForest(n_estimators=10, random_state=0).fit(blob)
    far = np.array([[100.0, 0.0, 0.0]])
    assert m.score_samples(far)[0] == -math.inf
    assert m.log_density(far)[0] == -math.inf
    assert m.out_of_domain(far)[0]
    assert m.predict(far)[0] == -1
    assert (m.mass_per_tree(far) == 0).all()


def test_eps_phi_rule_is_the_order_statistic(blob):
    m = MondrianPolyaForest(n_estimators=20, random_state=1).fit(blob)
    per_tree = m.mass_per_tree(blob)
    for phi in [0.05, 0.5, 1.0]:
        k = math.ceil(phi * 20)
        kth = np.sort(per_tree, axis=1)[:, k - 1]
        assert np.array_equal(m.order_stat_score(blob, phi), kth)
        for eps in [1e-4, 1e-3, 1e-2]:
            assert np.array_equal(m.is_anomaly(blob, eps, phi), kth <= eps)
            # The definition: at most eps in at least phi * M trees.
            assert np.array_equal(
                m.is_anomaly(blob, eps, phi), (per_tree <= eps).sum(axis=1) >= k
            )
    with pytest.raises(ValueError, match="phi"):
        m.is_anomaly(blob, 0.01, 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        m.is_anomaly(blob, 2.0, 0.5)


def test_score_is_the_mean_of_the_tree_masses(blob):
    m = MondrianPolyaForest(n_estimators=15, random_state=2).fit(blob)
    assert np.allclose(10.0 ** m.score_samples(blob), m.mass_per_tree(blob).mean(axis=1))


def test_stream_scores_equal_partial_fit_then_score_row_by_row(blob):
    a = MondrianPolyaForest(n_estimators=8, window=100, random_state=5)
    streamed = a.score_stream(blob[:300])
    b = MondrianPolyaForest(n_estimators=8, window=100, random_state=5)
    one_by_one = []
    for row in blob[:300]:
        b.partial_fit(row[None, :])
        one_by_one.append(b.score_samples(row[None, :])[0])
    assert np.array_equal(streamed, np.array(one_by_one))
    assert a.n_points_ == 100 and list(a.point_ids_) == list(range(200, 300))
    assert np.array_equal(a.score_samples(blob), b.score_samples(blob))


def test_window_equals_a_fit_on_the_last_points_in_law_and_forget_by_id(blob):
    m = MondrianPolyaForest(n_estimators=5, random_state=0).fit(blob[:50])
    m.forget([0, 1, 2])
    assert m.n_points_ == 47 and 0 not in m.point_ids_
    with pytest.raises(ValueError):
        m.forget([1])
    # Forgetting everything but one point leaves a single-point forest: mass 1 there.
    m.forget(list(range(3, 49)))
    assert m.score_samples(blob[49:50])[0] == 0.0


def test_river_interface(blob):
    names = ["a", "b", "c"]
    m = MondrianPolyaForest(n_estimators=10, random_state=0)
    assert m.score_one({"a": 0.0, "b": 0.0, "c": 0.0}) == 0.0
    for row in blob[:200]:
        m.learn_one(dict(zip(names, row)))
    near = m.score_one({"a": 0.0, "b": 0.0, "c": 0.0})
    far = m.score_one({"a": 50.0, "b": 0.0, "c": 0.0})
    assert far == 1000.0 and near < 3
    # The same as partial_fit row by row with the same seed.
    p = MondrianPolyaForest(n_estimators=10, random_state=0)
    for row in blob[:200]:
        p.partial_fit(row[None, :])
    assert -p.score_samples(blob[:1])[0] == pytest.approx(m.score_one(dict(zip(names, blob[0]))))


def _anomaly_stream(n, seed):
    """(x, y) pairs as river's anomaly checks take them: a Gaussian cloud with 5 % uniform
    outliers (y = 1), in place of the CreditCard set those checks download."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        y = int(rng.random() < 0.05)
        row = rng.uniform(-8, 8, 4) if y else rng.normal(size=4)
        out.append(({f"v{k}": float(v) for k, v in enumerate(row)}, y))
    return out


def test_river_face_passes_rivers_checks():
    # river's dataset checks read CreditCard, which they download; each runs here on a
    # local stream of the same form instead (the same check functions, the same sizes).
    from river import base, checks

    from mondrian_ml import river as faces

    model = faces.MondrianPolyaForest(n_estimators=5, seed=0)
    assert isinstance(model, base.AnomalyDetector)
    assert model._unit_test_skips() == set()
    names = []
    for check in checks.yield_checks(model):
        keywords = getattr(check, "keywords", None) or {}
        if "dataset" in keywords:
            n = 10_000 if check.func.__name__ == "check_bounded_memory_growth" else 1000
            check.func(model.clone(), dataset=_anomaly_stream(n, len(names)))
        else:
            check(model.clone())
        names.append(getattr(check, "__name__", ""))
    assert any("roc_auc" in n for n in names) and len(names) > 20


def test_pickle_save_and_load_give_the_same_scores(blob, tmp_path):
    for variant in ["streaming", "batch"]:
        m = MondrianPolyaForest(n_estimators=10, variant=variant, random_state=0).fit(blob)
        twin = pickle.loads(pickle.dumps(m))
        assert np.array_equal(twin.score_samples(blob), m.score_samples(blob))
        assert np.array_equal(twin.log_density(blob), m.log_density(blob))
        path = tmp_path / f"{variant}.bin"
        m.save(path)
        loaded = mondrian_ml.load(path)
        assert isinstance(loaded, MondrianPolyaForest)
        assert loaded.variant == variant
        assert np.array_equal(loaded.score_samples(blob), m.score_samples(blob))
        assert np.array_equal(loaded.predict(blob), m.predict(blob))
        # It goes on learning.
        loaded.partial_fit(blob[:5])
        assert loaded.n_points_ == len(blob) + 5


def test_gil_is_released_during_training(runs_without_gil):
    X = np.random.default_rng(0).normal(size=(20000, 4))
    m = MondrianPolyaForest(n_estimators=40, random_state=0, n_jobs=1)
    assert runs_without_gil(lambda: m.fit(X))


def test_explain_names_the_dimension_that_made_a_point_rare(blob):
    m = MondrianPolyaForest(n_estimators=30, random_state=0).fit(blob)
    # Inside the box in every feature but far out along the first, where no data lie.
    x = np.array([5.5, 0.0, 0.0])
    e = m.explain(x)
    assert len(e["attribution"]) == 3 and abs(sum(e["attribution"]) - 1) < 1e-9
    assert int(np.argmax(e["attribution"])) == 0
    assert len(e["trees"]) == 30
    for t in e["trees"]:
        assert t["kind"] in {"TypeI", "TypeII", "Complement", "Root"}
        assert t["critical_step"] is None or 0 <= t["critical_step"] < len(t["steps"])
        # The mass is the product of the shares along the path.
        prod = math.prod(s["share"] for s in t["steps"])
        assert prod == pytest.approx(t["mass"], rel=1e-9)
    assert e["mass"] == pytest.approx(np.mean([t["mass"] for t in e["trees"]]), rel=1e-12)
    with pytest.raises(ValueError, match="features"):
        m.explain([1.0, 2.0])


def test_bad_input_is_refused_and_changes_nothing(blob):
    m = MondrianPolyaForest(n_estimators=5, random_state=0).fit(blob)
    before = m.score_samples(blob)
    bad = blob[:3].copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError):
        m.partial_fit(bad)
    bad[1, 2] = np.inf
    with pytest.raises(ValueError):
        m.partial_fit(bad)
    with pytest.raises(ValueError):
        m.score_samples(blob[:, :2])
    assert np.array_equal(m.score_samples(blob), before)
    assert m.n_points_ == len(blob)
    with pytest.raises(ValueError):
        MondrianPolyaForest(window=0).fit(blob)
    with pytest.raises(ValueError):
        MondrianPolyaForest(gamma=-1.0).fit(blob)
    with pytest.raises(ValueError):
        MondrianPolyaForest(variant="sideways").fit(blob)
    with pytest.raises(ValueError):
        MondrianPolyaForest(variant="batch", max_depth=None).fit(blob)
    with pytest.raises(ValueError):
        MondrianPolyaForest().fit(np.empty((0, 3)))
    with pytest.raises(ValueError):
        MondrianPolyaForest(contamination=0.9).fit(blob)


def test_memory_guard(blob):
    with pytest.raises(MemoryError):
        MondrianPolyaForest(n_estimators=1000, max_memory="1M").fit(blob)
