"""Graph builders for the co-occurrence matrix ``C`` (paper eq. 1, each document weighed), tile by tile.

Map: a Dask bag whose elements are row-group blocks; each block becomes its
scaled ``H̃`` split by word block (written to scratch storage as sparse
arrays, so worker memory does not grow with the corpus) plus small per-word
vectors. Reduce: one task per upper-triangular tile ``(I, J)`` streams the
blocks' ``H̃[:, I]`` and ``H̃[:, J]``, sums ``H̃[:, I]ᵀ H̃[:, J]`` and writes the
tile and its mirror into the pre-created Zarr array. A task holds
O(tile² + batch) memory, never O(N²).
"""

from __future__ import annotations

import dataclasses

import dask
import dask.bag as db
import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from dask.base import tokenize

from jsmf_dask.io.fs import join
from jsmf_dask.io.parquet import Block, doc_id_hashes, read_block
from jsmf_dask.io.scratch import load_sparse, save_sparse
from jsmf_dask.kernels.doc_split import DocumentSplit
from jsmf_dask.io.zarr_store import read_tile, write_tile
from jsmf_dask.kernels.cooccurrence import BlockTotals, block_contribution, count_matrix, mirror_upper, \
    tile_products

__all__ = [
    "even_tile_size",
    "word_block_edges",
    "block_partials",
    "corpus_summary",
    "block_hashes",
    "tile_tasks",
]


