"""Mondrian forests from the Rust library ``mondrian``, with scikit-learn and river APIs.

>>> from mondrian_ml import MondrianForestClassifier, MondrianForestRegressor
"""

from ._classifier import MondrianForestClassifier
from ._core import __version__
from ._regressor import MondrianForestRegressor

__all__ = ["MondrianForestClassifier", "MondrianForestRegressor", "__version__"]
