"""The large-vocabulary route: compressed co-occurrence (cooccur rank=R) and fit rectifier='enn' (ENN + LAW)."""

from __future__ import annotations

import shutil

import dask
import numpy as np
import pytest

from jsmf_dask import cooccur, fit, ingest, open_cooccurrence
from jsmf_dask.exceptions import InvalidParameterError, StoreError
from jsmf_dask.io.model_store import open_model
from jsmf_dask.io.parquet import list_blocks
from jsmf_dask.kernels.enn import enn_memory
from jsmf_dask.pipeline import fit_plan
from jsmf_dask.pipeline.synth import read_truth, synth
from jsmf_dask.stages.compressed import block_totals, product_task, scaled_blocks
from tests.conftest import REUTERS_DOCWORD, listing


def matched_l1(B: np.ndarray, truth: np.ndarray) -> float:
    """Mean L1 distance of columns after the best one-to-one matching."""
    from scipy.optimize import linear_sum_assignment

    cost = np.abs(B[:, :, None] - truth[:, None, :]).sum(axis=0)
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


@pytest.fixture(scope="module")
def reuters(tmp_path_factory):
    """The Reuters corpus with its dense store (built once) and a compressed store beside it."""
    root = tmp_path_factory.mktemp("reuters-lr")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        ingest(root / "dense", [str(REUTERS_DOCWORD)], vocab_size=800, row_group_size=70)
        cooccur(root / "dense", tile_size=300)
        ingest(root / "compressed", [str(REUTERS_DOCWORD)], vocab_size=800, row_group_size=70)
        summary = cooccur(root / "compressed", rank=12, eig_tol=1e-10)
    return root, summary


def test_auto_anchor_words_fit_every_word_of_a_compressed_store(reuters, tmp_path, monkeypatch):
    """``anchor_words='auto'`` (what the estimator and `jsmf run` pass where refine follows) is ENN on every word
    of a compressed store, where an explicit vocabulary is refused."""
    from jsmf_dask import parameters

    monkeypatch.setattr(parameters, "AUTO_ANCHOR_WORDS_MIN", 100)  # below the 800 words: 'auto' would apply
    root, _ = reuters
    copy = tmp_path / "compressed"
    shutil.copytree(root / "compressed", copy, ignore=shutil.ignore_patterns("model.zarr", "topics"))
    fitted = fit(copy, n_topics=5, iterations=3, anchor_words="auto")
    assert fitted.attrs["params"]["rectifier"] == "enn" and "anchor_words" not in fitted.attrs
    with pytest.raises(InvalidParameterError, match=r"cannot be used: .*compressed"):
        fit(copy, n_topics=5, iterations=3, anchor_words=100, name="explicit")


def test_compressed_operator_equals_the_dense_product(reuters):
    root, _ = reuters
    store = open_cooccurrence(f"{root}/dense/cooc.zarr")
    C = store.C[:]
    n = C.shape[0]
    blocks = list_blocks(f"{root}/dense/corpus")
    scaled = scaled_blocks(blocks, n, weighting=store.attrs["weighting"])
    V = np.random.default_rng(0).standard_normal((n, 7))
    (totals, _), HtHV = dask.compute(block_totals(scaled), product_task(scaled, V, n_tasks=3))
    CV = (HtHV + (totals.diagonal - totals.squares)[:, None] * V) / totals.entry_sum
    np.testing.assert_allclose(CV, C @ V, rtol=0, atol=1e-12 * np.abs(C @ V).max())


