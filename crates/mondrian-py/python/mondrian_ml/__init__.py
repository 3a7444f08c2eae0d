"""Mondrian forests from the Rust library ``mondrian``, with scikit-learn and river APIs.

>>> from mondrian_ml import MondrianForestClassifier, MondrianForestRegressor, load
>>> from mondrian_ml import MondrianPolyaForest
>>> from mondrian_ml import MondrianKernelFeatures, MondrianKernelRidge, MondrianKernelRidgeCV
>>> from mondrian_ml import SMCTreeClassifier, SMCTreeRegressor
>>> from mondrian_ml import BARTClassifier, BARTRegressor

river's own base classes are in :mod:`mondrian_ml.river` (which imports river).
"""

from ._bart import BARTClassifier, BARTRegressor
from ._classifier import MondrianForestClassifier
from ._core import __version__
from ._kernel import (
    MondrianKernelFeatures,
    MondrianKernelRidge,
    MondrianKernelRidgeCV,
    kernel_sweep,
)
from ._load import load
from ._polya import MondrianPolyaForest
from ._regressor import MondrianForestRegressor
from ._smc import SMCTreeClassifier, SMCTreeRegressor

__all__ = [
    "BARTClassifier",
    "BARTRegressor",
    "MondrianForestClassifier",
    "MondrianForestRegressor",
    "MondrianKernelFeatures",
    "MondrianKernelRidge",
    "MondrianKernelRidgeCV",
    "MondrianPolyaForest",
    "SMCTreeClassifier",
    "SMCTreeRegressor",
    "__version__",
    "kernel_sweep",
    "load",
]
