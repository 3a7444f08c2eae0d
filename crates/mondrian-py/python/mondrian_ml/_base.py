"""What the Mondrian forest estimators share: parameters common to all of them, fitted
state, river dict handling and persistence."""

from __future__ import annotations

import inspect
import numbers
import operator
import os
import sys
import warnings

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

_FLOATS = [np.float64, np.float32]
_CHECKS_ALL_ZERO = "allow_all_zero_weights" in inspect.signature(_check_sample_weight).parameters
# The core takes counts and ids as unsigned 64-bit integers.
_UNSIGNED_LIMIT = 1 << 64


def _is_integer(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


class _Progress:
    """The display of ``verbose=``: a tqdm bar when tqdm is installed, else a plain line to
    stderr per report. It is the core's progress callback: called with (trees done, trees
    in the pass) from the worker threads, which take the GIL to call it."""

    def __init__(self, what, total):
        self._what = what
        self._total = total
        self._done = 0
        try:
            from tqdm.auto import tqdm
        except ImportError:
            self._bar = None
        else:
            self._bar = tqdm(total=total, desc=what, unit="tree", file=sys.stderr)

    def __call__(self, done, total):
        # Two groups of trees may report out of order: show the largest count.
        if done <= self._done:
            return
        step, self._done = done - self._done, done
        if self._bar is not None:
            self._bar.update(step)
        else:
            print(f"{self._what}: {done}/{total} trees", file=sys.stderr, flush=True)

    def close(self):
        if self._bar is not None:
            self._bar.close()


class _ForestCommon:
    """What every estimator of the package shares: ``n_jobs``, ``random_state``,
    ``feature_ranges``, ``window``, the fitted core in ``_core``, river dicts, the points
    held and forgetting, and the library's file format.

    Parameter values are checked by the library, whose message comes through as a
    ``ValueError``; Python checks only what the library cannot see: the types (an int where
    a count goes, a bool where a flag goes: ``bool("no")`` is True) and the conventions of
    scikit-learn (``n_jobs``, ``random_state``)."""

    def _n_threads(self):
        n_jobs = self.n_jobs
        if n_jobs is None:
            return 1
        if not _is_integer(n_jobs) or n_jobs == 0:
            raise ValueError(f"n_jobs must be a non-zero integer or None, got {n_jobs!r}")
        if n_jobs < 0:
            return max(1, (os.cpu_count() or 1) + 1 + int(n_jobs))
        return int(n_jobs)

    def _check_types(self, *, counts=(), reals=(), flags=(), strings=()):
        """Each named parameter has the type the core takes: ``counts`` an integer from 0
        to 2**64 - 1 (``window`` may also be None), ``reals`` a real number, ``flags`` a
        bool, ``strings`` a str. Their ranges are the library's to check."""
        for name in counts:
            v = getattr(self, name)
            if name == "window" and v is None:
                continue
            if not _is_integer(v) or not 0 <= v < _UNSIGNED_LIMIT:
                none = " or None" if name == "window" else ""
                raise ValueError(f"{name} must be a non-negative integer{none}, got {v!r}")
        for name in reals:
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or isinstance(v, bool):
                raise ValueError(f"{name} must be a real number, got {v!r}")
        for name in flags:
            # A string such as "no" is not False.
            v = getattr(self, name)
            if not isinstance(v, (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {v!r}")
        for name in strings:
            v = getattr(self, name)
            if not isinstance(v, str):
                raise ValueError(f"{name} must be a string, got {v!r}")

    def _window(self):
        return None if self.window is None else int(self.window)

    def _seed(self):
        rs = self.random_state
        if isinstance(rs, numbers.Integral) and not isinstance(rs, bool):
            if rs < 0:
                raise ValueError(f"random_state must be non-negative, got {rs}")
            return int(rs) % (1 << 64)
        return int(check_random_state(rs).randint(0, np.iinfo(np.int64).max, dtype=np.int64))

    def _scaling(self):
        ranges = self.feature_ranges
        if ranges is None:
            return None
        if isinstance(ranges, str):
            # The estimators spell the core's "first_batch" as None.
            if ranges != "identity":
                raise ValueError(
                    f"feature_ranges must be None, 'identity' or (min, max) pairs, got {ranges!r}"
                )
            return "identity"
        arr = np.asarray(ranges, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise ValueError(
                f"feature_ranges must be (min, max) pairs, of shape (n_features, 2), "
                f"got shape {arr.shape}"
            )
        return [(float(lo), float(hi)) for lo, hi in arr]

    @property
    def n_points_(self):
        """Training points the model holds: the rows given since the last ``fit``, less
        those forgotten or out of the ``window``."""
        check_is_fitted(self)
        return self._core.n_points

    @property
    def point_ids_(self):
        """Ids of the points held, oldest first, as an int64 array: each point's arrival
        index among the training rows given since the last ``fit`` (``fit``'s rows are 0 to
        n - 1, the rows of later ``partial_fit`` and ``learn_one`` calls follow). These
        are the ids :meth:`forget` takes."""
        check_is_fitted(self)
        return self._core.point_ids().astype(np.int64)

    def forget(self, ids):
        """Removes the training points with these ids from the model: an int or a
        sequence or 1-D array of ints (see ``point_ids_``). Returns self.

        The model is then as if it had never seen the points: each tree is distributed as
        a tree trained on the other points (exact deletion, not an approximation), and the
        points, their labels and their share of every statistic are gone, so it serves
        data-removal requests. Later training goes on from there, and ids keep counting
        from ``n_samples_seen_``. What the first training call fixed for good is not
        undone: the feature scaling (min–max of that call unless ``feature_ranges`` is
        given), learnt ``feature_weights_``, the regressor's ``calibration_`` and the
        classifier's ``classes_``; give ``feature_ranges`` and explicit weights, or
        ``fit`` again, when those must not depend on the points either.

        An id the model does not hold (never given, negative, already forgotten, out of
        the window, or named twice) raises ``ValueError`` and leaves the model unchanged.
        """
        check_is_fitted(self)
        ids = np.asarray(ids)
        if ids.ndim > 1:
            raise ValueError(f"ids must be an int or a 1-D sequence of ints, got shape {ids.shape}")
        ids = ids.reshape(-1)
        if ids.size and ids.dtype.kind not in "iu":
            raise TypeError(
                f"ids must be integers (the ids of point_ids_), got {ids.dtype}; for a "
                "boolean mask over the points held, pass point_ids_[mask]"
            )
        if ids.dtype.kind == "i" and ids.size and ids.min() < 0:
            raise ValueError(
                f"point {int(ids.min())} is not in the model: training points are numbered "
                "by arrival from 0"
            )
        self._core_for_use().forget(np.ascontiguousarray(ids, dtype=np.uint64))
        return self

    def _core_for_use(self):
        """The fitted core, with the thread count of the current ``n_jobs``."""
        core = self._core
        threads = self._n_threads()
        if core.n_threads != threads:
            core.set_n_threads(threads)
        return core

    def __sklearn_is_fitted__(self):
        core = getattr(self, "_core", None)
        return core is not None and core.n_features is not None

    def _fitted_names(self):
        """Dict keys that map to the columns: the DataFrame's column names, if any."""
        names = getattr(self, "feature_names_in_", None)
        return None if names is None else list(names)

    def _row_of(self, x):
        names = self._river_names
        if names is None:
            raise ValueError(
                "this model was trained on arrays without feature names, so it cannot read "
                "dicts; train it with learn_one or on a DataFrame with string column names"
            )
        # One lookup of every name in C (a comprehension pays the interpreter per name:
        # 6.4 against 4.3 µs for 256 features), kept for as long as the names stay.
        cached = self.__dict__.get("_river_getter")
        if cached is None or cached[0] is not names:
            cached = (names, operator.itemgetter(*names))
            self._river_getter = cached
        try:
            values = cached[1](x)
            row = list(map(float, values)) if len(names) > 1 else [float(values)]
        except KeyError as e:
            raise ValueError(f"feature {e.args[0]!r} is missing from x") from None
        except (TypeError, ValueError) as e:
            raise ValueError(f"features must be numbers: {e}") from None
        if len(x) != len(names):
            known = set(names)
            extra = [k for k in x if k not in known]
            raise ValueError(
                f"features {extra!r} were not in the first example; the forest's "
                "dimension is fixed by its first example"
            )
        return row

    # river reads these: a supervised model, and its memory in bytes.
    def clone(self, new_params=None, include_attributes=False):
        """An unfitted copy with the same parameters, updated by ``new_params`` (river's
        ``Estimator.clone``; ``include_attributes=True`` copies the trained model too)."""
        import copy

        from sklearn.base import clone as sk_clone

        twin = copy.deepcopy(self) if include_attributes else sk_clone(self)
        if new_params:
            twin.set_params(**new_params)
        return twin

    @classmethod
    def _from_core(cls, core, names=None):
        """An estimator around a loaded core: its parameters are the core's, its feature
        names ``names`` (a list of str, or None)."""
        params = dict(core.params())
        threads = params.pop("n_threads")
        params.pop("n_classes", None)
        params["n_jobs"] = -1 if threads == 0 else (None if threads == 1 else threads)
        est = cls(**params)
        est._core = core
        names = list(names) if names else None
        est._river_names = names
        if core.n_features is not None:
            est.n_features_in_ = core.n_features
            if names is not None:
                est.feature_names_in_ = np.asarray(names, dtype=object)
        return est

    def save(self, path):
        """Saves the forest in the library's file format (the same as the Rust
        ``MondrianForestClassifier::save``), which :func:`mondrian_ml.load` reads back.
        Labels and feature names are not part of that format (``load`` gives classes 0 to
        K − 1); use pickle to keep the whole estimator."""
        check_is_fitted(self)
        self._core.save(os.fspath(path))

class _BayesCommon:
    """What the Bayesian estimators (BART, SMC trees) share with the forests and with
    each other: parameter checks, rows, files. The library checks the ranges; Python
    checks the types and scikit-learn's conventions."""

    _n_threads = _ForestCommon._n_threads
    _check_types = _ForestCommon._check_types
    _seed = _ForestCommon._seed
    __sklearn_is_fitted__ = _ForestCommon.__sklearn_is_fitted__

    def _keep(self, params):
        """``__init__``'s work: each argument (``params``, its ``locals()``) kept as is."""
        for name, value in params.items():
            if name != "self":
                setattr(self, name, value)

    def _rows(self, X):
        check_is_fitted(self)
        return validate_data(self, X, dtype=_FLOATS, order="C", reset=False)

    @classmethod
    def _from_core(cls, core, classes=None, names=None):
        """An estimator around a loaded core (see ``_ForestCommon._from_core``); a
        classifier's ``classes_`` are ``classes``, or 0 to K − 1."""
        est = _ForestCommon._from_core.__func__(cls, core, names)
        if hasattr(est, "predict_proba") and core.n_features is not None:
            # The probit BART core has no ``n_classes``: it always has two.
            k = getattr(core, "n_classes", 2)
            est.classes_ = np.arange(k) if classes is None else np.asarray(classes)
        return est


class _MondrianBase(_ForestCommon):
    """Mixin of the supervised forests: progress, sample weights, warm start, leaves,
    feature weights and importances, size, compaction."""

    def _train(self, core, call, total):
        """Runs ``call()`` (a training call of ``core`` over ``total`` trees) behind the
        progress display when ``verbose`` is on."""
        verbose = self.verbose
        if not isinstance(verbose, (numbers.Integral, np.bool_)) or verbose < 0:
            raise ValueError(f"verbose must be a non-negative integer, got {verbose!r}")
        if not verbose:
            return call()
        display = _Progress(f"{type(self).__name__}", total)
        core.set_progress(display)
        try:
            return call()
        finally:
            core.set_progress(None)
            display.close()

    def _sample_weight(self, sample_weight, X, *, streaming=False):
        """``sample_weight`` as a float64 array (None stays None); negative, NaN or
        infinite weights are refused here, as the library refuses them. A batch of a
        stream may weigh 0 throughout (its rows are only counted); ``fit`` may not."""
        if sample_weight is None:
            return None
        # scikit-learn before 1.7 has no such check (and no argument to skip it).
        zeros = {"allow_all_zero_weights": streaming} if _CHECKS_ALL_ZERO else {}
        sw = _check_sample_weight(
            sample_weight, X, dtype=np.float64, ensure_non_negative=True, **zeros
        )
        return np.ascontiguousarray(sw, dtype=np.float64)

    def _warm_start(self, X):
        """With ``warm_start`` on a fitted model, ``fit`` grows the trees ``n_estimators``
        adds on the points the model holds (X is only checked against the model)."""
        validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        self._check_types(counts=("n_estimators",))
        core = self._core_for_use()
        have = core.params()["n_estimators"]
        want = int(self.n_estimators)
        if want < have:
            raise ValueError(
                f"n_estimators={want} must be at least the {have} trees of the fitted forest "
                "when warm_start=True"
            )
        if want == have:
            warnings.warn(
                "Warm-start fitting without increasing n_estimators does not fit new trees.",
                UserWarning,
                stacklevel=3,
            )
            return self
        self._train(core, lambda: core.add_trees(want - have), want - have)
        return self

    def apply(self, X):
        """The leaf each row reaches in each tree: int64 node ids of shape (n_samples,
        n_estimators), as scikit-learn's forests give; -1 where a tree holds no point
        (``bagging`` can leave a tree without one). Rows in the same leaf of a tree share
        its id."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        return self._core_for_use().apply(X)

    def _feature_weights(self):
        weights = self.feature_weights
        if weights is None or isinstance(weights, str):
            return weights  # the core reads 'uniform', 'relevance' and 'relevance:P'
        return np.asarray(weights, dtype=np.float64).tolist()

    @property
    def feature_weights_(self):
        """The feature weights in use (learnt ones with ``feature_weights="relevance"``)."""
        check_is_fitted(self)
        return np.asarray(self._core.feature_weights())

    @property
    def relevance_choice_(self):
        """With ``feature_weights="relevance:cv"``: a dict with the chosen ``power`` and
        ``losses``, each power's held-out loss per row (negative log-likelihood); else
        None."""
        check_is_fitted(self)
        choice = self._core.relevance_choice()
        if choice is None:
            return None
        power, losses = choice
        return {"power": power, "losses": dict(losses)}

    @property
    def feature_importances_(self):
        """Share of the training labels' impurity (squared error for regression, n·Gini for
        classes) that the forest's splits remove, per feature; sums to 1. The splits ignore
        the labels, so a feature scores by what random cuts along it explain (and, under
        feature weights, by how often it is cut)."""
        check_is_fitted(self)
        return np.asarray(self._core.feature_importances())

    @property
    def n_samples_seen_(self):
        """Training rows given since the last ``fit`` (by ``fit``, ``partial_fit`` and
        ``learn_one``), whether the model still holds them or not."""
        check_is_fitted(self)
        return self._core.n_samples_seen

    @property
    def _supervised(self):
        return True

    @property
    def _raw_memory_usage(self):
        return self._core.summary()["total_bytes"] if self.__sklearn_is_fitted__() else 0

    def summary(self):
        """Size and shape of the fitted forest: nodes, leaves, depth, bytes per node."""
        check_is_fitted(self)
        return self._core.summary()

    def compact(self):
        """Makes the fitted model prediction-only and small. Returns self.

        Drops the state only training needs (which training point sits in which leaf) and
        saves and pickles the rest compressed: every prediction stays exactly the same,
        from a file several times smaller (a quarter or less on data with few distinct
        feature values, such as pixel intensities). A compact model refuses
        ``partial_fit``, ``learn_one`` and ``forget`` with a ``ValueError``; ``fit``
        trains a new, ordinary model.
        """
        check_is_fitted(self)
        self._core.compact()
        return self
