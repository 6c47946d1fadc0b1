"""jsmf_dask: Rectified Anchor Words topic inference on Dask.

The stages of Lee, Bindel & Mimno (NIPS 2015), out of core:

- :func:`ingest`: raw input → curated Parquet corpus (``<root>/corpus``);
- :func:`cooccur`: corpus → co-occurrence matrix ``C`` (``<root>/cooc.zarr``);
- :func:`fit` / :class:`RectifiedAnchorWords`: ``C`` → rectified ``C``, anchors,
  ``B`` and ``A`` (``<root>/model.zarr/<name>``);
- :func:`refine`: sweeps of CVB0 (or sampled passes, or variational Bayes) over
  the documents from a fitted model (``<root>/model.zarr/<name>-refined``), with learned
  priors: held-out perplexity at or below Gibbs sampling's;
- :func:`evaluate`, :func:`compare`, :func:`report`: the paper's metrics, K
  sweeps against the Baseline, DC and Gibbs, and the HTML report
  (``<root>/report``);
- :func:`infer` / :meth:`RectifiedAnchorWords.transform`: each document's topic
  composition (``<root>/doc_topics/<model>/``); :func:`load_model` reads a model
  back (saved by :meth:`RectifiedAnchorWords.save`, or by name from a run root);
- :func:`synth`: a corpus drawn from known ``B`` and ``A``.

For a ``C`` held in memory, :func:`rectify`, :func:`find_anchors` and
:func:`recover` are the same steps as plain functions.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

try:
    __version__ = version("jsmf_dask")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

#: public name → the module that defines it. Imported on first use (PEP 562), so that ``import
#: jsmf_dask`` and the ``jsmf`` command's argument errors and ``--help`` do not load numpy, dask or zarr.
_HOMES = {
    "RectifiedAnchorWords": "jsmf_dask.estimator.model",
    "load_model": "jsmf_dask.estimator.load",
    "rectify": "jsmf_dask.kernels.factorize",
    "find_anchors": "jsmf_dask.kernels.factorize",
    "recover": "jsmf_dask.kernels.factorize",
    "fit": "jsmf_dask.pipeline.fit",
    "FitResult": "jsmf_dask.pipeline.fit_model",
    "refine": "jsmf_dask.pipeline.refine",
    "RefineResult": "jsmf_dask.pipeline.refine",
    "synth": "jsmf_dask.pipeline.synth",
    "evaluate": "jsmf_dask.pipeline.evaluate",
    "compare": "jsmf_dask.pipeline.compare",
    "choose_k": "jsmf_dask.pipeline.choose_k",
    "report": "jsmf_dask.pipeline.report",
    "infer": "jsmf_dask.pipeline.infer",
    "open_model": "jsmf_dask.io.model_store",
    "ingest": "jsmf_dask.pipeline.ingest",
    "IngestReport": "jsmf_dask.pipeline.ingest",
    "cooccur": "jsmf_dask.pipeline.cooccur",
    "CooccurrenceSummary": "jsmf_dask.pipeline.cooccur",
    "open_cooccurrence": "jsmf_dask.io.zarr_store",
}

__all__ = [
    "RectifiedAnchorWords",
    "load_model",
    "rectify",
    "find_anchors",
    "recover",
    "fit",
    "FitResult",
    "refine",
    "RefineResult",
    "synth",
    "evaluate",
    "compare",
    "choose_k",
    "report",
    "infer",
    "open_model",
    "ingest",
    "IngestReport",
    "cooccur",
    "CooccurrenceSummary",
    "open_cooccurrence",
    "__version__",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from jsmf_dask.estimator.model import RectifiedAnchorWords
    from jsmf_dask.estimator.load import load_model
    from jsmf_dask.io.model_store import open_model
    from jsmf_dask.io.zarr_store import open_cooccurrence
    from jsmf_dask.kernels.factorize import find_anchors, recover, rectify
    from jsmf_dask.pipeline.choose_k import choose_k
    from jsmf_dask.pipeline.compare import compare
    from jsmf_dask.pipeline.cooccur import CooccurrenceSummary, cooccur
    from jsmf_dask.pipeline.evaluate import evaluate
    from jsmf_dask.pipeline.fit import fit
    from jsmf_dask.pipeline.fit_model import FitResult
    from jsmf_dask.pipeline.infer import infer
    from jsmf_dask.pipeline.ingest import IngestReport, ingest
    from jsmf_dask.pipeline.refine import RefineResult, refine
    from jsmf_dask.pipeline.report import report
    from jsmf_dask.pipeline.synth import synth


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'jsmf_dask' has no attribute {name!r}")
    importlib.import_module("jsmf_dask.config")  # the jsmf dask.config defaults, registered with the first stage
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API (what tab completion offers), not this module's own imports."""
    return sorted(__all__)
