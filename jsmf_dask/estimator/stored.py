"""A fitted ``RectifiedAnchorWords`` from and to storage: run-root models, saved models, ``load_model``."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from jsmf_dask._validation import check_name
from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.fs import get_fs, join
from jsmf_dask.io.model_store import list_models, open_model
from jsmf_dask.io.parquet import corpus_dir, read_vocabulary
from jsmf_dask.io.saved_model import is_saved_model, read_saved_model, write_saved_model

__all__ = ["fitted_state", "save_model", "load_model"]

#: The fitted attributes a saved model keeps as arrays (name in the store → attribute).
_ARRAYS = {"B": "components_", "spectral_B": "spectral_components_", "A": "topic_topic_",
           "A_least_squares": "topic_topic_least_squares_", "anchors": "anchors_", "eigenvalues": "eigenvalues_",
           "alpha": "doc_topic_prior_"}
_TRACES = {"trace/rectification": "rectification_history_", "trace/refine": "refine_history_"}


def fitted_state(root: str, spectral: str, refined: str | None = None) -> dict[str, Any]:
    """The fitted attributes of an estimator whose models are ``spectral`` (and ``refined``, refined from it)
    under the run root ``root``; its vocabulary is the root's corpus's."""
    source = open_model(root, spectral)
    words = read_vocabulary(corpus_dir(root)).column("word").to_pylist()
    B = np.ascontiguousarray(source.arrays["B"].T)
    k = B.shape[0]
    state = {
        "components_": B, "spectral_components_": B, "topic_topic_": source.arrays["A"],
        "topic_topic_least_squares_": source.arrays.get("A_least_squares", np.full((k, k), np.nan)),
        "anchors_": source.arrays.get("anchors", np.zeros(0, np.int64)), "eigenvalues_": source.arrays.get("eigenvalues", np.zeros(0)),
        "rectification_history_": dict(source.trace), "refine_history_": {}, "doc_topic_prior_": source.arrays.get("alpha"),
        "topic_word_prior_": source.attrs.get("eta"), "n_iter_": int(source.attrs.get("n_iter", 0)), "vocabulary_": words,
        "n_features_in_": len(words),
    }
    if refined is not None:
        model = open_model(root, refined)
        state |= {"components_": np.ascontiguousarray(model.arrays["B"].T), "topic_topic_": model.arrays["A"],
                  "doc_topic_prior_": model.arrays["alpha"], "topic_word_prior_": float(model.attrs["eta"]),
                  "refine_history_": dict(model.trace), "n_iter_": int(model.attrs["n_iter"])}
    return state


def save_model(estimator, path: str, *, overwrite: bool = False) -> str:
    """Write a fitted estimator to ``path`` (:func:`~jsmf_dask.io.saved_model.write_saved_model`)."""
    arrays = {name: getattr(estimator, attr) for name, attr in _ARRAYS.items()
              if getattr(estimator, attr, None) is not None}
    for prefix, attr in _TRACES.items():
        arrays |= {f"{prefix}/{key}": np.asarray(values) for key, values in getattr(estimator, attr).items()}
    attrs = {
        "params": _json_params(estimator.get_params()),
        "fitted": {"n_iter": estimator.n_iter_, "topic_word_prior": estimator.topic_word_prior_,
                   "n_features_in": estimator.n_features_in_,
                   "has_feature_names": hasattr(estimator, "feature_names_in_")},
    }
    return write_saved_model(path, arrays, attrs, list(estimator.vocabulary_), overwrite=overwrite)


def load_model(root_or_path: str | os.PathLike, name: str | None = None):
    """A fitted :class:`~jsmf_dask.RectifiedAnchorWords` from a saved model or a run root's model.

    Parameters
    ----------
    root_or_path : str or path-like
        A directory :meth:`~jsmf_dask.RectifiedAnchorWords.save` wrote, or a
        run root (local path or fsspec URL) with fitted models.
    name : str, optional
        The model under the run root (required when it holds more than one).
        A refined model (``k20-ap-cvb0``) is loaded with its spectral source.

    Returns
    -------
    RectifiedAnchorWords
        Fitted: ``transform``, ``score``, ``top_words`` work; its parameters are the ones it was fitted with.

    Raises
    ------
    StoreError
        If the path holds neither, the name is unknown or ambiguous, or the model is incomplete.
    """
    from jsmf_dask.estimator.model import RectifiedAnchorWords

    url = os.fspath(root_or_path)
    if is_saved_model(url):
        if name is not None:
            raise StoreError(f"{url}: a saved model holds one model; name={name!r} is for run roots")
        arrays, attrs, words = read_saved_model(url)
        model = RectifiedAnchorWords(**attrs["params"])
        for key, attr in _ARRAYS.items():
            setattr(model, attr, arrays.get(key))
        for prefix, attr in _TRACES.items():
            setattr(model, attr, {k.rsplit("/", 1)[1]: v for k, v in arrays.items() if k.startswith(prefix + "/")})
        fitted = attrs["fitted"]
        model.n_iter_, model.topic_word_prior_ = int(fitted["n_iter"]), fitted["topic_word_prior"]
        model.n_features_in_, model.vocabulary_ = int(fitted["n_features_in"]), words
        if fitted["has_feature_names"]:
            model.feature_names_in_ = np.asarray(words, dtype=object)
        return model
    fs, path = get_fs(join(url, "model.zarr"))
    if not fs.exists(path):
        raise StoreError(f"{url}: neither a saved model (RectifiedAnchorWords.save writes one) nor a run root with "
                         "fitted models (model.zarr)")
    check_name(name, "name", "load_model", allow_none=True)
    names = list_models(url)
    if name is None:
        if len(names) != 1:
            raise StoreError(f"{url}: choose a model with name=...; fitted models: {names or 'none'}")
        name = names[0]
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
                                     refine_sweeps=int(params.get("sweeps", 50)),
                                     doc_topic_prior=params.get("alpha", "auto"),
                                     topic_word_prior=params.get("eta", 0.05))
    model.__dict__.update(state)
    return model


def _json_params(params: dict[str, Any]) -> dict[str, Any]:
    """The constructor's parameters as JSON values (``work_dir`` as a string)."""
    return {k: (os.fspath(v) if isinstance(v, os.PathLike) else v) for k, v in params.items()}
