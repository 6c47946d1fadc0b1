"""Rows of an N×N array in a Zarr store, read a block at a time: the co-occurrence store's C, or a model's rectified C
that is C divided by a scale with a diagonal of its own (the Baseline, DC)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import zarr

from jsmf_dask.io.damage import reading
from jsmf_dask.io.zarr_store import read_group

__all__ = ["StoredRows"]


@dataclass(frozen=True, eq=False)
class StoredRows:
    """Rows of an N×N array kept in a Zarr store, divided by ``scale``, with the diagonal replaced by ``diagonal``.

    The Baseline's rectified C is ``cooc.zarr``'s C divided by its sum, and
    DC's the same with a completed diagonal: a model keeps only the scale and
    that diagonal (N floats) and reads the rest from the co-occurrence store,
    instead of a second N×N array (140 MB at N = 5,000). ``StoredRows(url,
    "C")`` is the store's C itself.

    Attributes
    ----------
    url : str
        The Zarr group holding the array.
    name : str
        The N×N array (``"C"``).
    scale : float
        What the stored entries are divided by.
    diagonal : ndarray, shape (N,), optional
        The diagonal of the result (after the scale); None keeps the stored one.
    """

    url: str
    name: str = "C"
    scale: float = 1.0
    diagonal: np.ndarray | None = None

    def array(self) -> zarr.Array:
        """The stored N×N array."""
        with reading(self.url, self.name):
            return read_group(self.url)[self.name]

    def rows(self, index: np.ndarray | slice) -> np.ndarray:
        """Rows ``index`` (an index array in any order, or a slice) as a dense array."""
        arr = self.array()
        if isinstance(index, slice):
            index = np.arange(*index.indices(arr.shape[0]))
        index = np.asarray(index, dtype=np.int64)
        with reading(self.url, self.name):
            if index.size and index[-1] - index[0] == index.size - 1 and (np.diff(index) == 1).all():
                out = arr[int(index[0]) : int(index[-1]) + 1, :]  # a block of rows: one slice
            else:
                out = arr.oindex[index, :]
        if self.scale != 1.0:
            out /= self.scale
        if self.diagonal is not None:
            out[np.arange(index.size), index] = self.diagonal[index]
        return out

    def to_dask(self, block_bytes: int = 64 << 20):
        """The whole matrix as a lazy dask array of blocks of whole rows, about ``block_bytes`` each.

        Blocks are sized for the work, not the store's tiles: a store of small
        tiles (``--tile-size 128``) would otherwise make a graph of thousands
        of tiny tasks, slow on a cluster; each block reads its tiles at once.
        """
        import dask
        import dask.array as da

        arr = self.array()
        n_rows, n_cols = arr.shape
        tile = arr.chunks[0]
        step = max(tile, (block_bytes // max(1, 8 * n_cols)) // tile * tile)
        # One key holds this object (and its diagonal, N floats); every block's task names that key, so the
        # diagonal travels once per worker instead of once per task. Each block is read by :meth:`rows`.
        stored = dask.delayed(self, pure=True)
        read = dask.delayed(_read_rows, pure=True)
        ends = [(r0, min(r0 + step, n_rows)) for r0 in range(0, n_rows, step)]
        blocks = [da.from_delayed(read(stored, slice(r0, r1)), shape=(r1 - r0, n_cols), dtype=np.float64)
                  for r0, r1 in ends]
        return da.concatenate(blocks, axis=0) if blocks else da.zeros((0, n_cols))

    def __dask_tokenize__(self):
        return (StoredRows, self.url, self.name, self.scale,
                None if self.diagonal is None else hashlib.sha256(self.diagonal.tobytes()).hexdigest())


def _read_rows(stored: StoredRows, index: slice) -> np.ndarray:
    """One block's task of :meth:`StoredRows.to_dask`."""
    return stored.rows(index)
