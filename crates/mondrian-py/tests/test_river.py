"""The river interface: learn_one / predict_proba_one / predict_one on the same model."""

import numpy as np
import pytest

from mondrian_ml import MondrianForestClassifier

river = pytest.importorskip("river")
from river import base, datasets, evaluate, forest, metrics  # noqa: E402


def as_dicts(X, names):
    return [dict(zip(names, row)) for row in X.tolist()]


def test_is_a_river_classifier():
    assert isinstance(MondrianForestClassifier(), base.Classifier)
    assert metrics.Accuracy().works_with(MondrianForestClassifier())


def test_untrained_model_answers_like_river():
    # progressive_val_score predicts before it learns the first example.
    clf = MondrianForestClassifier()
    assert clf.predict_proba_one({"a": 1.0}) == {}
    assert clf.predict_one({"a": 1.0}) is None


def test_progressive_validation_on_phishing_beside_amf():
    # Phishing ships with river (1250 examples, 9 features in [0, 1]).
    ranges = [(0.0, 1.0)] * 9
    ours = evaluate.progressive_val_score(
        datasets.Phishing(),
        MondrianForestClassifier(n_estimators=10, feature_ranges=ranges, random_state=0),
        metrics.Accuracy(),
    )
    amf = evaluate.progressive_val_score(
        datasets.Phishing(), forest.AMFClassifier(n_estimators=10, seed=0), metrics.Accuracy()
    )
    # River's AMF scores about 0.88 here; the Mondrian forest must be in the same league.
    assert ours.get() > 0.8
    assert ours.get() > amf.get() - 0.05


def test_learn_one_equals_partial_fit_one_row_at_a_time(small):
    X, y, Xt, _ = small
    names = [f"f{i}" for i in range(X.shape[1])]
    ranges = np.c_[X.min(axis=0), X.max(axis=0)]
    a = MondrianForestClassifier(n_estimators=8, random_state=4, feature_ranges=ranges)
    b = MondrianForestClassifier(n_estimators=8, random_state=4, feature_ranges=ranges)
    for xi, yi, row in zip(as_dicts(X[:200], names), y[:200], X[:200]):
        a.learn_one(xi, yi)
        b.partial_fit(row[None, :], [yi])
    # Labels appear in a different order (first appearance vs sorted per batch), so
    # compare probabilities by label.
    # A model that learnt named dict features warns, as scikit-learn does, when asked
    # about an unnamed array.
    with pytest.warns(UserWarning, match="feature names"):
        pa = a.predict_proba(Xt)
    pb = b.predict_proba(Xt)
    order = [list(a.classes_).index(c) for c in b.classes_]
    np.testing.assert_array_equal(pa[:, order], pb)
    one = a.predict_proba_one(as_dicts(Xt[:1], names)[0])
    np.testing.assert_array_equal([one[c] for c in a.classes_], pa[0])


def test_feature_names_in_order_of_first_appearance():
    clf = MondrianForestClassifier(n_estimators=5, random_state=0, feature_ranges=[(0, 1)] * 3)
    rng = np.random.default_rng(0)
    for _ in range(100):
        v = rng.random(3)
        clf.learn_one({"z": v[0], "a": v[1], "m": v[2]}, int(v[0] > 0.5))
    assert list(clf.feature_names_in_) == ["z", "a", "m"]
    x = {"z": 0.9, "a": 0.1, "m": 0.4}
    shuffled = {"m": 0.4, "z": 0.9, "a": 0.1}
    assert clf.predict_proba_one(x) == clf.predict_proba_one(shuffled)
    # The array interface sees the columns in that order (and warns that they are unnamed).
    with pytest.warns(UserWarning, match="feature names"):
        p = clf.predict_proba(np.array([[0.9, 0.1, 0.4]]))[0]
    np.testing.assert_allclose(p, list(clf.predict_proba_one(x).values()))
    assert clf.predict_one(x) == 1


def test_new_labels_of_any_type():
    clf = MondrianForestClassifier(n_estimators=5, random_state=0, feature_ranges=[(0, 1)])
    clf.learn_one({"x": 0.1}, "low")
    clf.learn_one({"x": 0.9}, "high")
    clf.learn_one({"x": 0.5}, True)
    assert clf.classes_.tolist() == ["low", "high", True]
    p = clf.predict_proba_one({"x": 0.2})
    assert set(p) == {"low", "high", True}
    assert abs(sum(p.values()) - 1) < 1e-12
    assert clf.predict_one({"x": 0.05}) == "low"


def test_bad_dicts_are_refused_and_change_nothing():
    clf = MondrianForestClassifier(n_estimators=5, random_state=0, feature_ranges=[(0, 1)] * 2)
    clf.learn_one({"a": 0.1, "b": 0.2}, 0)
    clf.learn_one({"a": 0.8, "b": 0.7}, 1)
    before = clf.predict_proba_one({"a": 0.5, "b": 0.5})
    with pytest.raises(ValueError, match="missing"):
        clf.learn_one({"a": 0.3}, 0)
    with pytest.raises(ValueError, match="not in the first example"):
        clf.learn_one({"a": 0.3, "b": 0.3, "c": 1.0}, 0)
    with pytest.raises(ValueError, match="numbers"):
        clf.learn_one({"a": "high", "b": 0.3}, 0)
    with pytest.raises(ValueError, match="finite|NaN|nan"):
        clf.learn_one({"a": float("nan"), "b": 0.3}, 2)
    with pytest.raises(ValueError, match="missing"):
        clf.predict_one({"b": 0.3})
    assert clf.classes_.tolist() == [0, 1]
    assert clf.predict_proba_one({"a": 0.5, "b": 0.5}) == before


