"""jsmf_dask: Rectified Anchor Words topic inference on Dask.

The stages of Lee, Bindel & Mimno (NIPS 2015), out of core:

- :func:`ingest`: raw input → curated Parquet corpus (``<root>/corpus``);
- :func:`cooccur`: corpus → co-occurrence matrix ``C`` (``<root>/cooc.zarr``).
"""

from importlib.metadata import PackageNotFoundError, version

from jsmf_dask import config  # noqa: F401  (registers the jsmf dask.config defaults)
from jsmf_dask.io.zarr_store import open_cooccurrence
from jsmf_dask.pipeline import CooccurrenceSummary, IngestReport, cooccur, ingest

try:
    __version__ = version("jsmf_dask")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "ingest",
    "IngestReport",
    "cooccur",
    "CooccurrenceSummary",
    "open_cooccurrence",
    "__version__",
]
