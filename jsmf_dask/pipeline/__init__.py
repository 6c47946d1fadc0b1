"""Stage runners: validate, build the stage's graphs, compute them, commit the output atomically."""

from jsmf_dask.pipeline.cooccur import CooccurrenceSummary, cooccur
from jsmf_dask.pipeline.ingest import IngestReport, ingest

__all__ = ["ingest", "IngestReport", "cooccur", "CooccurrenceSummary"]
