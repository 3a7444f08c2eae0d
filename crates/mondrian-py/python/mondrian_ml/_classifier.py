"""The Mondrian forest classifier: a scikit-learn estimator and a river classifier."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import _FLOATS, _MondrianBase
from ._core import ClassifierCore


def _label_array(labels):
    """Labels as a 1-D array without numpy coercing mixed types to strings."""
    kinds = {type(label) for label in labels}
    if len(kinds) <= 1:
        arr = np.asarray(labels)
        if arr.ndim == 1:
            return arr
    arr = np.empty(len(labels), dtype=object)
    arr[:] = labels
    return arr


class MondrianForestClassifier(_MondrianBase, ClassifierMixin, BaseEstimator):
    """Online Mondrian forest classifier (Lakshminarayanan, Roy & Teh, 2014).

    Trees follow a Mondrian process restricted to the data; training online with
    :meth:`partial_fit` or :meth:`learn_one` gives trees with exactly the distribution of
    trees trained in one batch on the same points. Predictions smooth labels
    hierarchically along each tree path (interpolated Kneser-Ney) and account for a split
    that a test point outside the data would have introduced ("branch-off"), so they
    become less confident away from the training data.

    The estimator follows scikit-learn (``fit``, ``partial_fit``, ``predict``,
    ``predict_proba``, ``score``) and river (``learn_one``, ``predict_proba_one``,
    ``predict_one``) on the same model. All computation runs in the Rust library
    ``mondrian``, with the GIL released.

    Parameters
    ----------
    n_estimators : int, default=100
        Number of trees.
    lifetime : float, default=inf
        Lifetime λ of the Mondrian process. ``inf`` grows each tree until its leaves are
        pure or hold fewer than ``min_samples_split`` points.
    discount_factor : float, default=10.0
        The label-smoothing discount rate is γ = ``discount_factor`` × n_features; the
        paper's choice for features on [0, 1].
    bagging : bool, default=False
        Online bagging: each tree takes each example a Poisson(1) number of times.
    min_samples_split : int, default=2
        A block with fewer points is not split (it waits for more data).
    pause_on_pure : bool, default=True
        Do not split blocks whose labels are all equal until another label arrives.
    branch_counts : {"paper", "reference"}, default="paper"
        Counts used at the branch-off node in prediction: the paper's or those of the
        authors' released code.
    feature_ranges : None, "identity" or array-like of shape (n_features, 2), default=None
        How features are mapped into the trees' space, which the trees assume is about
        [0, 1]. ``None``: min–max scaling from the data of the first training call
        (``fit``, ``partial_fit`` or ``learn_one``), then frozen, since moving it later
        would bend the trees already grown. Points outside that range are fine. A single
        first ``learn_one`` point gives no range, so features are then only shifted: give
        ranges for streams. ``"identity"``: features are used as they are. An array:
        ``(min, max)`` per feature.
    feature_weights : None, "relevance", "relevance:P", "relevance:cv" or array-like of shape (n_features,), default=None
        Stretch of each (scaled) feature in the trees' space: cuts along feature d become
        ``w_d`` times as likely and its distances ``w_d`` times as large (the Mondrian
        process of the stretched box; γ uses Σ w_d for D). ``None``: all 1, as in the
        paper. ``"relevance"``: learnt from the first training call by a pilot forest with
        weights 1, as the Gini impurity its (label-blind) cuts along each feature remove,
        divided by the largest (``"relevance:P"`` raises that to the power P;
        ``"relevance:cv"`` chooses P among 0, 0.25, 0.5, 1 and 2 by 5-fold cross-validation
        of the held-out log-loss on the first training call, about 30 fits' work, see
        ``relevance_choice_``); it helps when few features matter (dna). Or one weight ≥ 0 per feature. Relevance needs a first
        training call the pilot can split: a first ``learn_one`` (one point) or a first batch
        of one class is refused; learn the weights on a sample with ``fit`` and pass
        ``feature_weights_`` instead.
    window : int, default=None
        Keep only the last ``window`` training points, a sliding window over the rows of
        ``fit``, ``partial_fit`` and ``learn_one``: as each point arrives the oldest leaves,
        deleted exactly, so the forest is distributed as one trained in a batch on the last
        ``window`` points, and its memory stays bounded however long the stream. ``fit``
        on more rows keeps their last ``window``. ``None`` keeps every point.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplied into the sample weights: a dict label → weight
        (labels it does not name weigh 1), or ``"balanced"``, n_samples / (n_classes ·
        count of the class) from the ``y`` of ``fit``. ``partial_fit`` and ``learn_one``
        take a dict only (a stream has no class counts to balance by).
    warm_start : bool, default=False
        When the model is fitted, ``fit`` grows the trees that a larger ``n_estimators``
        adds, on the points the model holds (those of the earlier ``fit`` and
        ``partial_fit`` calls, with their weights; the X and y given are only checked
        against the model), and leaves the others as they are. Tree t is seeded by
        (``random_state``, t), so after a single ``fit`` the forest is the one a fit with
        the larger ``n_estimators`` gives.
    verbose : int, default=0
        Above 0, ``fit`` shows its progress in trees: a tqdm bar when tqdm is installed,
        else a line on stderr per group of trees done.
    n_jobs : int, default=None
        Threads for training and prediction: ``None`` means 1, ``-1`` every core. The
        fitted model is the same whatever the number.
    random_state : int, RandomState instance or None, default=None
        Seeds the trees. An int gives the same forest on every fit.
    max_memory : int, str or None, default=None
        Memory budget for training, in bytes or as a size such as ``"500M"``, ``"4G"`` or
        ``"4GiB"``. A fit whose forest is estimated to need more raises ``MemoryError``
        before anything grows (the model is left as it was). ``None`` uses what the
        machine has left.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels, in the order of the columns of :meth:`predict_proba`. ``fit`` sorts
        them; later labels from ``partial_fit`` or ``learn_one`` are appended in the order
        they first appear.
    n_classes_ : int
        Number of classes, ``len(classes_)``.
    n_features_in_ : int
        Number of features seen in the first training call.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names, when the first training data had string names (a DataFrame, or the
        dict keys given to ``learn_one``, in order of first appearance).
    feature_weights_ : ndarray of shape (n_features_in_,)
        The feature weights in use (learnt ones with ``feature_weights="relevance"``).
    n_samples_seen_ : int
        Training rows given since the last ``fit``, held or not.
    n_points_ : int
        Training points held: ``n_samples_seen_`` less those forgotten (:meth:`forget`)
        or out of the ``window``.
    point_ids_ : ndarray of shape (n_points_,)
        Ids of the points held, oldest first: their arrival indices among the rows given
        since the last ``fit`` (the ids :meth:`forget` takes).

    Notes
    -----
    A label that never appeared before may arrive in ``partial_fit`` (unless ``classes``
    were declared in the first call) or in ``learn_one``: the trees give it a zero count
    everywhere and the smoothing prior spreads over the larger set of classes.

    Sample weights (``sample_weight=``, ``class_weight``) count copies: a row of integer
    weight k is exactly k copies of the row (every tree holds it k times; with ``bagging``
    a tree takes Poisson(k) copies, as k copies would each take Poisson(1)). A row of
    weight 0 is not learnt and does not move the scaling, but keeps its id, so ids stay
    row numbers. A fractional weight w is rounded at random per tree, to ⌊w⌋ + 1 with
    probability w − ⌊w⌋ (unbiased, seeded by ``random_state``; Poisson(w) with bagging).
    Negative, NaN, infinite weights and weights above 2**20 are refused. A tree keeps a
    point's copies, so memory grows with the sum of the weights, and ``forget`` removes all
    of a point's copies.

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian_ml import MondrianForestClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 2))
    >>> y = (X[:, 0] > X[:, 1]).astype(int)
    >>> clf = MondrianForestClassifier(n_estimators=20, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:3]).shape
    (3, 2)
    >>> clf.forget([0, 1]).n_points_  # rows 0 and 1 are gone, as if never seen
    198
    """

    def __init__(
        self,
        n_estimators=100,
        *,
        lifetime=np.inf,
        discount_factor=10.0,
        bagging=False,
        min_samples_split=2,
        pause_on_pure=True,
        branch_counts="paper",
        feature_ranges=None,
        feature_weights=None,
        window=None,
        class_weight=None,
        warm_start=False,
        verbose=0,
        n_jobs=None,
        random_state=None,
        max_memory=None,
    ):
        self.n_estimators = n_estimators
        self.lifetime = lifetime
        self.discount_factor = discount_factor
        self.bagging = bagging
        self.min_samples_split = min_samples_split
        self.pause_on_pure = pause_on_pure
        self.branch_counts = branch_counts
        self.feature_ranges = feature_ranges
        self.feature_weights = feature_weights
        self.window = window
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.max_memory = max_memory

    # ------------------------------------------------------------------ parameters

    def _new_core(self, n_classes=None):
        self._check_types(
            counts=("n_estimators", "min_samples_split", "window"),
            reals=("lifetime", "discount_factor"),
            flags=("bagging", "pause_on_pure", "warm_start"),
            strings=("branch_counts",),
        )
        return ClassifierCore(
            n_trees=int(self.n_estimators),
            lifetime=float(self.lifetime),
            discount_factor=float(self.discount_factor),
            seed=self._seed(),
            n_threads=self._n_threads(),
            bagging=bool(self.bagging),
            pause_on_pure=bool(self.pause_on_pure),
            min_samples_split=int(self.min_samples_split),
            branch_counts=self.branch_counts,
            n_classes=n_classes,
            scaling=self._scaling(),
            feature_weights=self._feature_weights(),
            window=self._window(),
            max_memory=self.max_memory,
        )

    # ------------------------------------------------------------------ labels

    def _set_classes(self, classes):
        self.classes_ = classes
        self._label_index = {label: i for i, label in enumerate(classes.tolist())}

    def _encode(self, y):
        """Class indices of ``y``; labels never seen before are appended to ``classes_``."""
        index = self._label_index
        try:
            return np.fromiter((index[label] for label in y.tolist()), np.int64, len(y))
        except KeyError:
            pass
        new = [label for label in dict.fromkeys(y.tolist()) if label not in index]
        if getattr(self, "_declared_classes", False):
            raise ValueError(
                f"y contains labels {new!r} that are not in the classes declared in the "
                "first call to partial_fit"
            )
        self._set_classes(_label_array(self.classes_.tolist() + sorted_labels(new)))
        index = self._label_index
        return np.fromiter((index[label] for label in y.tolist()), np.int64, len(y))

    def _weights(self, X, y, sample_weight, *, streaming):
        """The sample weights of a training call: ``sample_weight`` times the class
        weights (None when neither is given)."""
        sw = self._sample_weight(sample_weight, X, streaming=streaming)
        cw = self.class_weight
        if cw is None:
            return sw
        if isinstance(cw, str) and streaming:
            raise ValueError(
                f"class_weight={cw!r} needs the class counts of a whole data set, which "
                "partial_fit and learn_one do not have; give a dict (for instance from "
                "sklearn.utils.class_weight.compute_class_weight on a sample)"
            )
        weights = compute_sample_weight(cw, y)
        return weights if sw is None else np.ascontiguousarray(sw * weights)

    # ------------------------------------------------------------------ scikit-learn

    def fit(self, X, y, sample_weight=None):
        """Trains a new forest on ``X`` (n_samples, n_features) and labels ``y``, each row
        with its ``sample_weight`` (see Notes) if given.

        Any previous training is discarded (unless ``warm_start`` grows more trees on a
        fitted model). The feature scaling is fitted on ``X`` (the rows of positive weight)
        unless ``feature_ranges`` is given.
        """
        if self.warm_start and self.__sklearn_is_fitted__():
            return self._warm_start(X)
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C")
        check_classification_targets(y)
        sw = self._weights(X, y, sample_weight, streaming=False)
        classes, y_index = np.unique(y, return_inverse=True)
        # The classes are not declared: later partial_fit / learn_one calls may add labels
        # (appended to classes_), as after a first partial_fit without `classes`.
        core = self._new_core()
        y_index = y_index.astype(np.int64, copy=False)
        self._train(core, lambda: core.fit(X, y_index, sw), int(self.n_estimators))
        self._core = core
        self._declared_classes = False
        self._river_names = self._fitted_names()
        self._set_classes(classes)
        return self

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Extends the forest online with a mini-batch.

        The trees keep the law of batch training on everything seen so far. A batch at
        least as large as what the forest holds is inserted as one set, a smaller one row
        by row, so for a given seed the trees depend on how the stream is cut into batches
        (never on ``n_jobs``). The first call fixes the number of features and (unless ``feature_ranges`` is
        given) the feature scaling, so it should be representative of the stream.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like, default=None
            All labels the stream will contain, if known, in the first call. Without it,
            new labels may appear in any call.
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each row (see Notes), times ``class_weight`` (a dict) if given.
        """
        first = not self.__sklearn_is_fitted__()
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C", reset=first)
        check_classification_targets(y)
        sw = self._weights(X, y, sample_weight, streaming=True)
        if first:
            if classes is not None:
                classes = np.unique(classes)
                if any(_missing(label) for label in classes.tolist()):
                    raise ValueError(f"classes must not hold NaN or None, got {classes!r}")
            core = self._new_core(None if classes is None else len(classes))
            self._declared_classes = classes is not None
            self._river_names = self._fitted_names()
            self._set_classes(np.unique(y) if classes is None else np.unique(classes))
            y_index = self._encode(y)
            core.partial_fit(X, y_index, sw)
            self._core = core
            return self
        if classes is not None and not (
            len(classes) == len(self.classes_) and set(np.unique(classes).tolist()) == set(self.classes_.tolist())
        ):
            raise ValueError(
                f"classes={classes!r} differ from the classes of the model {self.classes_!r}"
            )
        classes_before = self.classes_
        y_index = self._encode(y)
        try:
            self._core_for_use().partial_fit(X, y_index, sw)
        except BaseException:
            self._set_classes(classes_before)
            raise
        return self

    def predict_proba(self, X):
        """Class probabilities of shape (n_samples, n_classes), columns in ``classes_``."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        return self._core_for_use().predict_proba(X)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (the label smoothing keeps every probability
        above 0, so it is finite)."""
        return np.log(self.predict_proba(X))

    def predict(self, X):
        """Most probable class of each row."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    @property
    def n_classes_(self):
        """Number of classes, ``len(classes_)``."""
        check_is_fitted(self)
        return len(self.classes_)

    # ------------------------------------------------------------------ river

    def learn_one(self, x, y):
        """Learns one example: ``x`` a dict of feature name → number, ``y`` a label
        (weighted by ``class_weight``, a dict, if given).

        Feature names are fixed by the first example, in its key order; later examples
        may list them in any order.
        """
        if _missing(y):
            # NaN ≠ NaN: each would become a class of its own.
            raise ValueError(f"y must be a class label, got {y!r}")
        weight = self._weight_of(y)
        if not self.__sklearn_is_fitted__():
            names = list(x)
            if not names:
                raise ValueError("x has no features")
            self._river_names = names
            row = self._row_of(x)
            core = self._new_core()
            self._declared_classes = False
            self._set_classes(_label_array([y]))
            core.partial_fit_one(row, 0, weight)
            self._core = core
            self.n_features_in_ = len(names)
            if all(isinstance(n, str) for n in names):
                self.feature_names_in_ = np.asarray(names, dtype=object)
            return
        row = self._row_of(x)
        index = self._label_index.get(y)
        classes_before = self.classes_
        if index is None:
            if self._declared_classes:
                raise ValueError(f"label {y!r} is not in the declared classes")
            index = len(self.classes_)
            self._set_classes(_label_array(self.classes_.tolist() + [y]))
        try:
            self._core.partial_fit_one(row, index, weight)
        except BaseException:
            self._set_classes(classes_before)
            raise

    @classmethod
    def _from_core(cls, core, classes=None, names=None):
        est = super()._from_core(core, names)
        declared = core.params()["n_classes"] is not None
        est._declared_classes = declared
        if core.n_features is not None:
            labels = np.arange(core.n_classes) if classes is None else np.asarray(classes)
            est._set_classes(labels)
        return est

    def _weight_of(self, y):
        """The class weight of one label for ``learn_one`` (None: no weight)."""
        cw = self.class_weight
        if cw is None:
            return None
        if not isinstance(cw, dict):
            raise ValueError(
                f"learn_one takes class_weight as a dict label -> weight, not {cw!r}"
            )
        return float(cw.get(y, 1.0))

    @property
    def _multiclass(self):
        return True

    def predict_proba_one(self, x):
        """Class probabilities of one example as a dict label → probability (empty before
        any training, as river expects)."""
        if not self.__sklearn_is_fitted__():
            return {}
        proba = self._core.predict_proba_one(self._row_of(x))
        return dict(zip(self.classes_.tolist(), proba))

    def predict_one(self, x):
        """Most probable label of one example (``None`` before any training)."""
        proba = self.predict_proba_one(x)
        if not proba:
            return None
        return max(proba, key=proba.get)

def _missing(label):
    """Whether a label is None or NaN (a missing value rather than a class)."""
    if label is None:
        return True
    try:
        return bool(np.isnan(label))
    except (TypeError, ValueError):
        return False


def sorted_labels(labels):
    """New labels of one batch, sorted when they are comparable."""
    try:
        return sorted(labels)
    except TypeError:
        return list(labels)


def _register_with_river():
    """Makes ``isinstance(model, river.base.Classifier)`` true, so river's metrics and
    ``evaluate.progressive_val_score`` accept the model, without inheriting river's base
    (whose methods would clash with scikit-learn's)."""
    try:
        from river import base
    except ImportError:  # river is optional
        return
    base.Classifier.register(MondrianForestClassifier)


_register_with_river()

__all__ = ["MondrianForestClassifier", "NotFittedError"]
