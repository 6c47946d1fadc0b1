"""Graph builders for ``refine``: one variational-Bayes sweep as a map over row groups and a tree sum.

A sweep is the same bag-over-row-groups shape as ``cooccur``: each task reads
one Parquet row group, drops its held-out documents, runs the E-step
(:func:`jsmf_dask.kernels.variational.e_step`) from the documents' ``γ`` of the
previous sweep and returns the block's expected word–topic counts (N×K); a
tree of sums reduces them, so the driver receives one N×K array a sweep and
never a per-document object. ``γ`` stays out of the driver: each task reads
its block's ``γ`` from ``<scratch>/gamma-<s mod 2>/`` and writes the new one to
the other generation, so a task that runs twice (a worker died) reads the same
input and writes the same output.

Memory per task, O(N·K + rows of a block): the block's count matrix (its
non-zeros), its ``γ`` (rows × K), the N×K ``exp(E[log β])`` and expected
counts, and the compiled E-step's buffer of one document (its distinct words
× K). At N = 15,000, K = 100 and 10,000-document row groups: 2 × 12 MB for
the N×K arrays, 8 MB of ``γ``, ~20 MB of counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from dask.base import tokenize

from jsmf_dask.io.fs import get_fs, join
from jsmf_dask.io.parquet import Block, read_block, shard_name
from jsmf_dask.io.schema import doc_topics_schema
from jsmf_dask.kernels.heldout import heldout_mask
from jsmf_dask.kernels.variational import e_step, expected_topic_topic
from jsmf_dask.stages.infer import block_counts

__all__ = ["SweepParams", "BlockSums", "sweep_tasks", "finish_tasks", "tree_sum", "gamma_dir"]


@dataclass(frozen=True)
class SweepParams:
    """What every sweep task needs besides its block and the topics."""

    n_words: int
    alpha: np.ndarray
    heldout: float
    max_inner: int
    inner_tol: float


@dataclass
class BlockSums:
    """Sums over the training documents of one or more blocks (they add up over blocks).

    Attributes
    ----------
    counts : ndarray, shape (N, K), or None
        Expected word–topic counts (sweeps only).
    topic_topic : ndarray, shape (K, K), or None
        Unnormalised ``A`` from the documents' expected topic counts (last pass only).
    bound : float
        Documents' part of the evidence lower bound at the incoming state.
    n_docs, n_tokens, iterations : int
    """

    counts: np.ndarray | None
    topic_topic: np.ndarray | None
    bound: float
    n_docs: int
    n_tokens: int
    iterations: int


def gamma_dir(scratch: str, sweep: int) -> str:
    """Where sweep ``sweep`` writes ``γ`` (two generations alternate)."""
    return join(scratch, f"gamma-{sweep % 2}")


def _gamma_url(directory: str, index: int) -> str:
    return join(directory, f"block-{index:05d}.npy")


def _load_gamma(url: str) -> np.ndarray:
    fs, path = get_fs(url)
    with fs.open(path, "rb") as f:
        return np.load(f)


def _save_gamma(url: str, gamma: np.ndarray) -> None:
    fs, path = get_fs(url)
    with fs.open(path, "wb") as f:
        np.save(f, gamma)


def _training(block: Block, params: SweepParams) -> tuple[pa.Table, object]:
    table = read_block(block, params.n_words)
    if params.heldout > 0:
        table = table.filter(pa.array(~heldout_mask(table.column("doc_id"), params.heldout)))
    return table, block_counts(table, params.n_words)


def _sweep_block(block: Block, index: int, params: SweepParams, exp_elog_beta: np.ndarray,
                 gamma_in: str | None, gamma_out: str) -> BlockSums:
    _, X = _training(block, params)
    gamma = None if gamma_in is None else _load_gamma(_gamma_url(gamma_in, index))
    res = e_step(X, exp_elog_beta, params.alpha, gamma, max_iter=params.max_inner, tol=params.inner_tol)
    _save_gamma(_gamma_url(gamma_out, index), res.gamma)
    return BlockSums(res.counts, None, res.bound, X.shape[0], int(X.sum()), res.iterations)


def _finish_block(block: Block, index: int, params: SweepParams, exp_elog_beta: np.ndarray, gamma_in: str,
                  out_dir: str) -> BlockSums:
    table, X = _training(block, params)
    gamma = _load_gamma(_gamma_url(gamma_in, index))
    res = e_step(X, exp_elog_beta, params.alpha, gamma, max_iter=0)
    k = gamma.shape[1]
    theta = gamma / gamma.sum(axis=1, keepdims=True)
    lengths = np.asarray(X.sum(axis=1)).ravel().astype(np.int64)
    out = pa.table([table.column("doc_id"), pa.array(lengths), pa.FixedSizeListArray.from_arrays(
        pa.array(theta.ravel()), k)], schema=doc_topics_schema(k))
    fs, path = get_fs(join(out_dir, shard_name(index)))
    with fs.open(path, "wb") as f:
        pq.write_table(out, f)
    return BlockSums(None, expected_topic_topic(gamma, params.alpha), res.bound, X.shape[0], int(lengths.sum()), 0)


def _add(*parts: BlockSums) -> BlockSums:
    def total(name):
        values = [getattr(p, name) for p in parts if getattr(p, name) is not None]
        return np.sum(values, axis=0) if values else None

    return BlockSums(total("counts"), total("topic_topic"), float(sum(p.bound for p in parts)),
                     sum(p.n_docs for p in parts), sum(p.n_tokens for p in parts),
                     sum(p.iterations for p in parts))


def tree_sum(parts: list, *, split_every: int = 8, prefix: str = "refine-sum") -> dask.delayed:
    """Reduce delayed :class:`BlockSums` by a tree of sums (fixed order, so the result is deterministic)."""
    level = 0
    while len(parts) > 1:
        parts = [
            dask.delayed(_add, pure=True)(*parts[i : i + split_every],
                                          dask_key_name=f"{prefix}-{level}-{tokenize(parts[i:i + split_every])}")
            for i in range(0, len(parts), split_every)
        ]
        level += 1
    return parts[0]


def sweep_tasks(blocks: list[Block], params: SweepParams, exp_elog_beta, gamma_in: str | None,
                gamma_out: str, *, sweep: int) -> dask.delayed:
    """One sweep: a task per block (E-step, writes its ``γ``) and their tree sum, as one delayed.

    ``exp_elog_beta`` may be an array or a scattered future/delayed of one. Keys
    carry a token of the inputs, so concurrent runs on one scheduler never share results.
    """
    token = tokenize(blocks, params, exp_elog_beta, gamma_in, gamma_out, sweep)
    parts = [
        dask.delayed(_sweep_block, pure=True)(block, i, params, exp_elog_beta, gamma_in, gamma_out,
                                              dask_key_name=f"refine-sweep{sweep}-{token}-{i}")
        for i, block in enumerate(blocks)
    ]
    return tree_sum(parts, prefix=f"refine-sum{sweep}-{token}")


def finish_tasks(blocks: list[Block], params: SweepParams, exp_elog_beta, gamma_in: str,
                 out_dir: str) -> dask.delayed:
    """The last pass: the bound of the final state, ``A``'s sums, and ``doc_topics`` parts written to ``out_dir``."""
    token = tokenize(blocks, params, exp_elog_beta, gamma_in, out_dir)
    parts = [
        dask.delayed(_finish_block, pure=True)(block, i, params, exp_elog_beta, gamma_in, out_dir,
                                               dask_key_name=f"refine-finish-{token}-{i}")
        for i, block in enumerate(blocks)
    ]
    return tree_sum(parts, prefix=f"refine-finish-sum-{token}")
