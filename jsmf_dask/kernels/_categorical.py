"""The topic a uniform picks from unnormalised weights (numba; no dask, no I/O).

The collapsed Gibbs chain (:mod:`~jsmf_dask.kernels._chain_loop`) and the
sampled fold-in (:mod:`~jsmf_dask.kernels._completion_loop`) draw every token's
topic with it. The sampled pass (:mod:`~jsmf_dask.kernels._sampled_loop`) keeps
a fused form of the same walk (``_draw``), which computes each weight where it
adds it instead of reading a stored row.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True)
def pick(weights, total, u):
    """The first topic whose cumulative weight exceeds ``u * total`` (the last one if none does).

    ``weights`` are non-negative with sum ``total``; ``u`` is uniform in [0, 1).
    """
    target = u * total
    acc = 0.0
    for t in range(weights.size - 1):
        acc += weights[t]
        if acc > target:
            return t
    return weights.size - 1
