"""The fit on an anchor vocabulary: on an exact separable C, recovery against the vocabulary's columns and the
anchors' shares ρ give back the true B, whichever words the vocabulary holds besides the anchors."""

import numpy as np
import scipy.sparse as sps
from hypothesis import given, settings
from hypothesis import strategies as st

from jsmf_dask.kernels.anchor_words import AnchorColumns, anchor_vocabulary, column_shares, unrestricted_weights
from jsmf_dask.kernels.lowrank import LowRankCooccurrence
from jsmf_dask.kernels.recover import fix_anchor_rows, recover_weights, topic_word
from jsmf_dask.kernels.vocabulary import select_vocabulary


def _separable(seed: int, n_words: int, k: int):
    """An exact C = B A Bᵀ whose topic k has anchor word k (B's rows 0..K−1 are scaled unit vectors)."""
    rng = np.random.default_rng(seed)
    B = rng.dirichlet(np.full(n_words, 0.3), size=k).T
    B[:k] = 0.0
    B[np.arange(k), np.arange(k)] = rng.uniform(0.02, 0.1, k)
    B /= B.sum(axis=0)
    X = rng.gamma(1.0, size=(k, k))
    A = X @ X.T + np.diag(rng.uniform(0.5, 2.0, k))
    A /= A.sum()
    return B, A, B @ A @ B.T


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_words=st.integers(12, 60), k=st.integers(2, 6),
       share=st.floats(0.3, 1.0))
def test_recovery_against_the_vocabulary_columns_gives_the_true_topics(seed, n_words, k, share):
    B, A, C = _separable(seed, n_words, k)
    rng = np.random.default_rng(seed + 1)
    n = max(k + 1, int(share * n_words))
    # the vocabulary: the anchors and any other words
    words = np.sort(np.concatenate([np.arange(k), k + rng.choice(n_words - k, n - k, replace=False)]))
    columns = C[:, words]
    anchors = np.arange(k)
    Cbar = columns / columns.sum(axis=1, keepdims=True)
    G = Cbar[anchors] @ Cbar[anchors].T
    weights, objective, unconverged = recover_weights(G, Cbar @ Cbar[anchors].T, np.einsum("ij,ij->i", Cbar, Cbar))
    fix_anchor_rows(weights, objective, anchors)
    y = unrestricted_weights(weights, column_shares(columns, C.sum(axis=1), anchors))
    truth = B * A.sum(axis=1) / C.sum(axis=1)[:, None]  # p(z = k | w = i) = B_ik p(k) / p(i)
    assert unconverged == 0
    # exact to the active-set solver's rounding on K×K systems of entries ~1e-3 (the same bound as recover's tests)
    np.testing.assert_allclose(y, truth, rtol=0, atol=1e-8)
    np.testing.assert_allclose(topic_word(y, C.sum(axis=1)), B, rtol=0, atol=1e-8)
    np.testing.assert_allclose(objective, 0.0, atol=1e-12)


def test_anchor_columns_rows_are_the_block_rows_inside_and_c_rows_outside():
    rng = np.random.default_rng(3)
    n_words, words = 9, np.array([1, 4, 5, 8])
    C = rng.random((n_words, n_words))
    C = C + C.T
    Y = rng.standard_normal((4, 2))
    block = LowRankCooccurrence(Y, sps.csr_matrix((4, 4)), 0.25)
    others = np.setdiff1d(np.arange(n_words), words)
    columns = AnchorColumns(block, words, C[np.ix_(others, words)], n_words)
    index = np.array([8, 0, 4, 3, 1, 7, 7])
    expected = np.array([(Y @ Y.T + 0.25)[np.searchsorted(words, i)] if i in words else C[i, words] for i in index])
    np.testing.assert_allclose(columns.rows(index), expected, rtol=0, atol=1e-15)


def test_the_anchor_vocabulary_is_the_top_of_ingests_tfidf_ranking_in_index_order():
    rng = np.random.default_rng(5)
    df = rng.integers(0, 50, 40)
    tf = df * rng.integers(1, 4, 40)
    ranked = select_vocabulary(df, tf, 100, None).kept
    np.testing.assert_array_equal(anchor_vocabulary(df, tf, 100, 12), np.sort(ranked[:12]))
    # a vocabulary ingest ranked (word_id by rank) gives its first n words
    np.testing.assert_array_equal(anchor_vocabulary(df[ranked], tf[ranked], 100, 12), np.arange(12))