def test_compressed_eigenpairs_match_eigh_to_the_recorded_residual(reuters):
    root, summary = reuters
    C = open_cooccurrence(f"{root}/dense/cooc.zarr").C[:]
    store = open_cooccurrence(f"{root}/compressed/cooc.zarr")
    assert store.compressed and store.rank == 12 and "C" not in store.group and "D2" not in store.group
    residual = float(store.attrs["eig_residual"])
    assert residual <= 1e-10 and store.attrs["n_passes"] == summary.n_passes > 0
    values, vectors = store.eigenpairs(12)
    exact = np.linalg.eigvalsh(C)[::-1][:12]
    scale = exact[0]
    # the residual the store records is the one the stored pairs have against the dense C
    measured = np.linalg.norm(C @ vectors - vectors * values, axis=0).max() / scale
    assert measured <= 1.01 * residual + 1e-15
    # each Ritz value is within its residual norm of an eigenvalue (symmetric C)
    np.testing.assert_allclose(values, exact, rtol=0, atol=residual * scale * 1.01 + 1e-15)
    np.testing.assert_allclose(np.abs(vectors.T @ vectors), np.eye(12), atol=1e-12)
    np.testing.assert_array_equal(store.D1[:], open_cooccurrence(f"{root}/dense/cooc.zarr").D1[:])


@pytest.fixture(scope="module")
def semisynthetic(tmp_path_factory):
    """4,000 documents of 150 tokens from K = 6 separable topics over N = 400 words: a dense and a compressed store."""
    import shutil

    base = tmp_path_factory.mktemp("semisynthetic-lr")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        synth(base / "dense", n_docs=4000, n_words=400, n_topics=6, doc_length=150, seed=3)
        shutil.copytree(base / "dense" / "corpus", base / "compressed" / "corpus")
        cooccur(base / "dense")
        cooccur(base / "compressed", rank=8, eig_tol=1e-10)
    return base, read_truth(base / "dense")["B"]


def test_enn_from_the_compressed_store_equals_enn_from_the_dense_store(semisynthetic):
    base, _ = semisynthetic
    # Both start from the top-6 eigenpairs of the same C to 1e-10 (anchors are sensitive to eigenvector error),
    # and run the same 10 cycles: from cycle 12 on the change hovers at the 1e-7 stop within its rounding, so
    # which cycle stops first (14 on one path, 15 on the other, once) is not the paths' difference.
    a = fit(base / "dense", n_topics=6, rectifier="enn", min_anchor_df=0, eig_tol=1e-10, iterations=10)
    b = fit(base / "compressed", n_topics=6, min_anchor_df=0, eig_tol=1e-10, iterations=10)  # there: enn
    assert a.n_iter == b.n_iter == 10
    assert b.attrs["params"]["rectifier"] == "enn" and b.name == "k6-enn"
    assert b.attrs["path"]["chosen"] == "low-rank"
    np.testing.assert_array_equal(a.anchors, b.anchors)
    np.testing.assert_allclose(b.B, a.B, rtol=0, atol=1e-7)
    model = open_model(base / "compressed", "k6-enn")
    assert "C_rect" not in model.group  # stored as Y, eigenvalues, the sparse correction and the shift
    assert {"Y", "eigenvalues"} <= set(model.arrays) and "correction" in model.group
    np.testing.assert_allclose(b.B.sum(axis=0), 1.0, atol=1e-12)
    np.testing.assert_allclose(b.A.sum(), 1.0, atol=1e-12)


def test_enn_recovers_a_semisynthetic_truth_as_well_as_ap(semisynthetic):
    base, truth = semisynthetic
    ap = fit(base / "dense", n_topics=6, min_anchor_df=0)
    enn = fit(base / "compressed", n_topics=6, min_anchor_df=0, name="default-tol")
    err_ap, err_enn = matched_l1(ap.B, truth), matched_l1(enn.B, truth)
    # Both are the same consistent estimator at this M; ENN may not lose more than 10% to AP.
    assert err_enn <= 1.1 * err_ap, (err_enn, err_ap)
    # and close to the truth: AP's finite-M error here is ~0.43, a random column-stochastic B's ~1.6
    assert err_enn < 0.5


