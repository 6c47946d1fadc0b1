"""Graph builder for the top eigenpairs of a stored ``C`` (``choose-k``: its scree plot, and every K's AP start)."""

from __future__ import annotations

import dask
import numpy as np

from jsmf_dask.io.zarr_store import StoredRows
from jsmf_dask.kernels.eigen import top_eigenpairs

__all__ = ["eigenpairs_task"]


def _eigenpairs(source: StoredRows, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    C = source.rows(slice(None))
    pairs = top_eigenpairs(lambda X: C @ X, C.shape[0], k, rng=np.random.default_rng(seed))
    return pairs.values, pairs.vectors


def eigenpairs_task(source: StoredRows, k: int, *, seed: int = 0) -> dask.delayed:
    """One delayed ``(values, vectors)``: the top ``k`` eigenpairs of the stored ``C`` (values descending), read
    whole in one task.

    The task holds ``C`` (``8N²`` bytes) and the eigensolver's blocks, as the
    in-task fit does (:func:`jsmf_dask.pipeline.fit_plan.in_task_memory`).
    """
    return dask.delayed(_eigenpairs, pure=True)(source, k, seed)
