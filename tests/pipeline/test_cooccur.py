"""cooccur: C against dense references, invariance to blocking and workers, unbiasedness."""

from __future__ import annotations

import numpy as np
import pytest

from jsmf_dask import cooccur, ingest, open_cooccurrence
from jsmf_dask.io.parquet import list_blocks, read_block, read_vocabulary, vocabulary_hash
from jsmf_dask.kernels.synthetic import dirichlet_topic_topic, sample_corpus, separable_topics
from jsmf_dask.pipeline.synth import write_corpus
from tests.conftest import REUTERS_DOCWORD, dense_cooccurrence, write_uci


def stored_documents(root) -> list[dict[int, int]]:
    corpus = f"{root}/corpus"
    docs = []
    for block in list_blocks(corpus):
        t = read_block(block, None)
        for ids, cnt in zip(t.column("word_ids").to_pylist(), t.column("counts").to_pylist(), strict=True):
            docs.append(dict(zip(ids, cnt, strict=True)))
    return docs


@pytest.fixture(scope="module")
def reuters_root(tmp_path_factory):
    import dask

    root = tmp_path_factory.mktemp("reuters")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        ingest(root, [str(REUTERS_DOCWORD)], vocab_size=1500, row_group_size=60)
    return root


@pytest.mark.parametrize(("weighting", "expected", "entry_sum"), [
    ("documents", [[1 / 6, 1 / 6, 0], [1 / 6, 0, 1 / 4], [0, 1 / 4, 0]], 2.0),  # the paper's eq. 1
    ("tokens", [[1 / 5, 1 / 5, 0], [1 / 5, 0, 1 / 5], [0, 1 / 5, 0]], 5.0),  # each weighed by its n: 3 and 2
])
def test_three_document_corpus_by_hand(tmp_path, weighting, expected, entry_sum):
    # Same corpus as tests/kernels: h = (2,1,0), (0,1,1), (1,0,0); the third has n = 1.
    docword = write_uci(tmp_path, [{0: 2, 1: 1}, {1: 1, 2: 1}, {0: 1}], ["a", "b", "c"])
    ingest(tmp_path / "run", [str(docword)], stopwords=None, min_doc_tokens=1, min_doc_words=1)
    words = read_vocabulary(f"{tmp_path}/run/corpus").column("word").to_pylist()
    summary = cooccur(tmp_path / "run", tile_size=2, weighting=weighting)
    store = open_cooccurrence(f"{tmp_path}/run/cooc.zarr")
    order = [words.index(w) for w in "abc"]
    C = store.C[:][np.ix_(order, order)]
    np.testing.assert_allclose(C, np.array(expected), rtol=1e-15, atol=0)
    assert summary.n_docs == 2 and summary.n_docs_skipped == {"fewer_than_2_tokens": 1}
    assert store.attrs["n_tokens"] == 5
    assert store.attrs["weighting"] == summary.weighting == weighting
    assert abs(store.attrs["entry_sum"] - entry_sum) < 1e-14
    np.testing.assert_array_equal(store.D1[:][order], [1, 2, 1])
    np.testing.assert_array_equal(store.D2[:][np.ix_(order, order)], [[1, 1, 0], [1, 2, 1], [0, 1, 1]])


@pytest.mark.parametrize("weighting", [None, "documents"])
def test_reuters_equals_dense_reference(reuters_root, weighting):
    cooccur(reuters_root, tile_size=512, weighting=weighting, overwrite=True)
    store = open_cooccurrence(f"{reuters_root}/cooc.zarr")
    C = store.C[:]
    docs = stored_documents(reuters_root)
    R = dense_cooccurrence(docs, C.shape[0], weighting or "tokens")  # the default weighs documents by tokens
    # Same non-negative products summed in another order: 1e-12 relative is ~1e4 ulps of slack.
    nz = R != 0
    np.testing.assert_array_equal(C == 0, ~nz)
    np.testing.assert_allclose(C[nz], R[nz], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(C, C.T)
    assert C.min() >= 0.0
    assert abs(C.sum() - 1.0) < 1e-12
    # D1 and D2 against counts from the documents
    n = C.shape[0]
    Bin = np.zeros((len(docs), n))
    for m, d in enumerate(docs):
        Bin[m, list(d)] = 1
    np.testing.assert_array_equal(store.D1[:], Bin.sum(axis=0))
    np.testing.assert_array_equal(store.D2[:], Bin.T @ Bin)
    words = read_vocabulary(f"{reuters_root}/corpus").column("word").to_pylist()
    assert store.attrs["vocab_hash"] == vocabulary_hash(words)
    assert store.attrs["n_docs"] == len(docs)
    manifest = store.attrs["corpus_manifest"]
    assert [m["path"] for m in manifest] == ["part-00000.parquet"]
    assert manifest[0]["rows"] == len(docs) and len(manifest[0]["sha256"]) == 64


def test_same_C_for_any_blocking(tmp_path, reuters_root):
    cooccur(reuters_root, tile_size=512, overwrite=True)
    reference = open_cooccurrence(f"{reuters_root}/cooc.zarr").C[:]
    for i, (rows, tile, batch) in enumerate([(395, 1500, 10**9), (25, 200, 500), (100, 333, 20000)]):
        root = tmp_path / f"r{i}"
        ingest(root, [str(REUTERS_DOCWORD)], vocab_size=1500, row_group_size=rows, docs_per_shard=150)
        cooccur(root, tile_size=tile, batch_nnz=batch)
        C = open_cooccurrence(f"{root}/cooc.zarr").C[:]
        np.testing.assert_allclose(C, reference, rtol=1e-14, atol=1e-14 * reference.max())


def test_unbiased_estimate_converges_as_one_over_sqrt_m(tmp_path):
    # E[C] = B A Bᵀ with A = E[θθᵀ] (paper §3); the error's standard deviation falls as 1/√M.
    rng = np.random.default_rng(20151207)
    B = separable_topics(150, 4, rng, concentration=0.3)
    alpha = np.full(4, 0.5)
    truth = B @ dirichlet_topic_topic(alpha) @ B.T
    errors = []
    for M in (1000, 10000, 100000):
        corpus = sample_corpus(B, alpha, M, 40, np.random.default_rng(M))
        write_corpus(tmp_path / str(M), corpus, 150, row_group_size=20000)
        cooccur(tmp_path / str(M), tile_size=64)
        C = open_cooccurrence(f"{tmp_path}/{M}/cooc.zarr").C[:]
        errors.append(np.linalg.norm(C - truth))
    ratios = [errors[0] / errors[1], errors[1] / errors[2]]
    # √10 ≈ 3.16; a factor 2 either way leaves room for sampling noise at fixed seeds.
    assert all(1.6 < r < 6.4 for r in ratios), (errors, ratios)
    # At M = 100k (4M tokens) the estimate is within ~1% of the truth (measured 1.1%).
    assert errors[2] < 0.02 * np.linalg.norm(truth)
