"""Pickle and deepcopy go through the library's checksummed format."""

import copy
import pickle

import numpy as np
import pytest

from mondrian_ml import MondrianForestClassifier, MondrianForestRegressor
from mondrian_ml._core import ClassifierCore


@pytest.fixture
def fitted(small):
    X, y, _, _ = small
    return MondrianForestClassifier(n_estimators=10, random_state=3).fit(X, y)


def test_pickle_round_trip_predicts_identically(fitted, small):
    _, _, Xt, _ = small
    back = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(back.predict_proba(Xt), fitted.predict_proba(Xt))
    assert back.get_params() == fitted.get_params()
    assert list(back.classes_) == list(fitted.classes_)


def test_deepcopy_is_independent(fitted, small):
    X, y, Xt, _ = small
    twin = copy.deepcopy(fitted)
    np.testing.assert_array_equal(twin.predict_proba(Xt), fitted.predict_proba(Xt))
    twin.partial_fit(Xt, np.zeros(len(Xt), dtype=int))
    assert not np.array_equal(twin.predict_proba(Xt), fitted.predict_proba(Xt))


def test_training_continues_identically_after_unpickling(fitted, small):
    # The trees' random generators are part of the state.
    _, _, Xt, yt = small
    back = pickle.loads(pickle.dumps(fitted))
    fitted.partial_fit(Xt, yt)
    back.partial_fit(Xt, yt)
    np.testing.assert_array_equal(back.predict_proba(Xt), fitted.predict_proba(Xt))


def test_pickle_is_no_larger_than_the_saved_file(fitted, tmp_path):
    path = tmp_path / "forest.mondrian"
    fitted.save(path)
    saved = path.stat().st_size
    pickled = len(pickle.dumps(fitted, protocol=pickle.HIGHEST_PROTOCOL))
    # The pickle holds the saved file's bytes once, plus the estimator's parameters and
    # classes: a few hundred bytes.
    assert saved <= pickled <= saved + 1024, (saved, pickled)
    # The saved file is the library's format: the core reads it back.
    core = ClassifierCore.load(str(path))
    assert core.to_bytes() == fitted._core.to_bytes()


def test_unfitted_estimator_pickles():
    clf = pickle.loads(pickle.dumps(MondrianForestClassifier(n_estimators=3)))
    assert clf.n_estimators == 3


def test_corrupt_bytes_are_refused(fitted):
    blob = bytearray(fitted._core.to_bytes())
    blob[len(blob) // 2] ^= 0xFF
    with pytest.raises(ValueError, match="(?i)checksum|corrupt"):
        ClassifierCore.from_bytes(bytes(blob))
    with pytest.raises(ValueError):
        ClassifierCore.from_bytes(bytes(blob[:40]))
    with pytest.raises(ValueError):
        ClassifierCore.from_bytes(b"not a model")


def test_a_failed_save_leaves_the_old_file_whole(fitted, small, tmp_path):
    # Saving writes a temporary file beside the target and renames it over the target
    # once it is complete: a save that fails leaves the old file as it was.
    X, y, _, _ = small
    path = tmp_path / "forest.mondrian"
    fitted.save(path)
    before = path.read_bytes()
    other = MondrianForestClassifier(n_estimators=3, random_state=4).fit(X, y)
    with pytest.raises(OSError, match="no-such-dir"):
        other.save(tmp_path / "no-such-dir" / "forest.mondrian")
    assert path.read_bytes() == before
    other.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["forest.mondrian"]
    assert ClassifierCore.load(str(path)).to_bytes() == other._core.to_bytes()


@pytest.mark.parametrize("Model", [MondrianForestClassifier, MondrianForestRegressor])
def test_a_compact_model_predicts_the_same_from_fewer_bytes(Model):
    rng = np.random.default_rng(3)
    # Integer-valued features, as pixel intensities: few distinct values per feature.
    X = rng.integers(0, 50, size=(1500, 8)).astype(float)
    y = (X[:, 0] + X[:, 1] > 50).astype(int)
    Xt = rng.integers(0, 50, size=(200, 8)).astype(float)
    m = Model(n_estimators=10, random_state=0).fit(X, y)
    before = m.predict_proba(Xt) if hasattr(m, "predict_proba") else m.predict(Xt, return_std=True)
    plain = len(pickle.dumps(m))
    assert m.compact() is m
    blob = pickle.dumps(m)
    assert len(blob) < 0.5 * plain
    back = pickle.loads(blob)
    after = back.predict_proba(Xt) if hasattr(back, "predict_proba") else back.predict(Xt, return_std=True)
    np.testing.assert_array_equal(np.asarray(after), np.asarray(before))
    with pytest.raises(ValueError, match="compacted"):
        back.partial_fit(X[:5], y[:5])
    with pytest.raises(ValueError, match="compacted"):
        back.forget([0])
    # fit trains an ordinary model again.
    back.fit(X, y).partial_fit(X[:5], y[:5])
