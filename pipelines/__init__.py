"""Runnable batch pipelines built on jsmf_dask (``python -m pipelines.<name>``)."""
