"""Reading any model file of the library into the right estimator."""

from __future__ import annotations

import os

from ._bart import BARTClassifier, BARTRegressor
from ._classifier import MondrianForestClassifier
from ._core import load_any
from ._polya import MondrianPolyaForest
from ._regressor import MondrianForestRegressor
from ._smc import SMCTreeClassifier, SMCTreeRegressor


def load(path):
    """Reads a model file of any kind the library writes and returns the estimator.

    - a file of :meth:`MondrianForestClassifier.save` / :meth:`MondrianForestRegressor.save`
      or of the Rust library's ``Persistent::save``: the estimator, with ``classes_``
      0 to K − 1 (that format keeps no label values) and no feature names;
    - a file of ``mondrian train --model`` (the CLI keeps the label values and the CSV
      header's column names): ``classes_`` are the labels of the training file and
      ``feature_names_in_`` its column names, so a DataFrame must name the same columns
      (an array is taken as is, with scikit-learn's warning);
    - a file of :meth:`BARTRegressor.save` / :meth:`BARTClassifier.save` or of the Rust
      ``BartRegressor::save`` / ``BartClassifier::save``: the BART estimator, the
      classifier with ``classes_`` 0 and 1;
    - a file of :meth:`SMCTreeClassifier.save` / :meth:`SMCTreeRegressor.save` or of the
      Rust ``SmcTreeClassifier::save`` / ``SmcTreeRegressor::save``: the SMC tree
      estimator, the classifier with ``classes_`` 0 to K − 1.

    The estimator's parameters are the model's (``n_jobs`` from its thread count); it
    predicts at once, and a forest can go on learning (``partial_fit``, ``learn_one``,
    ``forget``). A file that is not a model, or a corrupt one, raises ``ValueError``; a
    missing one ``OSError``.

    Examples
    --------
    >>> import mondrian_ml
    >>> clf = mondrian_ml.load("forest.bin")                 # doctest: +SKIP
    >>> clf.predict(X_new)                                  # doctest: +SKIP
    """
    kind, core, classes, names = load_any(os.fspath(path))
    if kind == "classifier":
        return MondrianForestClassifier._from_core(core, classes, names)
    bayes = {
        "bart-regressor": BARTRegressor,
        "bart-classifier": BARTClassifier,
        "smc-regressor": SMCTreeRegressor,
        "smc-classifier": SMCTreeClassifier,
    }
    if kind in bayes:
        return bayes[kind]._from_core(core, classes, names)
    if kind == "polya":
        return MondrianPolyaForest._from_core(core, names)
    return MondrianForestRegressor._from_core(core, names)
