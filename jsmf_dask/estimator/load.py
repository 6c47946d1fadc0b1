"""``load_model``: a fitted :class:`~jsmf_dask.RectifiedAnchorWords` from a saved model or a run root."""

from __future__ import annotations

import os

from jsmf_dask._validation import check_name
from jsmf_dask.estimator.model import RectifiedAnchorWords
from jsmf_dask.estimator.stored import fitted_state, saved_state
from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.fs import get_fs, join
from jsmf_dask.io.model_store import chosen_model, open_model
from jsmf_dask.io.saved_model import is_saved_model

__all__ = ["load_model"]


def load_model(root_or_path: str | os.PathLike, name: str | None = None):
    """A fitted :class:`~jsmf_dask.RectifiedAnchorWords` from a saved model or a run root's model.

    Parameters
    ----------
    root_or_path : str or path-like
        A directory :meth:`~jsmf_dask.RectifiedAnchorWords.save` wrote, or a
        run root (local path or fsspec URL) with fitted models.
    name : str, optional
        The model under the run root (required when it holds more than one).
        A refined model (``k20-ap-refined``) is loaded with its spectral source.

    Returns
    -------
    RectifiedAnchorWords
        Fitted: ``transform``, ``score``, ``top_words`` work; its parameters are the ones it was fitted with.

    Raises
    ------
    StoreError
        If the path holds neither, the name is unknown or ambiguous, or the model is incomplete.
    """
    url = os.fspath(root_or_path)
    if is_saved_model(url):
        if name is not None:
            raise StoreError(f"{url}: a saved model holds one model; name={name!r} is for run roots")
        params, state = saved_state(url)
        model = RectifiedAnchorWords(**params)
        model.__dict__.update(state)
        return model
    fs, path = get_fs(join(url, "model.zarr"))
    if not fs.exists(path):
        raise StoreError(f"{url}: neither a saved model (RectifiedAnchorWords.save writes one) nor a run root with "
                         "fitted models (model.zarr)")
    check_name(name, "name", "load_model", allow_none=True)
    name = chosen_model(url, name, option="name=...")
    stored = open_model(url, name)
    spectral = stored.attrs.get("source", {}).get("name") if "alpha" in stored.arrays else None
    params = stored.attrs.get("params", {})
    if spectral is None:
        state = fitted_state(url, name)
        model = RectifiedAnchorWords(n_components=int(params["n_topics"]), rectifier=params.get("rectifier"),
                                     max_iter=params.get("iterations"), refine=None)
    else:
        state = fitted_state(url, spectral, name)
        source = open_model(url, spectral).attrs.get("params", {})
        model = RectifiedAnchorWords(n_components=int(params["n_topics"]), rectifier=source.get("rectifier"),
                                     max_iter=source.get("iterations"), refine=params.get("method", "cvb0"),
                                     refine_sweeps=params.get("sweeps", 50),  # 50: the default before "auto"
                                     doc_topic_prior=params.get("alpha", "auto"),
                                     topic_word_prior=params.get("eta", 0.05),
                                     refine_drawn_sweeps=params.get("drawn_sweeps", "auto"),
                                     refine_start=params.get("start", "auto"))
    model.__dict__.update(state)
    return model