def test_multiprocess_cluster_gives_the_synchronous_model(tmp_path):
    from distributed import Client, LocalCluster

    for where in ("sync", "cluster"):
        ingest(tmp_path / where, [str(REUTERS_DOCWORD)], vocab_size=600, row_group_size=50)
    cooccur(tmp_path / "sync", rank=8)
    sync = fit(tmp_path / "sync", n_topics=5, min_anchor_df=5, iterations=15)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster), dask.config.set({"scheduler": "dask.distributed"}):
        cooccur(tmp_path / "cluster", rank=8)
        dist = fit(tmp_path / "cluster", n_topics=5, min_anchor_df=5, iterations=15)
    a = open_cooccurrence(f"{tmp_path}/sync/cooc.zarr")
    b = open_cooccurrence(f"{tmp_path}/cluster/cooc.zarr")
    np.testing.assert_allclose(b.group["eigenvalues"][:], a.group["eigenvalues"][:], rtol=1e-10, atol=0)
    np.testing.assert_array_equal(dist.anchors, sync.anchors)
    np.testing.assert_allclose(dist.B, sync.B, rtol=0, atol=1e-10)
    np.testing.assert_allclose(dist.A, sync.A, rtol=0, atol=1e-10)


def test_bad_input_is_refused_before_anything_is_written(reuters, monkeypatch):
    root, _ = reuters
    compressed = root / "compressed"
    before = listing(compressed)
    with pytest.raises(InvalidParameterError, match=r"at most the rank 12 .*--rank 13"):
        fit(compressed, n_topics=13)
    with pytest.raises(InvalidParameterError, match=r"compressed .*rectifier='ap' needs the dense C"):
        fit(compressed, n_topics=5, rectifier="ap")
    with pytest.raises(StoreError, match=r"compressed store \(rank 12\) cannot be updated"):
        cooccur(compressed, update=True)
    with pytest.raises(InvalidParameterError, match=r"'rank' parameter .* below the \d+ words"):
        cooccur(compressed, rank=10_000, overwrite=True)
    with pytest.raises(InvalidParameterError, match=r"'rank' parameter"):
        cooccur(compressed, rank=1, overwrite=True)
    # a worker too small even for O(N·K): the figure and the flag to raise, nothing written
    monkeypatch.setattr(fit_plan, "largest_memory", lambda client: (None, 8 << 20, "the largest worker (test)"))
    with pytest.raises(StoreError, match=r"ENN \+ LAW\) needs about [\d.]+ GiB .*--memory-limit of at least"):
        fit(compressed, n_topics=5, name="too-small")
    assert listing(compressed) == before


def test_dense_store_too_large_for_one_task_takes_its_eigenpairs_tile_by_tile(reuters, monkeypatch):
    root, _ = reuters
    # (eig_tol: the start is ARPACK on C in one task, LOBPCG over tiles; solved tightly, they agree)
    direct = fit(root / "dense", n_topics=6, rectifier="enn", min_anchor_df=5, iterations=10, name="direct",
                 eig_tol=1e-11)
    # a worker whose memory holds O(N·K) but not the dense C: the start comes from tiled products
    need = enn_memory(800, 6)
    monkeypatch.setattr(fit_plan, "largest_memory",
                        lambda client: (None, int(need / fit_plan.IN_TASK_SHARE) + 1, "the largest worker (test)"))
    tiled = fit(root / "dense", n_topics=6, rectifier="enn", min_anchor_df=5, iterations=10, name="tiled",
                eig_tol=1e-11)
    np.testing.assert_array_equal(tiled.anchors, direct.anchors)
    np.testing.assert_allclose(tiled.B, direct.B, rtol=0, atol=1e-7)


