"""Graph builder for the eigenvalue spectrum of a stored ``C`` (``choose-k``'s scree plot)."""

from __future__ import annotations

import dask
import numpy as np

from jsmf_dask.io.zarr_store import StoredRows
from jsmf_dask.kernels.eigen import top_eigenpairs

__all__ = ["eigenvalues_task"]


def _eigenvalues(source: StoredRows, k: int, seed: int) -> np.ndarray:
    C = source.rows(slice(None))
    pairs = top_eigenpairs(lambda X: C @ X, C.shape[0], k, rng=np.random.default_rng(seed))
    return pairs.values


def eigenvalues_task(source: StoredRows, k: int, *, seed: int = 0) -> dask.delayed:
    """One delayed: the top ``k`` eigenvalues of the stored ``C`` (descending), read whole in one task.

    The task holds ``C`` (``8N²`` bytes) and the eigensolver's blocks, as the
    in-task fit does (:func:`jsmf_dask.pipeline.fit_plan.in_task_memory`).
    """
    return dask.delayed(_eigenvalues, pure=True)(source, k, seed)
