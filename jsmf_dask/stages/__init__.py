"""stages layer of jsmf_dask."""
