"""The scikit-learn estimator (:class:`RectifiedAnchorWords`) and its storage (:func:`load_model`)."""

from jsmf_dask.estimator.model import RectifiedAnchorWords
from jsmf_dask.estimator.load import load_model

__all__ = ["RectifiedAnchorWords", "load_model"]
