"""The Mondrian kernel: sparse random features for the Laplace kernel
``exp(-lifetime * ||x - x'||_1)``, ridge regression on them, and the lifetime search along
one sweep (spec ``mondrian-kernel.md``)."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import _FLOATS, _ForestCommon
from ._core import KernelFeaturesCore, KernelRidgeCore
from ._core import kernel_sweep as _kernel_sweep


def _targets(y):
    y = np.ascontiguousarray(y, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y.shape}")
    return y


def _csr(parts, n_rows):
    indptr, indices, data, n_cols = parts
    return sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_cols))


class _KernelCommon(_ForestCommon):
    """Types and conventions shared by the kernel estimators (the library checks ranges)."""

    def _check_common(self):
        self._check_types(
            counts=("n_trees",), reals=("lifetime",), strings=("extension",)
        )
        return dict(
            n_trees=int(self.n_trees),
            lifetime=float(self.lifetime),
            seed=self._seed(),
            n_threads=self._n_threads(),
            extension=self.extension,
        )


class MondrianKernelFeatures(_KernelCommon, TransformerMixin, BaseEstimator):
    """Random features of the Mondrian kernel, an unbiased sparse approximation of the
    Laplace kernel ``k(x, x') = exp(-lifetime * ||x - x'||_1)``.

    ``fit`` samples ``n_trees`` Mondrian trees on the rows; a row's features are the cells
    that hold it, one per tree, each of value ``1/sqrt(n_trees)``, so that the inner
    product of two rows' features is the fraction of trees in which they share a cell
    (Balog et al., UAI 2016). ``transform`` returns a ``scipy.sparse.csr_matrix`` with
    exactly ``n_trees`` non-zeros per row for the rows the trees were sampled on; a new
    row placed by the exact extension (``extension="sample"``) may lie in a cell of its
    own in some trees, where it has no feature. Use it in a ``Pipeline`` before any linear
    model.

    Parameters
    ----------
    n_trees : int, default=50
        Trees M: non-zero features per row.
    lifetime : float, default=1.0
        λ, the inverse kernel width, in the units of the raw features (no scaling is
        applied). Larger gives more cells and a narrower kernel.
    extension : {"sample", "route"}, default="sample"
        New rows: the exact conditional extension of each tree (keyed by the row, so a row
        always gets the same features) or routing by the cuts alone (M features always).
    random_state : int, RandomState or None, default=None
    n_jobs : int or None, default=None
        Threads; results do not depend on it.

    Attributes
    ----------
    n_features_out_ : int
        Columns: the cells of all trees. ``partial_fit`` adds columns for the cells new rows
        open; old rows keep their features.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> from sklearn.pipeline import make_pipeline
    >>> from mondrian_ml import MondrianKernelFeatures
    >>> X = np.random.default_rng(0).uniform(size=(200, 3)); y = X.sum(axis=1)
    >>> model = make_pipeline(MondrianKernelFeatures(lifetime=3.0, random_state=0), Ridge(1e-3))
    >>> model.fit(X, y).score(X, y) > 0.9
    True
    """

    def __init__(self, n_trees=50, lifetime=1.0, extension="sample", random_state=None, n_jobs=None):
        self.n_trees = n_trees
        self.lifetime = lifetime
        self.extension = extension
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X, y=None):
        """Samples the trees on the rows of ``X``."""
        X = validate_data(self, X, dtype=_FLOATS, order="C")
        core = KernelFeaturesCore(**self._check_common())
        core.fit(X)
        self._core = core
        self.n_features_out_ = core.n_features_out
        return self

    def partial_fit(self, X, y=None):
        """Extends the trees by the rows of ``X`` (the first call fits); new columns are
        appended for the cells they open."""
        if getattr(self, "_core", None) is None:
            return self.fit(X)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        self._core.partial_fit(X)
        self.n_features_out_ = self._core.n_features_out
        return self

    def transform(self, X):
        """The features of the rows of ``X``, as a CSR matrix of ``n_features_out_``
        columns."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        return _csr(self._core.transform(X), X.shape[0])

    def tree_of_column(self):
        """The tree each column belongs to."""
        check_is_fitted(self)
        return self._core.tree_of_column()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = []
        return tags


