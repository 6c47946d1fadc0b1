"""The block kernels of C against the slow dense reference, and by hand."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from jsmf_dask.kernels.cooccurrence import block_contribution, count_matrix, document_weights, mirror_upper, \
    tile_products
from tests.conftest import examples
from tests.conftest import dense_cooccurrence


def assemble(docs: list[dict[int, int]], n_words: int, tile: int, blocks: int, weighting: str = "documents"
             ) -> np.ndarray:
    """C from the kernels, as the stage combines them: blocks of documents × tiles of words."""
    edges = np.unique(np.r_[np.arange(0, n_words, tile), n_words])
    parts = []  # (slices, totals) of each block
    for chunk in np.array_split(np.arange(len(docs)), blocks):
        rows = [docs[i] for i in chunk]
        offsets = np.r_[0, np.cumsum([len(d) for d in rows])]
        ids = np.array([w for d in rows for w in sorted(d)], dtype=np.int32)
        cnt = np.array([d[w] for d in rows for w in sorted(d)], dtype=np.int32)
        parts.append(block_contribution(count_matrix(offsets, ids, cnt, n_words), edges, weighting))
    C = np.zeros((n_words, n_words))
    for i in range(len(edges) - 1):
        for j in range(len(edges) - 1):
            for slices, _ in parts:
                c, _ = tile_products(slices[i], slices[j], codoc=False)
                C[edges[i]:edges[i + 1], edges[j]:edges[j + 1]] += c
    np.fill_diagonal(C, sum(t.diagonal for _, t in parts))
    total = sum(t.entry_sum for _, t in parts)
    return C / total


def test_three_documents_by_hand():
    # h1 = (2, 1, 0), n = 3: (h hᵀ − diag h)/6 = [[2, 2, 0], [2, 0, 0], [0, 0, 0]]/6
    # h2 = (0, 1, 1), n = 2: [[0, 0, 0], [0, 0, 1], [0, 1, 0]]/2
    # h3 = (1, 0, 0), n = 1: skipped.  Sum has entry sum 2, so C = sum / 2:
    docs = [{0: 2, 1: 1}, {1: 1, 2: 1}, {0: 1}]
    expected = np.array([[1 / 6, 1 / 6, 0], [1 / 6, 0, 1 / 4], [0, 1 / 4, 0]])
    C = assemble(docs, 3, tile=2, blocks=2)
    np.testing.assert_allclose(C, expected, rtol=1e-15, atol=0)
    offsets = np.array([0, 2, 4, 5])
    H = count_matrix(offsets, np.array([0, 1, 1, 2, 0], np.int32), np.array([2, 1, 1, 1, 1], np.int32), 3)
    _, totals = block_contribution(H, np.array([0, 3]))
    assert (totals.n_docs, totals.n_short, totals.n_tokens) == (2, 1, 5)
    np.testing.assert_array_equal(totals.doc_freq, [1, 2, 1])
    np.testing.assert_allclose(totals.diagonal, [2 / 6, 0, 0], rtol=1e-15)
    assert abs(totals.entry_sum - 2.0) < 1e-15


def test_three_documents_weighted_by_their_tokens_by_hand():
    # The same documents, each weighed by its n: 3·[[2, 2, 0], [2, 0, 0], [0, 0, 0]]/6 + 2·[[0, 0, 0], [0, 0, 1],
    # [0, 1, 0]]/2 = [[1, 1, 0], [1, 0, 1], [0, 1, 0]], entry sum 5 = the two documents' tokens; its row sums
    # (2, 2, 1)/5 are the words' frequencies among those tokens.
    docs = [{0: 2, 1: 1}, {1: 1, 2: 1}, {0: 1}]
    C = assemble(docs, 3, tile=2, blocks=2, weighting="tokens")
    np.testing.assert_allclose(C, np.array([[1, 1, 0], [1, 0, 1], [0, 1, 0]]) / 5, rtol=1e-15, atol=0)
    np.testing.assert_allclose(C.sum(axis=1), [2 / 5, 2 / 5, 1 / 5], rtol=1e-15)


def test_document_weights_refuse_an_unknown_weighting():
    np.testing.assert_array_equal(document_weights(np.array([2.0, 7.0]), "tokens"), [2.0, 7.0])
    np.testing.assert_array_equal(document_weights(np.array([2.0, 7.0]), "documents"), [1.0, 1.0])
    with pytest.raises(ValueError, match="weighting must be one of"):
        document_weights(np.array([2.0]), "words")


def test_codoc_counts_are_binary_products():
    rng = np.random.default_rng(0)
    H = sp.csr_array(rng.poisson(0.3, size=(40, 12)))
    slices, _ = block_contribution(H, np.array([0, 5, 12]))
    _, d2 = tile_products(slices[0], slices[1])
    used = np.asarray(H.sum(axis=1)).ravel() >= 2
    Bin = (H.toarray()[used] > 0).astype(int)
    np.testing.assert_array_equal(d2, Bin[:, :5].T @ Bin[:, 5:])


documents = st.lists(
    st.dictionaries(st.integers(0, 11), st.integers(1, 6), min_size=0, max_size=8),
    min_size=1, max_size=25,
).filter(lambda docs: any(sum(d.values()) >= 2 for d in docs))


@settings(max_examples=examples(60), deadline=None)
@given(docs=documents, tile=st.integers(1, 12), blocks=st.integers(1, 4), weighting=st.sampled_from(
    ["documents", "tokens"]))
def test_matches_dense_reference_and_properties(docs, tile, blocks, weighting):
    blocks = min(blocks, len(docs))
    C = assemble(docs, 12, tile, blocks, weighting)
    R = dense_cooccurrence(docs, 12, weighting)
    # Both sum non-negative products in a different order: agreement to a few ulps of the largest entry.
    np.testing.assert_allclose(C, R, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(C, C.T)
    assert C.min() >= 0.0
    assert abs(C.sum() - 1.0) < 1e-12


@settings(max_examples=examples(60), deadline=None)
@given(n=st.integers(1, 40), block=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_mirror_upper_equals_the_dense_symmetrisation(n, block, seed):
    """Against ``triu(T) + triu(T, 1)ᵀ``: any size, blocks that do or do not divide it, ints and floats."""
    upper = np.triu(np.random.default_rng(seed).integers(0, 9, size=(n, n)))
    for tile in (upper.copy(), upper.astype(np.float64)):
        expected = np.triu(tile) + np.triu(tile, 1).T
        assert mirror_upper(tile, block=block) is tile
        np.testing.assert_array_equal(tile, expected)


@settings(max_examples=examples(60), deadline=None)
@given(docs=documents, blocks=st.integers(1, 4))
def test_weighted_by_tokens_the_row_sums_are_the_word_frequencies(docs, blocks):
    """Each document's rows of ``(h hᵀ − diag h)/(n − 1)`` sum to ``h``: C's row sums are the frequencies of the
    words among the counted documents' tokens (documents of one token are not counted)."""
    C = assemble(docs, 12, 5, min(blocks, len(docs)), "tokens")
    counted = [d for d in docs if sum(d.values()) >= 2]
    freq = np.zeros(12)
    for d in counted:
        for w, c in d.items():
            freq[w] += c
    np.testing.assert_allclose(C.sum(axis=1), freq / freq.sum(), rtol=1e-12, atol=1e-15)
