"""numpy input: no copy when the layout allows, float32 and float64, GIL released."""

import threading

import numpy as np

from mondrian_ml import MondrianForestClassifier


def address(a):
    return a.__array_interface__["data"][0]


def test_float64_and_float32_are_read_in_place(small):
    X, y, Xt, _ = small
    for dtype in (np.float64, np.float32):
        Xd = np.ascontiguousarray(X, dtype=dtype)
        Xtd = np.ascontiguousarray(Xt, dtype=dtype)
        clf = MondrianForestClassifier(n_estimators=3, random_state=0)
        clf.fit(Xd, y)
        assert clf._core._last_input_address == address(Xd), dtype
        clf.predict_proba(Xtd)
        assert clf._core._last_input_address == address(Xtd), dtype
        clf.partial_fit(Xtd, np.zeros(len(Xtd), dtype=int))
        assert clf._core._last_input_address == address(Xtd), dtype


def test_read_only_arrays_are_read_in_place(small):
    X, y, Xt, _ = small
    Xr = X.copy()
    Xr.setflags(write=False)
    clf = MondrianForestClassifier(n_estimators=3, random_state=0).fit(Xr, y)
    assert clf._core._last_input_address == address(Xr)


def test_other_layouts_are_converted_with_the_same_result(small):
    X, y, Xt, _ = small
    ref = MondrianForestClassifier(n_estimators=5, random_state=2).fit(X, y).predict_proba(Xt)
    fortran = np.asfortranarray(X)
    clf = MondrianForestClassifier(n_estimators=5, random_state=2).fit(fortran, y)
    assert clf._core._last_input_address != address(fortran)  # a C-ordered copy was needed
    np.testing.assert_array_equal(clf.predict_proba(np.asfortranarray(Xt)), ref)
    strided = np.repeat(Xt, 2, axis=0)[::2]
    np.testing.assert_array_equal(clf.predict_proba(strided), ref)
    np.testing.assert_array_equal(clf.predict_proba(Xt.tolist()), ref)


def test_float32_gives_the_float64_result_on_representable_values(small):
    X, y, Xt, _ = small
    X32, Xt32 = X.astype(np.float32), Xt.astype(np.float32)
    a = MondrianForestClassifier(n_estimators=5, random_state=2).fit(X32, y).predict_proba(Xt32)
    b = (
        MondrianForestClassifier(n_estimators=5, random_state=2)
        .fit(X32.astype(np.float64), y)
        .predict_proba(Xt32.astype(np.float64))
    )
    np.testing.assert_array_equal(a, b)


def test_integer_input_is_accepted(small):
    X, y, Xt, _ = small
    Xi = np.round(X * 100).astype(np.int64)
    clf = MondrianForestClassifier(n_estimators=3, random_state=0).fit(Xi, y)
    assert clf.predict(np.round(Xt * 100).astype(np.int32)).shape == (len(Xt),)


def test_gil_is_released_during_training(satimage, runs_without_gil):
    X, y, _, _ = satimage
    X = np.tile(X, (3, 1))
    y = np.tile(y, 3)
    clf = MondrianForestClassifier(n_estimators=60, random_state=0, n_jobs=1)
    assert runs_without_gil(lambda: clf.fit(X, y))


def test_concurrent_predictions_from_threads(small):
    X, y, Xt, _ = small
    clf = MondrianForestClassifier(n_estimators=10, random_state=0).fit(X, y)
    ref = clf.predict_proba(Xt)
    out = [None] * 4

    def work(i):
        out[i] = clf.predict_proba(Xt)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in out:
        np.testing.assert_array_equal(p, ref)