class MondrianKernelRidge(_KernelCommon, RegressorMixin, BaseEstimator):
    """Ridge regression on Mondrian kernel features: an approximation of Laplace-kernel
    ridge regression whose cost grows with the number of cells, not of rows squared.

    Minimises ``||y - c - Φw||² + alpha ||w||²`` exactly (``c`` the training mean), with
    a Cholesky factor that ``partial_fit`` updates exactly as rows arrive (the trees grow,
    new cells become columns, each row a rank-one update). ``predict(X, return_std=True)``
    adds the standard deviation of the ridge posterior read as Bayesian linear regression
    (noise variance σ² at its maximum-likelihood value, prior ``w ~ N(0, σ²/alpha)``);
    rows far from the data, in cells of their own, get wide intervals.

    Parameters
    ----------
    n_trees : int, default=50
    lifetime : float, default=1.0
        λ of the Laplace kernel ``exp(-λ ||x - x'||_1)``, in raw feature units.
    alpha : float, default=1e-4
        The ridge regulariser (δ² in the paper).
    max_features : int, default=8192
        Most cells the exact solver may hold (its factor takes 4·C² bytes).
    extension, random_state, n_jobs
        As in :class:`MondrianKernelFeatures`.

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian_ml import MondrianKernelRidge
    >>> X = np.linspace(0, 1, 300)[:, None]; y = np.sin(6 * X[:, 0])
    >>> model = MondrianKernelRidge(n_trees=40, lifetime=20.0, random_state=0).fit(X, y)
    >>> mean, std = model.predict([[0.25]], return_std=True)
    >>> bool(abs(mean[0] - np.sin(1.5)) < 0.1)
    True
    """

    def __init__(
        self,
        n_trees=50,
        lifetime=1.0,
        alpha=1e-4,
        max_features=8192,
        extension="sample",
        random_state=None,
        n_jobs=None,
    ):
        self.n_trees = n_trees
        self.lifetime = lifetime
        self.alpha = alpha
        self.max_features = max_features
        self.extension = extension
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _params(self):
        self._check_types(counts=("max_features",), reals=("alpha",))
        p = self._check_common()
        p.update(delta2=float(self.alpha), max_features=int(self.max_features))
        return p

    def fit(self, X, y):
        """Samples the trees on ``X`` and solves the ridge problem."""
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C", y_numeric=True)
        core = KernelRidgeCore(**self._params())
        core.fit(X, _targets(y))
        self._core = core
        self.n_features_out_ = core.n_features_out
        return self

    def partial_fit(self, X, y):
        """Adds rows: the trees grow and the ridge solution is updated exactly (the first
        call fits; targets stay centred by the first call's mean)."""
        if getattr(self, "_core", None) is None:
            return self.fit(X, y)
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C", y_numeric=True, reset=False)
        self._core.partial_fit(X, _targets(y))
        self.n_features_out_ = self._core.n_features_out
        return self

    def predict(self, X, return_std=False):
        """Predictive means, and with ``return_std`` their standard deviations."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        if return_std:
            return self._core.predict_with_std(X)
        return self._core.predict(X)

    def features(self, X):
        """The model's features of the rows of ``X`` (CSR), as
        :meth:`MondrianKernelFeatures.transform` gives them."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOATS, order="C", reset=False)
        return _csr(self._core.transform(X), X.shape[0])

    @property
    def coef_(self):
        """The ridge weights, one per column of the features."""
        check_is_fitted(self)
        return self._core.weights()

    @property
    def intercept_(self):
        """The centre added to every prediction (the training mean)."""
        check_is_fitted(self)
        return self._core.centre

    @property
    def noise_variance_(self):
        """σ², the noise variance behind ``return_std``."""
        check_is_fitted(self)
        return self._core.noise_variance

    def log_marginal_likelihood(self):
        """The paper's log marginal likelihood of the training targets (noise variance
        ``alpha``, prior variance 1)."""
        check_is_fitted(self)
        return self._core.log_marginal_likelihood()