# ---------------------------------------------------------------------------- river faces
# mondrian_ml.river holds river.base.Classifier / Regressor subclasses over the same core,
# which pass river's own estimator checks (cloning, mutation, parameters, tags, memory,
# emerging and disappearing features, pickling, seeding), each check a test here.

from river import checks  # noqa: E402

from mondrian_ml import river as faces  # noqa: E402

FACES = [
    faces.MondrianForestClassifier(),
    faces.MondrianForestClassifier(n_estimators=10, window=50, bagging=True),
    faces.MondrianForestRegressor(),
    faces.MondrianForestRegressor(mode="exact", window=50),
]


def _river_checks():
    for i, model in enumerate(FACES):
        for check in checks.yield_checks(model):
            if check.__name__ in model._unit_test_skips():
                continue
            yield pytest.param(model, check, id=f"{type(model).__name__}{i}-{check.__name__}")


@pytest.mark.parametrize("model,check", list(_river_checks()))
def test_river_estimator_checks(model, check):
    check(model.clone())


def test_faces_are_river_estimators_and_skip_nothing():
    assert isinstance(faces.MondrianForestClassifier(), base.Classifier)
    assert isinstance(faces.MondrianForestRegressor(), base.Regressor)
    for model in FACES:
        assert model._unit_test_skips() == set()
    assert faces.MondrianForestClassifier(seed=3).clone()._get_params()["seed"] == 3


def _phishing(n):
    return list(datasets.Phishing().take(n))


def test_classifier_face_is_the_scikit_learn_model_with_sorted_features():
    # On complete dicts the face hands the rows, in sorted feature order, to the estimator
    # of mondrian_ml: the same seed gives the same probabilities to the last bit.
    data = _phishing(300)
    face = faces.MondrianForestClassifier(n_estimators=12, seed=3)
    plain = MondrianForestClassifier(n_estimators=12, random_state=3)
    for x, y in data:
        face.learn_one(x, y)
        plain.learn_one({k: x[k] for k in sorted(x)}, y)
    for x, _ in data[:50]:
        assert face.predict_proba_one(x) == plain.predict_proba_one(x)
    assert face.forest_.feature_names_in_.tolist() == sorted(data[0][0])


def test_key_order_does_not_matter():
    data = _phishing(200)
    a = faces.MondrianForestClassifier(n_estimators=8, seed=1)
    b = faces.MondrianForestClassifier(n_estimators=8, seed=1)
    for x, y in data:
        a.learn_one(x, y)
        b.learn_one(dict(reversed(list(x.items()))), y)
    for x, _ in data[:40]:
        assert a.predict_proba_one(x) == b.predict_proba_one(x)


def test_missing_features_take_the_mean_and_unknown_ones_are_ignored():
    rng = np.random.default_rng(2)
    model = faces.MondrianForestRegressor(n_estimators=6, seed=0)
    seen_b = []
    for i in range(120):
        a, b = rng.random(2)
        x = {"a": a, "b": b}
        if i % 3 == 0:
            del x["b"]  # learnt with b filled by the mean of the b's learnt so far
        else:
            seen_b.append(b)
        model.learn_one(x, a + b)
    mean_b = sum(seen_b) / len(seen_b)
    assert model.predict_one({"a": 0.3}) == model.predict_one({"a": 0.3, "b": mean_b})
    assert model.predict_one({"a": 0.3, "b": 0.1, "new": 5.0}) == model.predict_one(
        {"a": 0.3, "b": 0.1}
    )
    mean, std = model.predict_std_one({"a": 0.3, "b": 0.1})
    assert mean == model.predict_one({"a": 0.3, "b": 0.1}) and std > 0


def test_ranges_name_the_features_and_fill_before_any_value():
    model = faces.MondrianForestClassifier(
        n_estimators=5, seed=0, feature_ranges={"b": (0.0, 2.0), "a": (0.0, 1.0)}
    )
    model.learn_one({"a": 0.2, "z": 9.0}, 0)  # z is not a feature; b takes its range's middle
    model.learn_one({"a": 0.9, "b": 1.5}, 1)
    assert model.forest_.feature_names_in_.tolist() == ["a", "b"]
    np.testing.assert_array_equal(model.forest_._core.point_ids(), [0, 1])
    assert model.predict_proba_one({"a": 0.2}) == model.predict_proba_one({"a": 0.2, "b": 1.5})
    assert model._raw_memory_usage > 0


def test_face_progressive_validation_beside_amf():
    ours = evaluate.progressive_val_score(
        datasets.Phishing(), faces.MondrianForestClassifier(n_estimators=10, seed=0),
        metrics.Accuracy(),
    )
    amf = evaluate.progressive_val_score(
        datasets.Phishing(), forest.AMFClassifier(n_estimators=10, seed=0), metrics.Accuracy()
    )
    assert ours.get() > amf.get() - 0.05
