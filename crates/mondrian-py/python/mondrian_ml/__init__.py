"""Mondrian forests from the Rust library ``mondrian``, with scikit-learn and river APIs.

>>> from mondrian_ml import MondrianForestClassifier
"""

from ._classifier import MondrianForestClassifier
from ._core import __version__

__all__ = ["MondrianForestClassifier", "__version__"]
