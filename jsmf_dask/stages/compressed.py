"""Graph builders for the compressed co-occurrence: ``C`` as an operator on the corpus, never as N×N.

``C = (H̃ᵀH̃ + diag(diagonal − squares)) / entry_sum`` (see
:mod:`jsmf_dask.kernels.cooccurrence`), so ``C V`` for a thin N×p block ``V``
is one pass over the documents: each task multiplies its blocks' scaled counts
``H̃ᵀ(H̃ V)`` and a tree of sums adds the N×p partials; the driver adds the
diagonal term. The scaled counts of every row group are built once
(:func:`scaled_blocks`) and kept on the workers (``persist``) for the passes of
the eigensolver: about 12 bytes per non-zero of the corpus, spread over the
workers; a worker that dies has its blocks rebuilt from Parquet by Dask.

Memory per product task: its blocks' non-zeros, ``V`` and its N×p partial.
"""

from __future__ import annotations

import dataclasses

import dask
import numpy as np
import pyarrow as pa
from dask.base import tokenize

from jsmf_dask.io.parquet import Block, doc_id_hashes, read_block
from jsmf_dask.kernels.cooccurrence import BlockTotals, block_contribution, count_matrix, gram_product
from jsmf_dask.kernels.doc_split import DocumentSplit

__all__ = ["scaled_blocks", "block_totals", "product_task"]


def _scaled_block(block: Block, n_words: int, split: DocumentSplit, weighting: str):
    table = read_block(block, n_words)
    hashes = doc_id_hashes(table.column("doc_id"))
    held, valid = split.masks(table.column("doc_id"))
    table = table.filter(pa.array(~(held | valid)))
    ids = table.column("word_ids").combine_chunks()
    cnt = table.column("counts").combine_chunks()
    H = count_matrix(ids.offsets.to_numpy(), ids.flatten().to_numpy(), cnt.flatten().to_numpy(), n_words)
    (Ht,), totals = block_contribution(H, np.array([0, n_words]), weighting)
    return Ht, dataclasses.replace(totals, n_validation=int(valid.sum())), hashes


def scaled_blocks(blocks: list[Block], n_words: int, split: DocumentSplit = DocumentSplit(), *,
                  weighting: str) -> list[dask.delayed]:
    """One delayed ``(H̃, BlockTotals, doc_id hashes)`` per row-group block (held-out and validation documents
    not counted; each document weighed by ``weighting``, :data:`~jsmf_dask.parameters.WEIGHTINGS`)."""
    token = tokenize(blocks, n_words, split, weighting)
    return [dask.delayed(_scaled_block, pure=True)(b, n_words, split, weighting,
                                                    dask_key_name=f"scaled-counts-{token}-{i}")
            for i, b in enumerate(blocks)]


def _summary(part) -> tuple[BlockTotals, list[np.ndarray]]:
    _, totals, hashes = part
    return totals, [hashes]


def _totals(*parts: tuple[BlockTotals, list[np.ndarray]]) -> tuple[BlockTotals, list[np.ndarray]]:
    total, hashes = parts[0][0], list(parts[0][1])
    for t, h in parts[1:]:
        total = total + t
        hashes.extend(h)
    return total, hashes


def block_totals(scaled: list, *, split_every: int = 8) -> dask.delayed:
    """The corpus's :class:`BlockTotals` and the blocks' doc_id hashes (in block order), as one delayed.

    Each block's totals are taken where its scaled counts live and added in a
    tree of ``split_every``: no task gathers the counts themselves (one task
    over every block moved the whole persisted corpus to one worker, which
    killed 2 GiB workers at N = 100,000).
    """
    token = tokenize(scaled)
    parts = [dask.delayed(_summary, pure=True)(s, dask_key_name=f"scaled-summary-{token}-{i}")
             for i, s in enumerate(scaled)]
    return _tree_sum(parts, _totals, split_every, f"scaled-totals-{token}")


def _tree_sum(parts: list, add, split_every: int, name: str) -> dask.delayed:
    """``add`` over ``parts`` in a tree of ``split_every``, in order (keys ``<name>-<level>-<i>``)."""
    level = 0
    while len(parts) > 1:
        parts = [dask.delayed(add, pure=True)(*parts[i : i + split_every], dask_key_name=f"{name}-{level}-{i}")
                 for i in range(0, len(parts), split_every)]
        level += 1
    return parts[0]


def _product(V: np.ndarray, *parts) -> np.ndarray:
    out = np.zeros_like(V)
    for Ht, _, _ in parts:
        out += gram_product(Ht, V)
    return out


def _add(*parts: np.ndarray) -> np.ndarray:
    out = parts[0].copy()
    for p in parts[1:]:
        out += p
    return out


def product_task(scaled: list, V, *, n_tasks: int, split_every: int = 4) -> dask.delayed:
    """``Σ_blocks H̃ᵀ(H̃ V)`` as one delayed: ``n_tasks`` tasks over consecutive blocks, then a tree of sums.

    ``V`` may be an array or a delayed/scattered one. The order of the sums is
    fixed, so the result does not depend on the number of workers.
    """
    token = tokenize(scaled, V)
    step = max(1, -(-len(scaled) // max(1, n_tasks)))
    parts = [dask.delayed(_product, pure=True)(V, *scaled[i : i + step], dask_key_name=f"cooc-product-{token}-{i}")
             for i in range(0, len(scaled), step)]
    return _tree_sum(parts, _add, split_every, f"cooc-product-sum-{token}")