class MondrianKernelRidgeCV(MondrianKernelRidge):
    """:class:`MondrianKernelRidge` with the lifetime chosen among ``lifetimes`` along
    one sweep: the trees are sampled once, to the largest lifetime, and the exact ridge
    solution is brought up to date at each lifetime as the cuts arrive (by column updates
    or one factorisation, whichever is cheaper), with no new trees and no refit per
    candidate. The model at the chosen lifetime is then fitted on every row (the same
    trees, bit for bit, as the sweep's).

    Parameters
    ----------
    lifetimes : array-like of float, default=np.geomspace(0.01, 100, 20)
    criterion : {"validation", "evidence"}, default="validation"
        ``"validation"``: squared error on a shuffled ``validation_fraction`` of the rows,
        held out of the sweep's ridge. ``"evidence"``: the log marginal likelihood of the
        training rows, with the noise variance at its maximum.
    validation_fraction : float, default=0.2
    patience : int or None, default=None
        Stop the sweep after this many lifetimes in a row without a better score: the
        largest lifetimes have the most features and cost the most. ``None`` reads every
        lifetime.
    n_trees, alpha, max_features, extension, random_state, n_jobs
        As in :class:`MondrianKernelRidge`.

    Attributes
    ----------
    lifetime_ : float
        The chosen lifetime.
    scores_ : ndarray
        Per lifetime, in the order given: validation MSE or minus the log evidence (lower
        is better); NaN for lifetimes the sweep stopped before (``patience``).
    """

    def __init__(
        self,
        lifetimes=None,
        criterion="validation",
        validation_fraction=0.2,
        patience=None,
        n_trees=50,
        alpha=1e-4,
        max_features=8192,
        extension="sample",
        random_state=None,
        n_jobs=None,
    ):
        self.lifetimes = lifetimes
        self.criterion = criterion
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.n_trees = n_trees
        self.alpha = alpha
        self.max_features = max_features
        self.extension = extension
        self.random_state = random_state
        self.n_jobs = n_jobs

    @property
    def lifetime(self):
        return getattr(self, "lifetime_", None)

    def _grid(self):
        grid = self.lifetimes
        if grid is None:
            grid = np.geomspace(0.01, 100.0, 20)
        grid = np.asarray(grid, dtype=np.float64).ravel()
        if grid.size == 0:
            raise ValueError("lifetimes is empty: give at least one lifetime")
        return [float(v) for v in grid]

    def fit(self, X, y):
        """Chooses the lifetime along one sweep and fits the model there."""
        X, y = validate_data(self, X, y, dtype=_FLOATS, order="C", y_numeric=True)
        self._check_types(
            counts=("n_trees", "max_features"),
            reals=("alpha", "validation_fraction"),
            strings=("extension", "criterion"),
        )
        patience = self.patience
        if patience is not None:
            if isinstance(patience, bool) or not isinstance(patience, numbers.Integral) or patience < 1:
                raise ValueError(f"patience must be None or a positive integer, not {patience!r}")
            patience = int(patience)
        core, scores = KernelRidgeCore.fit_cv(
            X,
            _targets(y),
            self._grid(),
            criterion=self.criterion,
            validation_fraction=float(self.validation_fraction),
            n_trees=int(self.n_trees),
            delta2=float(self.alpha),
            seed=self._seed(),
            n_threads=self._n_threads(),
            extension=self.extension,
            max_features=int(self.max_features),
            patience=patience,
        )
        self._core = core
        self.lifetime_ = core.lifetime
        self.scores_ = scores
        self.n_features_out_ = core.n_features_out
        return self

    def partial_fit(self, X, y):
        """Adds rows to the model at the chosen lifetime (fits first if needed)."""
        if getattr(self, "_core", None) is None:
            return self.fit(X, y)
        return super().partial_fit(X, y)


def kernel_sweep(
    X,
    y_train,
    lifetimes,
    *,
    n_trees=50,
    learner="ridge",
    alpha=1e-4,
    random_state=0,
    n_jobs=None,
    epochs=1,
    sgd_alpha=1e-4,
    eta0=0.01,
    power_t=0.25,
    max_features=8192,
    average=None,
    average_lo=None,
    profiled=True,
):
    """Reads a learner at each lifetime along one sweep of Mondrian trees sampled on every
    row of ``X`` (the training rows first, ``len(y_train)`` of them; the others are only
    predicted: the paper's transductive protocol).

    ``learner``: ``"ridge"`` (exact, Cholesky updates), ``"sgd"`` (``epochs`` of
    scikit-learn-style SGD after every cut, warm-started: the paper's Figs. 7–9) or
    ``"forest"`` (each tree's leaf values ``Σy/(n + alpha)``, averaged: §5).

    ``average``: ``"uniform"`` or ``"log_uniform"`` (on ``[average_lo, max(lifetimes)]``)
    also averages the exact ridge's predictions over the posterior of the lifetime (the
    paper's Supp. B), with the evidence profiled over the noise variance (``profiled``) or
    the paper's (noise variance ``alpha``).

    Returns a dict with ``n_features`` (per lifetime), ``predictions`` (lifetimes × rows),
    ``log_marginal_likelihood`` and ``log_evidence`` (ridge only; NaN otherwise),
    ``events``, and with ``average`` an ``average`` dict (``predictions``, ``variances``,
    ``log_evidence``, ``intervals``).
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    seed = _ForestCommon._seed(type("S", (), {"random_state": random_state})())
    features, preds, lml, lev, events, averaged = _kernel_sweep(
        X,
        _targets(y_train),
        [float(v) for v in lifetimes],
        n_trees=int(n_trees),
        learner=learner,
        delta2=float(alpha),
        seed=seed,
        n_threads=1 if n_jobs is None else int(n_jobs),
        epochs=int(epochs),
        alpha=float(sgd_alpha),
        eta0=float(eta0),
        power_t=float(power_t),
        max_features=int(max_features),
        average=average,
        average_lo=None if average_lo is None else float(average_lo),
        profiled=bool(profiled),
    )
    out = dict(
        n_features=features,
        predictions=preds,
        log_marginal_likelihood=lml,
        log_evidence=lev,
        events=events,
    )
    if averaged is not None:
        means, variances, log_ev, intervals = averaged
        out["average"] = dict(
            predictions=means, variances=variances, log_evidence=log_ev, intervals=intervals
        )
    return out
