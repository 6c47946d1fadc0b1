"""jsmf_dask: Rectified Anchor Words topic inference on Dask.

The stages of Lee, Bindel & Mimno (NIPS 2015), out of core:

- :func:`ingest`: raw input → curated Parquet corpus (``<root>/corpus``);
- :func:`cooccur`: corpus → co-occurrence matrix ``C`` (``<root>/cooc.zarr``);
- :func:`fit` / :class:`RectifiedAnchorWords`: ``C`` → rectified ``C``, anchors,
  ``B`` and ``A`` (``<root>/model.zarr/<name>``);
- :func:`refine`: sweeps of CVB0 (or variational Bayes) over the documents
  from a fitted model (``<root>/model.zarr/<name>-cvb0``), with learned
  priors: held-out perplexity at or below Gibbs sampling's;
- :func:`evaluate`, :func:`compare`, :func:`report`: the paper's metrics, K
  sweeps against the Baseline, DC and Gibbs, and the HTML report
  (``<root>/report``);
- :func:`infer` / :meth:`RectifiedAnchorWords.transform`: each document's topic
  composition (``<root>/doc_topics.parquet``);
- :func:`synth`: a corpus drawn from known ``B`` and ``A``.

For a ``C`` held in memory, :func:`rectify`, :func:`find_anchors` and
:func:`recover` are the same steps as plain functions.
"""

from importlib.metadata import PackageNotFoundError, version

from jsmf_dask import config  # noqa: F401  (registers the jsmf dask.config defaults)
from jsmf_dask._estimator import RectifiedAnchorWords
from jsmf_dask.io.model_store import open_model
from jsmf_dask.io.zarr_store import open_cooccurrence
from jsmf_dask.kernels.factorize import find_anchors, recover, rectify
from jsmf_dask.pipeline import CooccurrenceSummary, IngestReport, cooccur, ingest
from jsmf_dask.pipeline.compare import compare
from jsmf_dask.pipeline.evaluate import evaluate
from jsmf_dask.pipeline.fit import FitResult, fit
from jsmf_dask.pipeline.infer import infer
from jsmf_dask.pipeline.refine import RefineResult, refine
from jsmf_dask.pipeline.report import report
from jsmf_dask.pipeline.synth import synth

try:
    __version__ = version("jsmf_dask")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "RectifiedAnchorWords",
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
