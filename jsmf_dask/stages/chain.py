"""Graph builder for refine's chain start: a collapsed Gibbs chain on a sample of the training documents.

A task per row group reads its training documents (those the sweeps train on:
neither held out nor scored validation, :func:`jsmf_dask.stages.refine.split_block`)
and keeps a sample of them by id (:func:`~jsmf_dask.kernels.doc_split.sample_mask`);
one task stacks the samples in the order of their id hashes and runs the chain
(:func:`~jsmf_dask.kernels.chain.collapsed_chain`). So the chain sees the same
documents in the same order, and ends in the same state, whatever the row
groups and the cluster.
"""

from __future__ import annotations

import dask
import numpy as np
import scipy.sparse as sps
from dask.base import tokenize

from jsmf_dask.io.parquet import Block
from jsmf_dask.kernels.chain import collapsed_chain
from jsmf_dask.kernels.doc_split import sample_mask
from jsmf_dask.stages.refine import SweepParams, split_block

__all__ = ["chain_task"]


def _sample_block(block: Block, params: SweepParams, fraction: float) -> tuple[sps.csr_array, np.ndarray]:
    (X, hashes), *_ = split_block(block, params)
    chosen = sample_mask(hashes, fraction)
    return sps.csr_array(X[chosen]), hashes[chosen]


def _chain(samples: list[tuple[sps.csr_array, np.ndarray]], n_words: int, n_topics: int, alpha: float, eta: float,
           iterations: int, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    hashes = np.concatenate([h for _, h in samples]) if samples else np.zeros(0, np.uint64)
    X = sps.vstack([x for x, _ in samples], format="csr") if samples else sps.csr_array((0, n_words))
    X = sps.csr_array(X)[np.argsort(hashes, kind="stable")]
    word_topic, doc_topic = collapsed_chain(X, n_topics, alpha=alpha, eta=eta, iterations=iterations, seed=seed)
    return word_topic, doc_topic, int(X.sum())


def chain_task(blocks: list[Block], params: SweepParams, n_topics: int, *, fraction: float, alpha: float,
               eta: float, iterations: int, seed: int = 0) -> dask.delayed:
    """One delayed ``(word_topic, doc_topic, n_tokens)``: the last state of a collapsed Gibbs chain over a sample
    of ``fraction`` of the training documents of ``params`` (by id), and the tokens it sampled.

    Parameters
    ----------
    blocks : list of Block
    params : SweepParams
        Its ``split`` and ``validation_sample`` say which documents train (the chain samples among those only).
    n_topics : int
    fraction : float
        The share of the training documents sampled (by id).
    alpha, eta : float
        The chain's symmetric priors.
    iterations, seed : int
        Passes after the uniform start; the draws' seed.
    """
    token = tokenize(blocks, params, n_topics, fraction, alpha, eta, iterations, seed)
    samples = [dask.delayed(_sample_block, pure=True)(b, params, fraction, dask_key_name=f"chain-sample-{token}-{i}")
               for i, b in enumerate(blocks)]
    return dask.delayed(_chain, pure=True)(samples, params.n_words, n_topics, alpha, eta, iterations, seed,
                                           dask_key_name=f"chain-run-{token}")
