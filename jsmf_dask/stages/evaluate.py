"""Graph builders for evaluation: the measures that touch N×N data, as row-block tasks.

* :func:`fit_partials_tasks` — one pass over a stored ``C`` (the original in
  ``cooc.zarr``, or the Baseline's or DC's rectified C read from it) giving recovery and approximation
  partials and the row sums ``p(x)``.
* :func:`codoc_tasks` — the co-document counts among the topics' top words,
  read from ``D2`` by row blocks.
* :func:`document_scores_tasks` — document completion of the held-out or
  the validation documents under several models in one pass over the
  corpus's row groups, per document and in one order for every model (so
  models are compared document by document: paired standard errors).
* :func:`pca_coordinates` — every word's 2-D PCA coordinates of the rows of
  ``C̄`` (the paper's Figure 1), by dask's randomised SVD over the stored chunks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import dask
import numpy as np
import pyarrow as pa

from dask.base import tokenize

from jsmf_dask.io.parquet import Block, read_block
from jsmf_dask.io.stored_rows import StoredRows
from jsmf_dask.io.zarr_store import read_entries
from jsmf_dask.kernels.doc_split import DocumentSplit, doc_hashes, sample_mask
from jsmf_dask.kernels.heldout import FOLD_INS, document_completion, split_tokens
from jsmf_dask.kernels.metrics import fit_partials
from jsmf_dask.stages.infer import block_counts

if TYPE_CHECKING:
    import dask.array as da

__all__ = ["fit_partials_tasks", "codoc_tasks", "corpus_codoc_task", "document_scores_tasks", "DocumentScores",
           "pca_coordinates"]


def _fit_rows(source: StoredRows, rows: tuple[int, int], B_rows, BA, W_rows, Cbar_S):
    C_rows = source.rows(np.arange(*rows))
    return fit_partials(C_rows, B_rows, BA, W_rows, Cbar_S), C_rows.sum(axis=1)


def _combine(parts):
    total = parts[0][0]
    for p, _ in parts[1:]:
        total = total + p
    return total, np.concatenate([s for _, s in parts])


def fit_partials_tasks(
    source: StoredRows, B: np.ndarray, A: np.ndarray, *, W: np.ndarray | None = None,
    Cbar_S: np.ndarray | None = None, block: int = 1024,
) -> dask.delayed:
    """One delayed ``(FitPartials, row sums)`` over all row blocks of the stored ``C``.

    ``W`` and ``Cbar_S`` (the anchors' rows of ``C̄`` of this same ``C``) are
    needed for recovery; without them its partial is NaN.
    """
    n = B.shape[0]
    BA = dask.delayed(B @ A, pure=True)
    shared_S = dask.delayed(Cbar_S, pure=True) if Cbar_S is not None else None
    parts = [
        dask.delayed(_fit_rows, pure=True)(
            source, (r0, min(r0 + block, n)), B[r0 : r0 + block], BA,
            None if W is None else W[r0 : r0 + block], shared_S,
        )
        for r0 in range(0, n, block)
    ]
    return dask.delayed(_combine, pure=True)(parts)


def _codoc_rows(url: str, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return read_entries(url, "D2", rows, cols)


def codoc_tasks(url: str, words: np.ndarray, n_words: int, *, block: int) -> dask.delayed:
    """``D2[words][:, words]`` for sorted unique ``words``, gathered by row blocks of ``block`` words."""
    words = np.asarray(words, dtype=np.int64)
    pieces = []
    for r0 in range(0, n_words, block):
        sel = words[(words >= r0) & (words < r0 + block)]
        if sel.size:
            pieces.append(dask.delayed(_codoc_rows, pure=True)(url, sel, words))
    return dask.delayed(np.vstack, pure=True)(pieces)


def _corpus_codoc_block(block: Block, words: np.ndarray, n_words: int, split: DocumentSplit) -> np.ndarray:
    table = read_block(block, n_words)
    table = table.filter(pa.array(split.training(table.column("doc_id"))))  # as cooccur leaves them out
    X = block_counts(table, n_words)
    X = X[np.flatnonzero(np.asarray(X.sum(axis=1)).ravel() >= 2)]  # the documents C counts
    Xb = (X[:, words] > 0).astype(np.int64)
    return np.asarray((Xb.T @ Xb).toarray())


def corpus_codoc_task(blocks: list[Block], words: np.ndarray, n_words: int, split: DocumentSplit) -> dask.delayed:
    """``D2[words][:, words]`` counted from the corpus (the documents C counted: 2 or more tokens, neither held
    out nor validation by ``split``): one pass, O(|words|²) per task, for stores without ``D2``."""
    words = np.asarray(words, dtype=np.int64)
    token = tokenize(blocks, words, n_words, split)
    parts = [dask.delayed(_corpus_codoc_block, pure=True)(b, words, n_words, split,
                                                          dask_key_name=f"codoc-corpus-{token}-{i}")
             for i, b in enumerate(blocks)]
    level = 0
    while len(parts) > 1:
        parts = [dask.delayed(sum, pure=True)(parts[i : i + 8], dask_key_name=f"codoc-sum-{token}-{level}-{i}")
                 for i in range(0, len(parts), 8)]
        level += 1
    return parts[0]


def pca_coordinates(source: StoredRows, *, seed: int = 0) -> da.Array:
    """Lazy (N, 2): each word's projection on the top two principal axes of the rows of ``C̄``.

    ``C̄`` is the stored ``C`` with rows divided by their sums (all-zero rows
    stay zero), centred; the axes come from :func:`dask.array.linalg.svd_compressed`
    with power iterations, chunk by chunk of the store.
    """
    import dask.array as da  # 80 ms of imports, for the report's map only

    X = source.to_dask()
    p = X.sum(axis=1)
    Xbar = X / da.where(p > 0, p, 1.0)[:, None]
    centred = Xbar - Xbar.mean(axis=0)
    u, s, _ = da.linalg.svd_compressed(centred, k=2, n_power_iter=4, seed=seed, compute=False)
    return u * s


@dataclass(frozen=True)
class DocumentScores:
    """Document completion of a set of documents under several models (:func:`document_scores_tasks`).

    Attributes
    ----------
    hashes : ndarray of uint64, shape (M,)
        The scored documents' id hashes, in the order of every array here.
    n_tokens : ndarray, shape (M,)
        Scored tokens per document.
    log_likelihood : dict of str to ndarray, shape (M,)
        Each model's log likelihood of each document's scored tokens.
    n_floored : dict of str to int
        Each model's scored tokens whose probability was below the floor.
    """

    hashes: np.ndarray
    n_tokens: np.ndarray
    log_likelihood: dict
    n_floored: dict


def _scores_block(block: Block, n_words: int, split: DocumentSplit, which: str,
                  models: dict[str, tuple[np.ndarray, np.ndarray]], sample: float,
                  fold_ins: tuple[str, ...]) -> dict[str, DocumentScores]:
    table = read_block(block, n_words)
    hashes = doc_hashes(table.column("doc_id"))
    chosen = split.masks(hashes=hashes)[0 if which == "heldout" else 1] & sample_mask(hashes, sample)
    if not chosen.any():
        return {fold_in: DocumentScores(np.zeros(0, np.uint64), np.zeros(0), {name: np.zeros(0) for name in models},
                                        {name: 0 for name in models}) for fold_in in fold_ins}
    table = table.filter(pa.array(chosen))
    observed, scored = split_tokens(block_counts(table, n_words), hashes[chosen])
    out = {}
    for fold_in in fold_ins:  # the block read and split once for every fold-in
        ll, floored, n_tok = {}, {}, None
        for name, (B, alpha) in models.items():
            ll[name], n_tok, floored[name] = document_completion(observed, scored, B, alpha, fold_in=fold_in,
                                                                 hashes=hashes[chosen])
        out[fold_in] = DocumentScores(hashes[chosen], n_tok, ll, floored)
    return out


def _concat_scores(*parts: dict[str, DocumentScores]) -> dict[str, DocumentScores]:
    out = {}
    for fold_in in parts[0]:
        these = [p[fold_in] for p in parts]
        names = list(these[0].log_likelihood)
        out[fold_in] = DocumentScores(
            np.concatenate([p.hashes for p in these]), np.concatenate([p.n_tokens for p in these]),
            {name: np.concatenate([p.log_likelihood[name] for p in these]) for name in names},
            {name: sum(p.n_floored[name] for p in these) for name in names})
    return out


def document_scores_tasks(blocks: list[Block], n_words: int, split: DocumentSplit,
                          models: dict[str, tuple[np.ndarray, np.ndarray]], *,
                          which: str = "validation", sample: float = 1.0,
                          fold_ins: tuple[str, ...] = ("vb",)) -> dask.delayed:
    """One delayed dict of :class:`DocumentScores`, one per fold-in, over the held-out or the validation
    documents of ``split``.

    Document completion (:func:`~jsmf_dask.kernels.heldout.document_completion`)
    of every such document under each model, per document and in the same order
    for every model, so models can be compared document by document.

    Parameters
    ----------
    blocks : list of Block
    n_words : int
    split : DocumentSplit
    models : dict
        A name to ``(B, alpha)``: its topics and the document prior used to
        infer ``θ`` from each document's observed half.
    which : {'validation', 'heldout'}, default='validation'
    sample : float, default=1.0
        Score only this fraction of those documents, a sample by id
        (:func:`~jsmf_dask.kernels.doc_split.sample_mask`: the documents a
        refine with this ``validation_sample`` scored, and so never trained on).
    fold_ins : tuple of {'vb', 'sampled'}, default=('vb',)
        How ``θ`` of a document's observed half is inferred
        (:func:`~jsmf_dask.kernels.heldout.document_completion`): the result
        holds each one's scores under its name, the corpus read once for all.
    """
    if which not in ("validation", "heldout"):
        raise ValueError(f"which must be 'validation' or 'heldout', not {which!r}")
    fold_ins = tuple(fold_ins)
    if not fold_ins or any(f not in FOLD_INS for f in fold_ins):
        raise ValueError(f"fold_ins must be one or more of {FOLD_INS}, not {fold_ins!r}")
    shared = dask.delayed(models, pure=True)
    token = tokenize(blocks, n_words, split, which, models, sample, fold_ins)
    parts = [dask.delayed(_scores_block, pure=True)(b, n_words, split, which, shared, sample, fold_ins,
                                                    dask_key_name=f"doc-scores-{token}-{i}")
             for i, b in enumerate(blocks)]
    return dask.delayed(_concat_scores, pure=True)(*parts)
