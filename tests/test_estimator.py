"""``RectifiedAnchorWords`` as a scikit-learn estimator: the check suite, the count-matrix route, save and load."""

from __future__ import annotations

import pickle

import dask
import numpy as np
import pytest
import scipy.sparse as sps
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from jsmf_dask import RectifiedAnchorWords, cooccur, ingest, load_model, open_model
from jsmf_dask.exceptions import InputError, InvalidParameterError, StoreError
from jsmf_dask.kernels.synthetic import sample_corpus

from .conftest import write_uci

#: The checks that cannot apply to a model with two or more topics, and why. Every property they test is
#: tested below on a corpus that has topics (``test_the_checks_properties_on_a_corpus_with_topics``), and all
#: of them pass with ``n_components=1`` (the unigram model, which goes through the same input path).
_TWO_FEATURES = ("the check's data has 2 features (words): an anchor-word model needs more words than topics "
                 "(n_components < n_features), so n_components=2 is refused")
_ONE_TOPIC = ("the check's data supports one topic only (its rounded documents share one word distribution, or "
              "10 documents of 3 words): the rectified co-occurrence has rank 1, and fit refuses to invent a "
              "second topic (RankDeficientError, by design: see docs/architecture.md)")
CANNOT_APPLY = {
    "check_estimators_overwrite_params": _TWO_FEATURES,
    "check_estimators_fit_returns_self": _TWO_FEATURES,
    "check_readonly_memmap_input": _TWO_FEATURES,
    "check_fit_idempotent": _TWO_FEATURES,
    "check_fit_check_is_fitted": _TWO_FEATURES,
    "check_n_features_in": _TWO_FEATURES,
    "check_fit_score_takes_y": _ONE_TOPIC,
    "check_n_features_in_after_fitting": _ONE_TOPIC,
    "check_pipeline_consistency": _ONE_TOPIC,
    "check_estimators_nan_inf": _ONE_TOPIC + "; NaN and inf are refused before any fit (tested below)",
    "check_estimator_sparse_tag": _ONE_TOPIC,
    "check_estimator_sparse_array": _ONE_TOPIC,
    "check_estimator_sparse_matrix": _ONE_TOPIC,
    "check_estimators_pickle": _ONE_TOPIC,
    "check_transformer_data_not_an_array": _ONE_TOPIC,
    "check_transformer_general": _ONE_TOPIC,
    "check_transformer_preserve_dtypes": _ONE_TOPIC,
    "check_transformer_n_iter": _ONE_TOPIC,
}


def _expected_failures(estimator) -> dict[str, str]:
    return {} if estimator.n_components == 1 else CANNOT_APPLY


@parametrize_with_checks([RectifiedAnchorWords(n_components=1), RectifiedAnchorWords(n_components=2, min_anchor_df=0)],
                         expected_failed_checks=_expected_failures, xfail_strict=True)
def test_scikit_learn_checks(estimator, check):
    check(estimator)


def _lda_counts(n_docs=1500, n_words=60, k=4, length=50, seed=0) -> sps.csr_array:
    """Documents drawn from plain LDA (Dirichlet topics, no planted anchor words) as a count matrix."""
    rng = np.random.default_rng(seed)
    B = rng.dirichlet(np.full(n_words, 0.2), size=k).T
    corpus = sample_corpus(B, np.full(k, 0.3), n_docs, length, rng)
    return sps.csr_array((corpus.counts, corpus.word_ids, corpus.offsets), shape=(n_docs, n_words))


@pytest.fixture(scope="module")
def counts():
    """Seed 1: a corpus whose CVB0 sweeps improve on the spectral start (with seed 0 none did, by the validation
    documents' exact fold-in, so refine kept the start and did not refit: measured, session 46)."""
    return _lda_counts(seed=1)


@pytest.fixture(scope="module")
def fitted(counts):
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):  # as conftest's per-test fixture
        return RectifiedAnchorWords(4, min_anchor_df=0).fit(counts)


