"""Pure numpy/scipy kernels: no dask, no I/O, no logging.

Matrix symbols follow Lee, Bindel & Mimno (2015): ``H`` word counts (documents
× words), ``C`` the joint word co-occurrence, ``B`` word–topic, ``A``
topic–topic, ``S`` the anchor words.
"""
