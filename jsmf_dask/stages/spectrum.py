"""Graph builder for the top eigenpairs of a stored ``C`` (``choose-k``: its scree plot, and every K's AP start)."""

from __future__ import annotations

import dask
import numpy as np

from jsmf_dask.io.zarr_store import read_checked_C
from jsmf_dask.kernels.eigen import start_block, top_eigenpairs

__all__ = ["eigenpairs_task"]


def _eigenpairs(cooc_url: str, k: int, seed: int, tol: float) -> tuple[np.ndarray, np.ndarray]:
    C = read_checked_C(cooc_url)
    pairs = top_eigenpairs(lambda X: C @ X, C.shape[0], k, tol=tol, rng=np.random.default_rng(seed), cold="auto")
    return pairs.values, start_block(pairs)


def eigenpairs_task(cooc_url: str, k: int, *, seed: int = 0, tol: float = 1e-6) -> dask.delayed:
    """One delayed ``(values, block)``: the top ``k`` eigenvalues of the ``C`` of the store at ``cooc_url``
    (descending) to the relative residual ``tol``, and the block of vectors that holds their eigenvectors first
    (:func:`~jsmf_dask.kernels.eigen.start_block`), read whole (and checked) in one task.

    The task holds ``C`` (``8N²`` bytes) and the eigensolver's blocks, as the
    in-task fit does (:func:`jsmf_dask.pipeline.fit_plan.in_task_memory`); the
    cold start is the block Krylov one a fit's dense C gets (``cold='auto'``).
    """
    return dask.delayed(_eigenpairs, pure=True)(cooc_url, k, seed, tol)
