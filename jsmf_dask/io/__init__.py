"""io layer of jsmf_dask."""
