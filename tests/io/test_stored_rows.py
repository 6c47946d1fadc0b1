"""StoredRows: rows of a stored N×N array, scaled and with a diagonal of its own, read a block at a time."""

from __future__ import annotations

import pickle

import dask
import numpy as np
import pytest
import zarr

from jsmf_dask.io.stored_rows import StoredRows

N, TILE = 200, 16


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("rows") / "c.zarr")
    rng = np.random.default_rng(0)
    C = rng.random((N, N))
    C = C + C.T
    group = zarr.open_group(url, mode="w")
    group.create_array("C", shape=C.shape, chunks=(TILE, TILE), dtype="float64")[...] = C
    return url, C


def _expected(C, scale, diagonal):
    out = C / scale
    if diagonal is not None:
        np.fill_diagonal(out, diagonal)
    return out


@pytest.mark.parametrize("with_diagonal", [False, True])
def test_rows_in_any_order_equal_the_dense_reference(stored, with_diagonal):
    url, C = stored
    diagonal = np.arange(N, dtype=np.float64) + 0.5 if with_diagonal else None
    rows = StoredRows(url, "C", scale=4.0, diagonal=diagonal)
    expected = _expected(C, 4.0, diagonal)
    index = np.array([7, 3, 150, 3, 199])
    np.testing.assert_array_equal(rows.rows(index), expected[index])
    np.testing.assert_array_equal(rows.rows(slice(10, 42)), expected[10:42])


def test_to_dask_blocks_equal_the_dense_reference(stored):
    url, C = stored
    diagonal = np.linspace(1.0, 2.0, N)
    lazy = StoredRows(url, "C", scale=2.0, diagonal=diagonal).to_dask(block_bytes=8 * N * TILE)
    assert lazy.numblocks[0] == -(-N // TILE)  # one block per row of tiles: the smallest block is a tile's rows
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_array_equal(lazy.compute(), _expected(C, 2.0, diagonal))


def test_to_dask_puts_the_diagonal_in_the_graph_once_not_in_every_block_task(stored):
    # distributed sends each task to its worker on its own: a diagonal inside each block's task would travel
    # once per block (40 MB of graph for the report's PCA of a DC model at N = 100k).
    url, _ = stored
    diagonal = np.ones(50_000)  # larger than N so that it dominates any task that carries it
    lazy = StoredRows(url, "C", diagonal=diagonal).to_dask(block_bytes=8 * N * TILE)
    graph = dict(lazy.__dask_graph__())
    sizes = sorted(len(pickle.dumps(task)) for task in graph.values())
    assert len(graph) > lazy.numblocks[0]
    assert sizes[-1] > diagonal.nbytes  # the one task holding the object
    assert sizes[-2] < diagonal.nbytes / 10, sizes[-2]
