"""Mondrian forests from the Rust library ``mondrian``, with scikit-learn and river APIs.

>>> from mondrian_ml import MondrianForestClassifier, MondrianForestRegressor, load
>>> from mondrian_ml import MondrianPolyaForest

river's own base classes are in :mod:`mondrian_ml.river` (which imports river).
"""

from ._classifier import MondrianForestClassifier
from ._core import __version__
from ._load import load
from ._polya import MondrianPolyaForest
from ._regressor import MondrianForestRegressor

__all__ = [
    "MondrianForestClassifier",
    "MondrianForestRegressor",
    "MondrianPolyaForest",
    "__version__",
    "load",
]
