"""A fitted ``RectifiedAnchorWords``'s state from and to storage: run-root models and saved models."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from jsmf_dask.io.model_store import open_model
from jsmf_dask.io.parquet import corpus_dir, read_vocabulary
from jsmf_dask.pipeline.transform import reading_settings
from jsmf_dask.io.saved_model import read_saved_model, write_saved_model

__all__ = ["fitted_state", "save_model", "saved_state", "unrefined", "ARRAYS", "TRACES"]

#: The fitted attributes a saved model keeps as arrays (name in the store → attribute).
ARRAYS = {"B": "components_", "spectral_B": "spectral_components_", "A": "topic_topic_",
           "A_least_squares": "topic_topic_least_squares_", "anchors": "anchors_", "eigenvalues": "eigenvalues_",
           "alpha": "doc_topic_prior_"}
TRACES = {"trace/rectification": "rectification_history_", "trace/refine": "refine_history_"}


def unrefined() -> dict[str, Any]:
    """The refinement's fitted attributes of a model without one."""
    return {"refine_history_": {}, "refit_": None, "drawn_sweeps_": None, "refine_method_": None,
            "refine_start_": None}


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
        "anchors_": source.arrays.get("anchors", np.zeros(0, np.int64)),
        "eigenvalues_": source.arrays.get("eigenvalues", np.zeros(0)),
        "rectification_history_": dict(source.trace), **unrefined(), "doc_topic_prior_": source.arrays.get("alpha"),
        "topic_word_prior_": source.attrs.get("eta"), "n_iter_": int(source.attrs.get("n_iter", 0)),
        "vocabulary_": words,
        "n_features_in_": len(words),
        "provenance_": {"root": root, "model": refined or spectral, "spectral_model": spectral,
                        "reading": reading_settings(root)},
    }
    if refined is not None:
        model = open_model(root, refined)
        state |= {"components_": np.ascontiguousarray(model.arrays["B"].T), "topic_topic_": model.arrays["A"],
                  "doc_topic_prior_": model.arrays["alpha"], "topic_word_prior_": float(model.attrs["eta"]),
                  "refine_history_": dict(model.trace), "n_iter_": int(model.attrs["n_iter"]),
                  "refit_": model.attrs.get("refit"), "drawn_sweeps_": model.attrs.get("drawn_sweeps", 0),
                  # the method run (a model refined before 'auto' existed records only the one asked for)
                  "refine_method_": model.attrs.get("method", model.attrs["params"]["method"]),
                  # where the kept run started (a model refined before session 38 started from its source)
                  "refine_start_": model.attrs.get("start", "spectral")}
    return state


def save_model(estimator, path: str, *, overwrite: bool = False) -> str:
    """Write a fitted estimator to ``path`` (:func:`~jsmf_dask.io.saved_model.write_saved_model`)."""
    arrays = {name: getattr(estimator, attr) for name, attr in ARRAYS.items()
              if getattr(estimator, attr, None) is not None}
    for prefix, attr in TRACES.items():
        arrays |= {f"{prefix}/{key}": np.asarray(values) for key, values in getattr(estimator, attr).items()}
    attrs = {
        "params": _json_params(estimator.get_params()),
        "provenance": estimator.provenance_,
        "fitted": {"n_iter": estimator.n_iter_, "topic_word_prior": estimator.topic_word_prior_,
                   "refit": estimator.refit_, "drawn_sweeps": estimator.drawn_sweeps_,
                   "refine_method": estimator.refine_method_, "refine_start": estimator.refine_start_,
                   "n_features_in": estimator.n_features_in_,
                   "has_feature_names": hasattr(estimator, "feature_names_in_")},
    }
    return write_saved_model(path, arrays, attrs, list(estimator.vocabulary_), overwrite=overwrite)


def _json_params(params: dict[str, Any]) -> dict[str, Any]:
    """The constructor's parameters as JSON values (``work_dir`` as a string)."""
    return {k: (os.fspath(v) if isinstance(v, os.PathLike) else v) for k, v in params.items()}


def saved_state(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(params, fitted attributes)`` of the saved estimator at ``url`` (:func:`save_model`)."""
    arrays, attrs, words = read_saved_model(url)
    state: dict[str, Any] = {attr: arrays.get(key) for key, attr in ARRAYS.items()}
    for prefix, attr in TRACES.items():
        state[attr] = {k.rsplit("/", 1)[1]: v for k, v in arrays.items() if k.startswith(prefix + "/")}
    fitted = attrs["fitted"]
    state |= {"n_iter_": int(fitted["n_iter"]), "topic_word_prior_": fitted["topic_word_prior"],
              "refit_": fitted.get("refit"),  # None in a file saved before it was recorded
              "drawn_sweeps_": fitted.get("drawn_sweeps"),
              "refine_method_": fitted.get("refine_method"),  # None in a file saved before it was recorded
              "refine_start_": fitted.get("refine_start"),  # likewise
              "n_features_in_": int(fitted["n_features_in"]), "vocabulary_": words,
              "provenance_": attrs.get("provenance", {})}
    if fitted["has_feature_names"]:
        state["feature_names_in_"] = np.asarray(words, dtype=object)
    return attrs["params"], state
