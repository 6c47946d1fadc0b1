"""The estimator's held-out scores by document completion (``jsmf_dask.estimator.scoring``)."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import scipy.sparse as sps

from jsmf_dask import cooccur, fit, load_model, refine, synth
from jsmf_dask.estimator.scoring import completion_perplexity, completion_score
from jsmf_dask.io.parquet import corpus_dir, list_blocks, read_block
from jsmf_dask.kernels.doc_split import DocumentSplit, doc_hashes
from jsmf_dask.pipeline.evaluate import heldout_document_scores
from jsmf_dask.stages.infer import block_counts
from tests.test_estimator import _lda_counts


@pytest.fixture(scope="module")
def refined_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("scoring")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        synth(root, n_docs=1200, n_words=80, n_topics=4, doc_length=40, seed=3, topics_from="dirichlet")
        cooccur(root, heldout=0.2, validation=0.05)
        fit(root, n_topics=4, name="k4-ap", min_anchor_df=5)
        refine(root, model="k4-ap", sweeps=5)
    return root


def _heldout_documents(root, fraction: float):
    """The held-out documents' counts and ids, read from the corpus as evaluate reads them."""
    rows, ids = [], []
    for block in list_blocks(corpus_dir(str(root))):
        table = read_block(block, 80)
        held = DocumentSplit(heldout=fraction).masks(hashes=doc_hashes(table.column("doc_id")))[0]
        rows.append(block_counts(table, 80)[held])
        ids += [d for d, h in zip(table.column("doc_id").to_pylist(), held, strict=True) if h]
    return sps.vstack(rows).tocsr(), ids


@pytest.mark.parametrize("name", ["k4-ap", "k4-ap-refined"])
def test_completion_perplexity_is_evaluates_number_for_the_same_documents(refined_root, name):
    """With the documents' ids, the estimator's completion perplexity of the held-out documents equals the one
    `evaluate` computes from the run root (the same split, fold-in seeds and prior), to 1e-10, by both fold-ins;
    without them (rows named by number) the split differs and so does the number."""
    estimator = load_model(refined_root, name)
    X, ids = _heldout_documents(refined_root, 0.2)
    scores = heldout_document_scores(str(refined_root), [name], 0.2, fold_ins=("sampled", "vb"))
    for fold_in in ("sampled", "vb"):
        s = scores[fold_in]
        expected = np.exp(-s.log_likelihood[name].sum() / s.n_tokens.sum())
        got = completion_perplexity(estimator, X, doc_ids=ids, fold_in=fold_in)
        assert got == pytest.approx(expected, rel=1e-10)
    by_row = completion_perplexity(estimator, X)
    assert by_row != pytest.approx(expected, rel=1e-6) and by_row == completion_perplexity(estimator, X)
    assert completion_score(estimator, X) == pytest.approx(-np.log(by_row), rel=1e-12)


# K = 6 on a corpus of 3 topics with no anchor floor: a rare word anchors a topic of almost no weight (fit says so)
@pytest.mark.filterwarnings("ignore:1 of 6 topics have almost no weight in A:UserWarning")
def test_grid_search_by_completion_score_picks_the_true_number_of_topics():
    """As a scikit-learn scorer, through a Pipeline (X passed through the steps before the estimator): each
    split's test score is completion_score of the fitted pipeline, and the documents drawn from 3 topics choose 3."""
    from sklearn.base import clone
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    from jsmf_dask import RectifiedAnchorWords

    X = _lda_counts(n_docs=1500, n_words=40, k=3, seed=4)
    texts = [" ".join(f"word{w:02d}" for w, c in zip(X.indices[a:b], X.data[a:b]) for _ in range(c))
             for a, b in zip(X.indptr[:-1], X.indptr[1:])]
    pipe = make_pipeline(CountVectorizer(), RectifiedAnchorWords(3, min_anchor_df=0))
    search = GridSearchCV(clone(pipe), {"rectifiedanchorwords__n_components": [2, 3, 6]}, cv=2,
                          scoring=completion_score, error_score="raise", refit=True)
    search.fit(texts)
    assert search.best_params_ == {"rectifiedanchorwords__n_components": 3}
    assert search.best_score_ == pytest.approx(np.mean(
        [search.cv_results_[f"split{i}_test_score"][search.best_index_] for i in range(2)]))
    assert completion_score(search.best_estimator_, texts) == pytest.approx(
        -np.log(completion_perplexity(search.best_estimator_, texts)), rel=1e-12)


def test_bad_input_names_what_was_expected(refined_root):
    estimator = load_model(refined_root, "k4-ap")
    X, ids = _heldout_documents(refined_root, 0.2)
    with pytest.raises(ValueError, match="whole word counts"):
        completion_perplexity(estimator, X * 0.5)
    with pytest.raises(ValueError, match=r"3 doc_ids for \d+ documents"):
        completion_perplexity(estimator, X, doc_ids=ids[:3])
    with pytest.raises(ValueError, match="X holds no words to score"):
        completion_perplexity(estimator, sps.csr_array((2, 80)))
    with pytest.raises(ValueError, match="fold_in must be one of"):
        completion_perplexity(estimator, X, fold_in="gibbs")
    with pytest.raises(ValueError, match="X has 79 features"):
        completion_perplexity(estimator, X[:, :79])