def test_fit_on_counts_equals_the_ingested_run_root(counts, tmp_path):
    """fit(X) == `jsmf ingest` of the same counts as a UCI file, `cooccur`, then fit_root (B to 1e-10)."""
    docs = [dict(zip(counts.indices[a:b].tolist(), counts.data[a:b].tolist()))
            for a, b in zip(counts.indptr[:-1], counts.indptr[1:])]
    words = [f"w{i:02d}" for i in range(counts.shape[1])]
    docword = write_uci(tmp_path, docs, words, name="lda")
    # the matrix route names its rows "0", "1", …: the same ids here, which seed refine's drawn sweeps
    (tmp_path / "ids.txt").write_text("\n".join(str(d) for d in range(len(docs))) + "\n")
    ingest(tmp_path / "root", [str(docword)], doc_ids=str(tmp_path / "ids.txt"), min_doc_tokens=1, min_doc_words=1)
    cooccur(tmp_path / "root")
    params = dict(min_anchor_df=0, validation_fraction=0)
    from_root = RectifiedAnchorWords(4, **params).fit_root(tmp_path / "root")
    # ingest orders its vocabulary by tf-idf: the matrix's columns in that order are the same problem
    order = [words.index(w) for w in from_root.vocabulary_]
    assert sorted(order) == list(range(60))
    counts = counts[:, order]
    from_matrix = RectifiedAnchorWords(4, **params).fit(counts)
    assert from_matrix.vocabulary_ == [f"w{i:02d}" for i in range(60)]
    np.testing.assert_allclose(from_matrix.spectral_components_, from_root.spectral_components_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(from_matrix.components_, from_root.components_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(from_matrix.doc_topic_prior_, from_root.doc_topic_prior_, rtol=1e-10)
    # the same fit from a Dask array of the counts, its column blocks merged into whole rows
    da = pytest.importorskip("dask.array")
    from_dask = RectifiedAnchorWords(4, **params).fit(da.from_array(counts.toarray(), chunks=(1500, 30)))
    np.testing.assert_allclose(from_dask.components_, from_matrix.components_, rtol=0, atol=1e-10)
    # in four blocks of rows, C's sums run in another order: rounding (1e-17) is amplified up to the
    # eigensolver's tolerance (relative residual 1e-6) and no further
    blocks = RectifiedAnchorWords(4, **params).fit(da.from_array(counts.toarray(), chunks=(400, 60)))
    np.testing.assert_allclose(blocks.spectral_components_, from_matrix.spectral_components_, rtol=0, atol=1e-6)
    np.testing.assert_allclose(blocks.components_, from_matrix.components_, rtol=0, atol=1e-6)


def test_a_refined_fit_rectifies_the_anchor_words_and_a_spectral_one_every_word(counts, tmp_path, monkeypatch):
    from jsmf_dask import open_model, parameters

    monkeypatch.setattr(parameters, "AUTO_ANCHOR_WORDS_MIN", 30)  # below the 60 words (1000 by default)
    monkeypatch.setattr(parameters, "AUTO_ANCHOR_WORDS_PER_TOPIC", 5)
    docs = [dict(zip(counts.indices[a:b].tolist(), counts.data[a:b].tolist()))
            for a, b in zip(counts.indptr[:-1], counts.indptr[1:])]
    ingest(tmp_path / "root", [str(write_uci(tmp_path, docs, [f"w{i:02d}" for i in range(60)], name="lda"))],
           min_doc_tokens=1, min_doc_words=1)
    cooccur(tmp_path / "root")
    RectifiedAnchorWords(4, min_anchor_df=0, refine_sweeps=2).fit_root(tmp_path / "root")
    assert open_model(tmp_path / "root", "k4-ap").attrs["anchor_words"]["n"] == 30
    RectifiedAnchorWords(4, min_anchor_df=0, refine=None).fit_root(tmp_path / "root", name="spectral")
    assert "anchor_words" not in open_model(tmp_path / "root", "spectral").attrs


def test_the_checks_properties_on_a_corpus_with_topics(counts, fitted):
    """What CANNOT_APPLY's checks test, on a corpus that has four topics."""
    from sklearn.utils.validation import check_is_fitted

    model = RectifiedAnchorWords(4, min_anchor_df=0)
    with pytest.raises(NotFittedError):
        check_is_fitted(model)
    params = model.get_params()
    assert model.fit(counts) is model and model.get_params() == params  # returns self, parameters untouched
    np.testing.assert_array_equal(model.components_, fitted.components_)  # idempotent, deterministic
    assert model.n_features_in_ == 60 and model.n_iter_ >= 1 and model.components_.shape == (4, 60)
    np.testing.assert_allclose(model.components_.sum(axis=1), 1, atol=1e-12)
    theta = model.transform(counts)
    np.testing.assert_allclose(model.fit_transform(counts), theta, atol=1e-12)
    assert theta.dtype == np.float64 and np.allclose(theta.sum(axis=1), 1)
    # every sparse format and a dense read-only memmap-like array give the same transform and fit
    for fmt in ("csc", "coo", "lil", "dok", "bsr"):
        np.testing.assert_allclose(model.transform(counts.asformat(fmt)), theta, atol=1e-12)
    dense = counts.toarray().astype(np.float32)
    dense.setflags(write=False)
    np.testing.assert_allclose(model.transform(dense), theta, atol=1e-6)
    np.testing.assert_allclose(clone(model).fit(dense).components_, model.components_, atol=1e-12)
    # transform of a subset, in any order, equals the batch's rows (documents are folded in one by one)
    order = np.arange(counts.shape[0])[::-7]
    np.testing.assert_allclose(model.transform(counts[order]), theta[order], atol=1e-12)
    assert list(model.get_feature_names_out()) == [f"rectifiedanchorwords{k}" for k in range(4)]
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.transform(counts[:50]), theta[:50])


def test_refinement_improves_the_score_of_held_out_documents(counts):
    """score is a per-word log likelihood bound: higher for refined topics than for the spectral start, on
    documents the fit never saw; perplexity is exp(-score)."""
    train, test = counts[:1200], counts[1200:]
    spectral = RectifiedAnchorWords(4, min_anchor_df=0, refine=None).fit(train)
    refined = RectifiedAnchorWords(4, min_anchor_df=0).fit(train)
    assert refined.score(test) > spectral.score(test)
    assert refined.perplexity(test) == pytest.approx(np.exp(-refined.score(test)), rel=1e-12)
    assert 1 < refined.perplexity(test) < 60  # better than uniform over the 60 words


def test_candidate_topic_word_priors_are_chosen_by_the_validation_documents(counts):
    """topic_word_prior as a list: refine's candidates, the validation documents choose (topic_word_prior_ is
    one of them); a bad list is refused with the estimator's parameter name."""
    est = RectifiedAnchorWords(4, min_anchor_df=0, topic_word_prior=[5.0, 0.05], refine_drawn_sweeps=0).fit(
        counts[:1200])
    assert est.topic_word_prior_ in (5.0, 0.05)
    assert clone(est).get_params()["topic_word_prior"] == [5.0, 0.05]
    with pytest.raises(InvalidParameterError, match=r"'topic_word_prior' parameter of RectifiedAnchorWords"):
        RectifiedAnchorWords(4, topic_word_prior=[0.05, 0.05]).fit(counts[:1200])


def test_refine_drawn_sweeps_reach_the_refinement(counts, fitted, tmp_path):
    """The default lets the validation documents choose (1,400-odd training documents: both candidates ran);
    0 runs the soft refinement alone, the very model of the soft candidate when that was chosen."""
    from jsmf_dask.exceptions import InvalidParameterError as Invalid

    soft = RectifiedAnchorWords(4, min_anchor_df=0, refine_drawn_sweeps=0).fit(counts)
    assert fitted.refine_drawn_sweeps == "auto" and fitted.drawn_sweeps_ in (0, 20)
    assert load_model(fitted.save(tmp_path / "m")).drawn_sweeps_ == fitted.drawn_sweeps_
    if fitted.drawn_sweeps_ == 0:
        np.testing.assert_array_equal(soft.components_, fitted.components_)
    assert soft.drawn_sweeps_ == 0
    with pytest.raises(Invalid, match=r"'refine_drawn_sweeps' parameter of RectifiedAnchorWords"):
        RectifiedAnchorWords(4, refine_drawn_sweeps=-1).fit(counts[:1200])


def test_refine_start_reaches_the_refinement(counts, fitted, tmp_path):
    """refine_start='chain' starts the refinement from a collapsed Gibbs chain's topics (refine's start='chain'):
    the very model `refine(start='chain')` writes on the same documents; refine_start_ says where the kept run
    started and survives save and load; a bad start is refused with the estimator's parameter name."""
    from jsmf_dask import refine
    from jsmf_dask.exceptions import InvalidParameterError as Invalid
    from jsmf_dask.pipeline.matrix import ingest_matrix

    assert fitted.refine_start == "auto" and fitted.refine_start_ == "spectral"  # cvb0 alone on 4 topics
    est = RectifiedAnchorWords(4, min_anchor_df=0, refine_start="chain", refine_drawn_sweeps=0).fit(counts[:1200])
    assert est.refine_start_ == "chain" and est.refine_method_ == "cvb0"
    assert load_model(est.save(tmp_path / "m")).refine_start_ == "chain"
    root = tmp_path / "root"
    ingest_matrix(root, counts[:1200])
    cooccur(root, validation=0.05)
    spectral = RectifiedAnchorWords(4, min_anchor_df=0, refine=None).fit_root(root, name="k4")
    in_memory = RectifiedAnchorWords(2, rectifier="none", refine=None).fit_cooccurrence(np.ones((4, 4)) + np.eye(4))
    assert spectral.refine_start_ is None and in_memory.refine_start_ is None
    by_hand = refine(str(root), model="k4", start="chain", drawn_sweeps=0)
    np.testing.assert_allclose(est.components_, open_model(str(root), by_hand.name).arrays["B"].T, rtol=0,
                               atol=1e-12)
    with pytest.raises(Invalid, match=r"'refine_start' parameter of RectifiedAnchorWords"):
        RectifiedAnchorWords(4, refine_start="gibbs").fit(counts[:1200])


def test_save_load_and_run_root_models(counts, fitted, tmp_path):
    saved = fitted.save(tmp_path / "model")
    loaded = load_model(saved)
    np.testing.assert_allclose(loaded.transform(counts), fitted.transform(counts), rtol=0, atol=1e-12)
    assert loaded.get_params() == fitted.get_params() and loaded.vocabulary_ == fitted.vocabulary_
    assert loaded.provenance_ == fitted.provenance_ == {"input": "count matrix", "n_documents": 1500,
                                                        "n_tokens": int(counts.sum())}
    assert loaded.score(counts[:100]) == pytest.approx(fitted.score(counts[:100]), rel=1e-12)
    # 1,500 documents: the refinement went on from its chosen state with the validation documents (the refit)
    assert fitted.refit_["sweeps"] >= 1 and fitted.refit_["n_docs"] > 1400 and loaded.refit_ == fitted.refit_
    with pytest.raises(StoreError, match="exists"):
        fitted.save(tmp_path / "model")
    fitted.save(tmp_path / "model", overwrite=True)
    with pytest.raises(ValueError, match="X has 59 features, but RectifiedAnchorWords is expecting 60 features"):
        loaded.transform(counts[:, :59])
    with pytest.raises(StoreError, match="neither a saved model"):
        load_model(tmp_path)
    # a run root's models by name: the refined one folds documents in with its own prior, as `jsmf infer` does
    root = tmp_path / "root"
    from jsmf_dask.pipeline.matrix import ingest_matrix

    ingest_matrix(root, counts)
    cooccur(root, validation=0.05)
    model = RectifiedAnchorWords(4, min_anchor_df=0).fit_root(root, name="k4")
    with pytest.raises(StoreError, match=r"choose a model with name=\.\.\.; fitted models: \['k4', 'k4-refined'\]"):
        load_model(root)
    with pytest.raises(StoreError, match="no such model"):
        load_model(root, name="k5")
    refined, spectral = load_model(root, name="k4-refined"), load_model(root, name="k4")
    np.testing.assert_allclose(refined.transform(counts), model.transform(counts), atol=1e-12)
    np.testing.assert_array_equal(refined.spectral_components_, spectral.components_)
    assert spectral.doc_topic_prior_ is None and refined.get_params()["refine"] == "auto"
    assert (refined.refine_method_, spectral.refine_method_) == ("cvb0", None)  # what auto ran on 4 topics
    assert spectral.refit_ is None and refined.refit_ == open_model(str(root), "k4-refined").attrs["refit"]
    assert refined.provenance_["model"] == "k4-refined" and refined.provenance_["reading"]["format"] == "auto"
    refined.save(tmp_path / "from-root")  # the root's model, with how its corpus was read, portable
    assert load_model(tmp_path / "from-root").provenance_ == refined.provenance_
    from jsmf_dask import infer
    from jsmf_dask.pipeline.infer import read_doc_topics

    infer(root, model="k4-refined")
    stored = np.array(read_doc_topics(root, "k4-refined").column("topics").to_pylist())
    np.testing.assert_allclose(stored, refined.transform(counts), atol=1e-12)


# K = 6 on a corpus of 3 topics with no anchor floor: a rare word anchors a topic of almost no weight (fit says so)
@pytest.mark.filterwarnings("ignore:1 of 6 topics have almost no weight in A:UserWarning")
def test_pipeline_clone_and_grid_search():
    """CountVectorizer → RectifiedAnchorWords in a Pipeline; GridSearchCV picks K by held-out score."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    X = _lda_counts(n_docs=1500, n_words=40, k=3, seed=4)
    texts = [" ".join(f"word{w:02d}" for w, c in zip(X.indices[a:b], X.data[a:b]) for _ in range(c))
             for a, b in zip(X.indptr[:-1], X.indptr[1:])]
    pipe = make_pipeline(CountVectorizer(), RectifiedAnchorWords(3, min_anchor_df=0))
    theta = pipe.fit_transform(texts)
    assert theta.shape == (1500, 3) and np.allclose(theta.sum(axis=1), 1)
    assert pipe[-1].vocabulary_[:2] == ["w00", "w01"] and pipe[-1].n_features_in_ == 40
    search = GridSearchCV(clone(pipe), {"rectifiedanchorwords__n_components": [2, 3, 6]}, cv=2, error_score="raise")
    search.fit(texts)
    assert search.best_params_ == {"rectifiedanchorwords__n_components": 3}  # drawn from 3 topics
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_bad_input_names_what_was_expected(counts):
    model = RectifiedAnchorWords(4, min_anchor_df=0)
    bad = counts.toarray().astype(float)
    bad[7, 3] = 1.5
    with pytest.raises(InputError, match=r"row 7, column 3: 1\.5; counts must be whole numbers"):
        model.fit(bad)
    bad[7, 3] = -2
    with pytest.raises(ValueError, match="Negative values in data passed to RectifiedAnchorWords.fit"):
        model.fit(bad)
    bad[7, 3] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        model.fit(bad)
    with pytest.raises(ValueError, match="Expected 2D array"):
        model.fit(np.ones(5))
    with pytest.raises(ValueError, match=r"n_components' parameter of RectifiedAnchorWords must be an int in the "
                                         r"range \[1, 59\]. Got 60"):
        RectifiedAnchorWords(60).fit(counts)
    with pytest.raises(InvalidParameterError, match="'refine' parameter of RectifiedAnchorWords must be"):
        RectifiedAnchorWords(refine="gibbs").fit(counts)
    with pytest.raises(InvalidParameterError, match="'validation_fraction' parameter"):
        RectifiedAnchorWords(validation_fraction=0.7).fit(counts)
    # a Dask array is checked block by block where it is written: the error names the global row
    da = pytest.importorskip("dask.array")
    lazy = da.from_array(np.where(np.arange(60) == 5, 0.5, counts.toarray()), chunks=(500, 60))
    with pytest.raises(InputError, match=r"row (0|500|1000), column 5: 0\.5"):  # the first row of a block
        model.fit(lazy)
    half = counts.toarray().astype(float)
    half[1234, 9] = 2.5
    with pytest.raises(InputError, match=r"row 1234, column 9: 2\.5"):
        model.fit(da.from_array(half, chunks=(500, 60)))
    with pytest.raises(InvalidParameterError, match="need n_components >= 2"):
        RectifiedAnchorWords(1).fit_root("anywhere")


def test_a_dask_array_larger_than_a_workers_memory_fits_under_its_limit(tmp_path):
    """X of 1.2 GB (int64) on one worker with a 700 MB memory limit: written one block of 40 MB at a time, so the
    worker is never restarted (distributed's nanny kills a worker past its limit; the fit would then fail with
    KilledWorker) and the topics are the model's."""
    da = pytest.importorskip("dask.array")
    from distributed import Client, LocalCluster

    from jsmf_dask.cluster import registered_workers

    n_docs, n_words, rows = 150_000, 1000, 5000
    rng = np.random.default_rng(3)
    B = rng.dirichlet(np.full(n_words, 0.1), size=5).T  # five topics over 1,000 words

    def block(seed):
        r = np.random.default_rng(int(seed[0, 0]))
        theta = r.dirichlet(np.full(5, 0.2), size=rows)
        return r.poisson(50 * theta @ B.T).astype(np.int64)  # 50 tokens a document

    seeds = da.arange(n_docs // rows, chunks=1).reshape(-1, 1)
    X = da.map_blocks(block, seeds, chunks=((rows,) * (n_docs // rows), (n_words,)), dtype=np.int64)
    limit = 700 * 2**20
    assert X.nbytes > 1.5 * limit
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, memory_limit=limit,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        before = set(registered_workers(client))
        model = RectifiedAnchorWords(5, refine_sweeps=2, work_dir=tmp_path).fit(X)
        assert set(registered_workers(client)) == before  # the same worker process, never restarted
    assert list(tmp_path.iterdir()) == []  # the temporary run root is gone
    # each fitted topic is close to one true topic (L1 < 0.5; unrelated Dirichlet(0.1) topics are ~1.6 apart)
    distance = np.abs(model.components_[:, None, :] - B.T[None, :, :]).sum(axis=2)
    assert distance.min(axis=1).max() < 0.5 and sorted(distance.argmin(axis=1)) == list(range(5))
