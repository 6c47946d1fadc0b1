"""Stage runners: validate, build the stage's graphs, compute them, commit the output atomically.

One module per stage (``ingest``, ``cooccur``, ``fit``, ``refine``, …), imported on its own: a command
loads only what its stage needs (the top-level :mod:`jsmf_dask` names them all, lazily).
"""
