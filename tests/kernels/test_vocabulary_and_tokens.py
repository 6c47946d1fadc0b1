"""tf·idf curation and tokenisation, on cases worked out by hand."""

from __future__ import annotations

import numpy as np

from jsmf_dask.io.sources.tokenize import count_tokens, tokenize
from jsmf_dask.kernels.vocabulary import select_vocabulary, tfidf_scores

# Four documents over words (a, b, c, d):  "a a b c", "a b", "a c c c", "d b".
DF = np.array([3, 3, 2, 1])
TF = np.array([4, 3, 4, 1])
M = 4


def test_tfidf_by_hand():
    # idf = log(floor(M/df)): a, b -> log(1) = 0; c -> log(2); d -> log(4)
    np.testing.assert_allclose(tfidf_scores(DF, TF, M), [0.0, 0.0, 4 * np.log(2), np.log(4)], rtol=1e-15)


def test_selection_order_and_ties():
    # c (2.77) > d (1.39) > a (0, tf 4) > b (0, tf 3)
    sel = select_vocabulary(DF, TF, M, None)
    np.testing.assert_array_equal(sel.kept, [2, 3, 0, 1])
    sel = select_vocabulary(DF, TF, M, 2)
    np.testing.assert_array_equal(sel.kept, [2, 3])
    assert (sel.n_stopwords, sel.n_absent, sel.n_beyond_size) == (0, 0, 2)


def test_stopwords_and_absent_words_removed_first():
    df = np.r_[DF, 0]
    tf = np.r_[TF, 0]
    sel = select_vocabulary(df, tf, M, 2, is_stopword=np.array([False, False, True, False, False]))
    np.testing.assert_array_equal(sel.kept, [3, 0])
    assert (sel.n_stopwords, sel.n_absent, sel.n_beyond_size) == (1, 1, 1)


def test_tokenize_rules():
    text = "The  cat's 2 hats,\x7fe.g. AND-gates naïve x1y ab"
    assert tokenize(text) == ["the", "cat", "hats", "and", "gates", "naïve"]
    assert tokenize(text, min_length=1) == ["the", "cat", "s", "hats", "e", "g", "and", "gates", "naïve", "x", "y", "ab"]
    assert count_tokens("the cat the hat", stopwords={"the"}) == {"cat": 1, "hat": 1}