def test_evaluate_on_a_compressed_store_and_an_enn_model(semisynthetic):
    from jsmf_dask import evaluate
    from jsmf_dask.kernels.metrics import approximation, fit_partials, recovery

    base, _ = semisynthetic
    fit(base / "compressed", n_topics=6, min_anchor_df=0, name="ev", overwrite=True)
    fit(base / "dense", n_topics=6, min_anchor_df=0, name="ev-ap", overwrite=True)
    compressed = evaluate(base / "compressed", models=["ev"])["models"]["ev"]
    dense = evaluate(base / "dense", models=["ev-ap"])["models"]["ev-ap"]
    # Coherence: D2 of the top words counted from the corpus equals the dense store's D2 — same top words,
    # same value (the compressed store has no D2 at all).
    model_c = open_model(base / "compressed", "ev")
    store = open_cooccurrence(f"{base}/compressed/cooc.zarr")
    assert "D2" not in store.group
    dense_D2 = open_cooccurrence(f"{base}/dense/cooc.zarr").D2[:]
    from jsmf_dask.kernels.metrics import coherence, top_words

    top = top_words(model_c.arrays["B"], 20)
    expected = coherence(top, store.D1[:].astype(float), dense_D2[top[:, :, None], top[:, None, :]].astype(float))
    assert compressed["original_C"]["coherence"] == pytest.approx(expected, rel=1e-12)
    # Against the rank-8 C the compressed store holds: the same numbers as the dense algebra on that matrix.
    values, vectors = store.eigenpairs(8)
    C8 = (vectors * values) @ vectors.T
    B, A, W, S = (model_c.arrays[k] for k in ("B", "A", "weights", "anchors"))
    p8 = C8.sum(axis=1)
    ref = fit_partials(C8, B, B @ A, W, C8[S] / p8[S][:, None])
    assert compressed["original_C"]["recovery"] == pytest.approx(recovery(ref), rel=1e-8)
    assert compressed["original_C"]["approximation"] == pytest.approx(approximation(ref, B, A), rel=1e-8)
    assert "rank-8 compression" in compressed["original_C"]["notes"]["C"]
    # The ENN model's own rectified C (Y, E, r) is measured too; both stores give sane, comparable values.
    assert compressed["rectified_C"]["recovery"] < compressed["original_C"]["recovery"] * 10
    for metric in ("specificity", "dissimilarity", "dominancy"):
        assert compressed["original_C"][metric] == pytest.approx(dense["original_C"][metric], rel=0.1), metric


def test_report_works_from_a_compressed_store(semisynthetic):
    from jsmf_dask import report

    base, _ = semisynthetic
    fit(base / "compressed", n_topics=6, min_anchor_df=0, name="rep", overwrite=True)
    out = report(base / "compressed", model="rep")
    import html as html_module

    html = html_module.unescape((base / "compressed" / "report" / "report.html").read_text())
    assert "the rank-8 compression it holds" in html and "LAW's K-dimensional space" in html
    assert "ENN (ε-non-negative rectification) trace" in html
    assert (base / "compressed" / "report" / "anchor-hull.png").stat().st_size > 0
    assert out is not None


def test_cooccur_writes_the_compressed_store_where_the_dense_one_would_be_too_large(semisynthetic, tmp_path):
    """No rank given: dense where 8N² (×2 with D2) fits jsmf.cooccur.dense-max-bytes, else compressed of rank
    jsmf.cooccur.compressed-rank, the reason in the summary; the same eigenpairs as asking for that rank."""
    import shutil

    base, _ = semisynthetic
    root = tmp_path / "auto"
    shutil.copytree(base / "dense" / "corpus", root / "corpus")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False,
                          "jsmf.cooccur.dense-max-bytes": 8 * 400 * 400 * 2 - 1, "jsmf.cooccur.compressed-rank": 8}):
        summary = cooccur(root, eig_tol=1e-10)
        assert summary.rank == 8 and open_cooccurrence(f"{root}/cooc.zarr").compressed
        assert any("dense C and D2 of 400 words would take 0.0 GiB, above jsmf.cooccur.dense-max-bytes" in line
                   and "rank 8" in line for line in summary.lines())
        values, _ = open_cooccurrence(f"{root}/cooc.zarr").eigenpairs(8)
        asked, _ = open_cooccurrence(f"{base}/compressed/cooc.zarr").eigenpairs(8)
        np.testing.assert_allclose(values, asked, rtol=1e-8)
        # without D2 the dense C alone fits: dense
        dense = cooccur(root, codoc=False, overwrite=True)
        assert dense.rank is None and dense.reason is None
        assert not open_cooccurrence(f"{root}/cooc.zarr").compressed
