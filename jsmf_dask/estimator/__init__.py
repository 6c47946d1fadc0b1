"""The scikit-learn estimator (:class:`RectifiedAnchorWords`), its storage (:func:`load_model`) and its held-out
scores by document completion (:mod:`jsmf_dask.estimator.scoring`)."""

from jsmf_dask.estimator.model import RectifiedAnchorWords
from jsmf_dask.estimator.load import load_model

__all__ = ["RectifiedAnchorWords", "load_model"]
