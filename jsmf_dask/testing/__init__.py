"""testing layer of jsmf_dask."""