def even_tile_size(n_words: int, max_tile: int) -> int:
    """The edge of C's tiles: at most ``max_tile``, and as equal as they can be, ``⌈N / ⌈N / max⌉⌉``.

    Zarr stores every chunk whole, so a last tile of a few words would be
    written (and read) padded to a full one: at N = 4,956 with tiles of 2,048
    the chunks held 302 MB for a C of 196 MB; with tiles of 1,652 they hold
    exactly C.
    """
    return -(-n_words // -(-n_words // max_tile)) if n_words > 0 else max_tile


def word_block_edges(n_words: int, tile_size: int) -> np.ndarray:
    """Boundaries of the word blocks: ``[0, T, 2T, …, N]``."""
    return np.unique(np.concatenate([np.arange(0, n_words, tile_size), [n_words]])).astype(np.int64)


def _slice_url(scratch: str, block: int, word_block: int) -> str:
    return join(scratch, f"h-{block:05d}-{word_block:04d}.npz")


def _block_partial(
    item: tuple[int, Block], n_words: int, edges: np.ndarray, scratch: str, split: DocumentSplit, weighting: str
) -> tuple[BlockTotals, np.ndarray]:
    index, block = item
    table = read_block(block, n_words)
    hashes = doc_id_hashes(table.column("doc_id"))  # of every document: uniqueness covers held-out ones too
    held, valid = split.masks(table.column("doc_id"))
    table = table.filter(pa.array(~(held | valid)))
    ids = table.column("word_ids").combine_chunks()
    cnt = table.column("counts").combine_chunks()
    H = count_matrix(
        ids.offsets.to_numpy(),
        ids.flatten().to_numpy(),
        cnt.flatten().to_numpy(),
        n_words,
    )
    slices, totals = block_contribution(H, edges, weighting)
    for b, m in enumerate(slices):
        save_sparse(_slice_url(scratch, index, b), m)
    return dataclasses.replace(totals, n_validation=int(valid.sum())), hashes


def block_partials(blocks: list[Block], n_words: int, edges: np.ndarray, scratch: str,
                   split: DocumentSplit = DocumentSplit(), *, weighting: str) -> db.Bag:
    """Map: a bag with one ``(BlockTotals, doc_id hashes)`` per row-group block.

    Documents held out or kept for validation (:class:`~jsmf_dask.kernels.doc_split.DocumentSplit`)
    are not counted; their hashes are still returned. ``weighting``: each document's weight in ``C``
    (:data:`~jsmf_dask.parameters.WEIGHTINGS`). Side effect of each task: ``H̃[:, I]`` of its block for every word block
    ``I``, written under ``scratch`` (idempotent: a rerun rewrites the same files).
    """
    return db.from_sequence(list(enumerate(blocks)), npartitions=max(1, len(blocks))).map(
        _block_partial, n_words, edges, scratch, split, weighting
    )


def _sum_summaries(items) -> BlockTotals | None:
    total = None
    for s in items:
        total = s if total is None else total + s
    return total


def _first(pair):
    return pair[0]


def _second(pair):
    return pair[1]


def corpus_summary(partials: db.Bag) -> db.Item:
    """Reduce: the :class:`BlockTotals` of the whole corpus (summed on the workers)."""
    return partials.map(_first).reduction(_sum_summaries, _sum_summaries, split_every=8)


def block_hashes(partials: db.Bag) -> db.Bag:
    """The doc_id hashes of every block, in block order (8 bytes a document)."""
    return partials.map(_second)


def _tile(
    rows_block: int,
    cols_block: int,
    n_blocks: int,
    edges: np.ndarray,
    scratch: str,
    diagonal: np.ndarray | None,
    entry_sum: float,
    store: str,
    batch_nnz: int,
    codoc: bool,
    base: tuple[str, float] | None = None,
) -> tuple[int, int]:
    r0, r1 = int(edges[rows_block]), int(edges[rows_block + 1])
    c0, c1 = int(edges[cols_block]), int(edges[cols_block + 1])
    same = rows_block == cols_block
    cooc = np.zeros((r1 - r0, c1 - c0))
    counts = np.zeros((r1 - r0, c1 - c0), dtype=np.int64) if codoc else None
    left: list[sp.csr_array] = []
    right: list[sp.csr_array] = []
    pending = 0

    def flush() -> None:
        nonlocal left, right, pending
        if not left:
            return
        lhs = sp.vstack(left, format="csr") if len(left) > 1 else left[0]
        rhs = lhs if same else (sp.vstack(right, format="csr") if len(right) > 1 else right[0])
        tile_products(lhs, rhs, codoc=codoc, out=(cooc, counts), upper=same)
        left, right, pending = [], [], 0

    for b in range(n_blocks):
        lhs = load_sparse(_slice_url(scratch, b, rows_block))
        left.append(lhs)
        if not same:
            rhs = load_sparse(_slice_url(scratch, b, cols_block))
            right.append(rhs)
            pending += rhs.nnz
        pending += lhs.nnz
        if pending >= batch_nnz:
            flush()
    flush()
    if same:
        # The upper triangle mirrored (exact symmetry), and the exact diagonal Σ h(h−1)/(n(n−1)) (see
        # kernels.cooccurrence).
        mirror_upper(cooc)
        if counts is not None:
            mirror_upper(counts)
        np.fill_diagonal(cooc, diagonal)
    if base is not None:  # an update: add the stored sum (C_old × its entry_sum) and co-document counts
        cooc += read_tile(base[0], "C", (r0, r1), (c0, c1)) * base[1]
        if counts is not None:
            counts += read_tile(base[0], "D2", (r0, r1), (c0, c1))
    write_tile(
        store,
        (r0, r1),
        (c0, c1),
        np.divide(cooc, entry_sum, out=cooc),
        counts.astype(np.int32) if counts is not None else None,
    )
    return rows_block, cols_block


def tile_tasks(
    n_blocks: int,
    edges: np.ndarray,
    scratch: str,
    diagonal: np.ndarray,
    entry_sum: float,
    store: str,
    *,
    batch_nnz: int,
    codoc: bool = True,
    base: tuple[str, float] | None = None,
) -> list[dask.delayed]:
    """Reduce: one delayed task per upper-triangular tile ``(I, J)``, ``I <= J``.

    Each task writes ``C[I, J] / entry_sum`` and its mirror (and ``D2``) into
    the pre-created store at ``store`` and returns ``(I, J)``. With ``base =
    (url, old_entry_sum)`` (an update) the tile of the store at ``url`` times
    ``old_entry_sum`` is added first (and its ``D2``), so that ``entry_sum``
    is then the total of both.
    """
    token = tokenize(scratch, store, entry_sum, edges.tolist(), base)
    n_tiles = len(edges) - 1
    tasks = []
    for i in range(n_tiles):
        diag_i = diagonal[int(edges[i]) : int(edges[i + 1])]
        for j in range(i, n_tiles):
            tasks.append(
                dask.delayed(_tile, pure=True)(
                    i, j, n_blocks, edges, scratch, diag_i if i == j else None, entry_sum,
                    store, batch_nnz, codoc, base, dask_key_name=f"cooc-tile-{i}-{j}-{token}",
                )
            )
    return tasks
