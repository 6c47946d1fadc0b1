"""fit: the stage against the in-memory functions, in-task against tiled, the store, bad input."""

from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr

from jsmf_dask import RectifiedAnchorWords, cooccur, find_anchors, fit, open_cooccurrence, open_model, recover, rectify, synth
from jsmf_dask.exceptions import InvalidParameterError, StoreError
from jsmf_dask.io.parquet import read_parquet
from tests.conftest import FakeClient, listing


@pytest.fixture(scope="module")
def synthetic_root(tmp_path_factory):
    import dask

    root = tmp_path_factory.mktemp("synth")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        synth(root, n_docs=3000, n_words=300, n_topics=5, doc_length=80, seed=11)
        cooccur(root, tile_size=128)
    return root


def test_estimator_equals_the_public_functions(synthetic_root):
    model = RectifiedAnchorWords(n_components=5, max_iter=40, refine=None).fit_root(synthetic_root, overwrite=True)
    store = open_cooccurrence(f"{synthetic_root}/cooc.zarr")
    from threadpoolctl import threadpool_limits

    from jsmf_dask.stages.rectify import in_task_blas_threads

    # the same BLAS threads as the fit's task: AP's 40 changes agree to rounding only in the same arithmetic
    with threadpool_limits(limits=in_task_blas_threads(300), user_api="blas"):
        rect = rectify(store.C[:], 5, iterations=40)
    anchors, _ = find_anchors(rect.C, 5, candidates=store.D1[:] >= 10)
    rec = recover(rect.C, anchors)
    np.testing.assert_array_equal(model.anchors_, anchors)
    np.testing.assert_allclose(model.components_, rec.B.T, rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.topic_topic_, rec.A, rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.rectification_history_["delta"], rect.trace["delta"], rtol=1e-12)
    assert model.components_.shape == (5, 300) and np.allclose(model.components_.sum(axis=1), 1)
    assert abs(model.topic_topic_.sum() - 1) < 1e-12 and model.topic_topic_.min() >= 0
    assert model.n_iter_ == 40 and len(model.vocabulary_) == 300


def test_estimator_with_enn_equals_the_pipeline_and_the_kernels(synthetic_root):
    """rectifier='enn': fit(root) is the pipeline's low-rank fit; fit_cooccurrence the same kernels in memory."""
    from jsmf_dask.kernels.factorize import recover_low_rank
    from jsmf_dask.kernels.enn import enn_rectify
    from jsmf_dask.kernels.law import law_anchors, law_coordinates
    from jsmf_dask.kernels.eigen import top_eigenpairs

    model = RectifiedAnchorWords(n_components=5, rectifier="enn", max_iter=20, refine=None).fit_root(
        synthetic_root, name="est-enn", overwrite=True)
    stored = open_model(str(synthetic_root), "est-enn")
    assert stored.attrs["path"]["chosen"] == "low-rank"
    np.testing.assert_allclose(model.components_, stored.arrays["B"].T, atol=1e-15)
    C = open_cooccurrence(f"{synthetic_root}/cooc.zarr").C[:]
    doc_freq = open_cooccurrence(f"{synthetic_root}/cooc.zarr").D1[:]
    # min_anchor_df='auto' (the default): in memory, without the documents' count, the floor of 10
    memory = RectifiedAnchorWords(n_components=5, rectifier="enn", max_iter=20, refine=None).fit_cooccurrence(
        C, doc_freq)
    np.testing.assert_array_equal(np.sort(memory.anchors_), np.sort(model.anchors_))
    np.testing.assert_allclose(memory.components_, model.components_, rtol=0, atol=1e-7)  # eigensolver tolerance
    # and the kernels composed by hand, on the estimator's BLAS threads (one, at N = 300)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        start = top_eigenpairs(lambda V: C @ V, 300, 5, rng=np.random.default_rng(0), cold="auto")
        low, _, trace, n_iter = enn_rectify(start, 5, iterations=20, tol=None, rng=np.random.default_rng(0))
        Z, p = law_coordinates(low)
        anchors, _ = law_anchors(Z, p, 5, doc_freq >= 10)
        rec = recover_low_rank(low, Z, p, anchors)
    np.testing.assert_allclose(memory.components_, rec.B.T, rtol=0, atol=1e-12)
    np.testing.assert_allclose(memory.topic_topic_, rec.A, rtol=0, atol=1e-12)
    assert memory.n_iter_ == n_iter and list(memory.rectification_history_["relative_change"]) == trace.relative_change
    with pytest.raises(InvalidParameterError, match="rectifier='enn' always ends with its non-negativity"):
        RectifiedAnchorWords(n_components=5, rectifier="enn", end_with="psd", refine=None).fit_cooccurrence(C)


def test_estimator_refines_by_default_and_stores_both_models(synthetic_root):
    from jsmf_dask.pipeline.refine import refine

    model = RectifiedAnchorWords(n_components=5, max_iter=40, validation_fraction=0).fit_root(
        synthetic_root, name="est", overwrite=True)
    spectral = open_model(str(synthetic_root), "est")
    refined = open_model(str(synthetic_root), "est-refined")
    np.testing.assert_allclose(model.spectral_components_, spectral.arrays["B"].T, atol=1e-15)
    np.testing.assert_allclose(model.components_, refined.arrays["B"].T, atol=1e-15)
    np.testing.assert_allclose(model.topic_topic_, refined.arrays["A"], atol=1e-15)
    assert len(model.refine_history_["bound_per_word"]) == refined.attrs["n_iter"] >= 1
    # the same as the refine function with the configured default number of sweeps
    again = refine(str(synthetic_root), model="est", name="again")
    np.testing.assert_allclose(model.components_, again.B.T, atol=1e-12)
    with pytest.raises(InvalidParameterError, match="refine='auto' needs the documents"):
        RectifiedAnchorWords(n_components=2).fit_cooccurrence(np.ones((4, 4)))


def test_in_task_and_tiled_paths_agree(synthetic_root):
    a = fit(synthetic_root, n_topics=5, iterations=15, eig_tol=1e-11, name="in-task", path="in-task")
    b = fit(synthetic_root, n_topics=5, iterations=15, eig_tol=1e-11, name="tiled", path="tiled")
    np.testing.assert_array_equal(a.anchors, b.anchors)
    Ca = open_model(synthetic_root, "in-task").rectified_C()
    Cb = open_model(synthetic_root, "tiled").rectified_C()
    np.testing.assert_allclose(Cb, Ca, rtol=0, atol=1e-8 * Ca.max())
    np.testing.assert_allclose(b.B, a.B, rtol=0, atol=1e-8)
    np.testing.assert_allclose(b.trace["delta"], a.trace["delta"], rtol=1e-6)
    # and without rectification (the Baseline)
    a = fit(synthetic_root, n_topics=5, rectifier="none", name="none-in-task", path="in-task")
    b = fit(synthetic_root, n_topics=5, rectifier="none", name="none-tiled", path="tiled")
    np.testing.assert_array_equal(a.anchors, b.anchors)
    np.testing.assert_allclose(b.B, a.B, rtol=0, atol=1e-12)


def test_model_store_and_topics_file(synthetic_root):
    result = fit(synthetic_root, n_topics=5, iterations=10, rectifier="ap", name="stored")
    model = open_model(synthetic_root, "stored")
    for key in ("anchors", "B", "A", "A_least_squares", "weights", "p_word", "Y", "eigenvalues"):
        assert key in model.arrays
    assert model.arrays["B"].shape == (300, 5) and np.allclose(model.arrays["B"].sum(axis=0), 1)
    assert set(model.trace) == {"delta", "relative_change", "dist_psd", "dist_normalized", "dist_nonnegative", "eig_residual", "n_matmat", "seconds"}
    assert all(v.shape == (10,) for v in model.trace.values())
    assert model.attrs["params"]["rectifier"] == "ap" and model.attrs["n_iter"] == 10
    assert "numpy" in model.attrs["versions"]
    lines = (synthetic_root / "topics" / "stored.txt").read_text().splitlines()
    assert len(lines) == 5
    for line, anchor, top in zip(lines, result.anchors, result.top_words(), strict=True):
        assert f"[{result.words[anchor]}]" in line and line.endswith(" ".join(top))
    # the Baseline's least-squares A has negative entries, the anchor-based A none (paper Fig. 3)
    base = fit(synthetic_root, n_topics=5, rectifier="none", name="baseline")
    assert base.A.min() >= 0 and base.A_least_squares.min() < 0


def test_estimator_params_and_not_fitted():
    from sklearn.exceptions import NotFittedError as SklearnNotFitted

    model = RectifiedAnchorWords(7, rectifier="dc", tol=1e-3, refine=None)
    assert model.get_params()["n_components"] == 7 and model.get_params()["rectifier"] == "dc"
    assert repr(model) == "RectifiedAnchorWords(n_components=7, rectifier='dc', refine=None, tol=0.001)"
    with pytest.raises(SklearnNotFitted, match="not fitted yet"):
        model.top_words()
    model.set_params(rectifier="AP")
    with pytest.raises(InvalidParameterError,
                       match=r"The 'rectifier' parameter of RectifiedAnchorWords must be a str among \{'ap', 'dc', 'enn', 'none'\}\. Got 'AP' instead\."):
        model.fit_cooccurrence(np.eye(10) / 10)
    with pytest.raises(ValueError, match="Invalid parameter 'k'"):
        model.set_params(k=3)


def test_bad_parameters_and_stores(tmp_path, synthetic_root):
    root = tmp_path / "copy"
    shutil.copytree(synthetic_root, root, ignore=shutil.ignore_patterns("model.zarr", "topics"))

    def check(error, match, **kwargs):
        before = listing(root)
        with pytest.raises(error, match=match):
            fit(root, **{"n_topics": 5, "iterations": 3, **kwargs})
        assert listing(root) == before

    check(InvalidParameterError, r"'n_topics' parameter of fit must be an int in the range \[2, 299\].*Got 300",
          n_topics=300)
    check(InvalidParameterError, r"'n_topics' parameter of fit must be an int in the range \[2, inf\)\. Got 1", n_topics=1)
    check(InvalidParameterError, r"'rectifier' parameter of fit must be a str among", rectifier="ddc")
    check(InvalidParameterError, r"only \d+ words occur in at least min_anchor_df=100000", min_anchor_df=100000)
    # an anchor vocabulary: too small, or with what needs every word
    check(InvalidParameterError, r"'anchor_words' parameter of fit must be above n_topics=5.*Got 5", anchor_words=5)
    check(InvalidParameterError, r"'anchor_words' parameter of fit must be 'auto' or an int >= 2\. Got 1",
          anchor_words=1)
    check(InvalidParameterError, r"only \d+ of the 100 anchor words occur in at least min_anchor_df=100000",
          anchor_words=100, min_anchor_df=100000)
    for kwargs, why in (({"rectifier": "dc"}, r"rectifier='dc' was asked for \(it needs AP\)"),
                        ({"path": "tiled"}, r"path='tiled' was asked for"),
                        ({"warm_start": np.zeros((300, 5))}, r"a warm start was given")):
        check(InvalidParameterError, r"'anchor_words' parameter of fit \(100\) cannot be used: " + why,
              anchor_words=100, **kwargs)
    # the vocabulary changed after C was built
    vocab = read_parquet(str(root / "corpus" / "vocab.parquet"))
    words = vocab.column("word").to_pylist()
    words[0] = "changed"
    pq.write_table(vocab.set_column(1, "word", pa.array(words)), root / "corpus" / "vocab.parquet")
    check(StoreError, r"vocab_hash differs from .*vocab\.parquet")
    shutil.copy(synthetic_root / "corpus" / "vocab.parquet", root / "corpus" / "vocab.parquet")
    # NaN, then negative mass in C
    C = zarr.open_array(str(root / "cooc.zarr" / "C"), mode="r+")
    C[3, 4] = np.nan
    # each path checks C where it first reads it: the in-task AP and ENN tasks, the tiled path's row statistics
    for path_kwargs in ({}, {"rectifier": "enn"}, {"path": "tiled"}):
        check(StoreError, r"C has NaN or infinite entries \(first in row 3\)", **path_kwargs)
    check(StoreError, r"C has NaN or infinite entries \(first in row 3\)", anchor_words=100)  # read by row blocks
    C[3, 4] = -1e-3
    for path_kwargs in ({}, {"rectifier": "enn"}, {"path": "tiled"}, {"anchor_words": 100}):
        check(StoreError, r"C has negative entries \(row 3: -0\.001\)", **path_kwargs)
    # corrupt and missing stores
    (root / "cooc.zarr" / "zarr.json").write_text("{ not json")
    check(StoreError, r"cooc\.zarr: not a Zarr group")
    shutil.rmtree(root / "cooc.zarr")
    check(StoreError, r"cooc\.zarr: co-occurrence store does not exist; run `jsmf cooccur` first")


def test_a_warm_start_block_makes_aps_first_eigensolve_a_warm_refinement(synthetic_root, tmp_path):
    """choose-k's warm start: C's top eigenvectors followed by the solver's next Ritz vectors, block_size(K) in all,
    make AP's first eigensolve a warm refinement — fewer operator applications than from the K eigenvectors alone,
    whose block a cold solve completes with random vectors — and give the same model (to the eigensolves'
    tolerance, 1e-6 relative: the topics to 1e-5). Fewer than K vectors are refused."""
    from jsmf_dask.kernels.eigen import block_size
    from jsmf_dask.pipeline.choose_k import _eigenpairs

    root = tmp_path / "r"
    shutil.copytree(synthetic_root, root)
    _, block = _eigenpairs(str(root), 6, 0)
    b = block_size(5, block.shape[0])
    assert block.shape[1] >= b
    models = {cols: fit(root, n_topics=5, iterations=3, name=f"warm{cols}", warm_start=block[:, :cols])
              for cols in (5, b)}
    first = {cols: int(open_model(root, f"warm{cols}").trace["n_matmat"][0]) for cols in models}
    assert first[b] < first[5]
    np.testing.assert_allclose(models[b].B, models[5].B, atol=1e-5)
    np.testing.assert_array_equal(models[b].anchors, models[5].anchors)
    with pytest.raises(InvalidParameterError, match=r"warm_start vectors must have shape \(300, 5\) or more columns"):
        fit(root, n_topics=5, iterations=3, name="too-few", warm_start=block[:, :4])


def test_tiled_ap_equals_plain_dense_ap_n500(tmp_path):
    from tests.kernels.test_ap_dc_eigen_kernels import reference_ap

    synth(tmp_path, n_docs=2000, n_words=500, n_topics=6, doc_length=60, seed=5)
    cooccur(tmp_path, tile_size=128)
    fit(tmp_path, n_topics=6, iterations=10, eig_tol=1e-11, path="tiled", min_anchor_df=0)
    tiled = open_model(tmp_path, "k6-ap").rectified_C()
    reference = reference_ap(open_cooccurrence(f"{tmp_path}/cooc.zarr").C[:], 6, 10)
    # The tiled operator max(YΛYᵀ + c, 0) applied by row blocks vs numpy.linalg.eigh on the dense matrix.
    np.testing.assert_allclose(tiled, reference, rtol=0, atol=1e-8 * reference.max())


def test_in_task_memory_is_checked_before_starting():
    from jsmf_dask.pipeline.fit_plan import fat_worker
    from jsmf_dask.pipeline.fit_plan import in_task_memory

    client = FakeClient({"tcp://10.0.0.1:1": {"memory_limit": 4 * 2**30},
                         "tcp://10.0.0.2:1": {"memory_limit": 8 * 2**30}})
    need = in_task_memory(15000)  # 2.5 · 8 · 15000² bytes + 256 MiB ≈ 4.4 GiB: not in 80% of 4 GiB
    assert fat_worker(client, need) == "tcp://10.0.0.2:1"
    with pytest.raises(StoreError, match=r"needs about 8\.\d GiB in one task; the largest worker \(tcp://10\.0\.0\.2:1\) "
                                         r"has a memory limit of 8\.0 GiB\. Start a worker with --memory-limit"):
        fat_worker(client, in_task_memory(21000))


@pytest.mark.parametrize("threshold", [10_000, 0])
@pytest.mark.parametrize(("rectifier", "kernel"), [("ap", "rectify_low_rank"), ("enn", "enn_rectify")])
def test_in_task_rectification_takes_blas_threads_by_the_vocabulary(synthetic_root, monkeypatch, threshold,
                                                                    rectifier, kernel):
    """One BLAS thread below MULTITHREADED_MIN_WORDS (the cycles' small products lose on several), every core
    from it: AP's and ENN's cycles alike."""
    import os

    from threadpoolctl import threadpool_info

    import jsmf_dask.stages.rectify as stage

    seen = []
    real = getattr(stage, kernel)

    def recording(*args, **kwargs):
        seen.extend(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
        return real(*args, **kwargs)

    monkeypatch.setattr(stage, "MULTITHREADED_MIN_WORDS", threshold)
    monkeypatch.setattr(stage, kernel, recording)
    fit(synthetic_root, n_topics=5, iterations=3, rectifier=rectifier, name="threads", overwrite=True)  # N = 300
    assert seen and set(seen) == {1 if threshold > 300 else os.cpu_count()}


def test_path_auto_decides_by_the_workers_memory(tmp_path, monkeypatch):
    """The automatic switch on a real LocalCluster: in-task where the dense path fits, tiled where it does not."""
    import jsmf_dask.pipeline.fit_plan as fit_module
    from jsmf_dask.cluster import connect
    from jsmf_dask.pipeline.fit_plan import in_task_memory

    synth(tmp_path, n_docs=600, n_words=80, n_topics=4, doc_length=40, seed=3)
    cooccur(tmp_path)
    with connect(n_workers=2, memory_limit="1GiB", dashboard=False):  # worker processes: the tiled path spreads
        cycles = []  # progress per AP cycle, from inside the worker's task through worker events
        # (eig_tol: the paths' first eigensolves differ, ARPACK in one task and LOBPCG over tiles; solved
        # tightly, the two compute the same AP to rounding)
        fits = fit(tmp_path, n_topics=4, iterations=5, name="fits", min_anchor_df=0, on_cycle=cycles.append,
                   eig_tol=1e-11)
        assert [c.cycle for c in cycles] == [1, 2, 3, 4, 5] and {c.of for c in cycles} == {5}
        assert all(c.relative_change > 0 for c in cycles) and cycles[-1].relative_change < cycles[0].relative_change
        assert cycles[-1].eta == 0 and "fit: AP cycle 5/5" in cycles[-1].line()
        # the pace is that of the cycles after the first (which holds the cold eigensolve)
        assert math.isnan(cycles[0].eta) and "ETA after the next cycle" in cycles[0].line()
        assert cycles[1].eta == pytest.approx(3 * cycles[1].seconds)
        assert cycles[2].eta == pytest.approx(2 * (cycles[1].seconds + cycles[2].seconds) / 2)
        assert fits.attrs["path"]["chosen"] == "in-task"
        assert "fits" in fits.attrs["path"]["reason"]
        # a vocabulary whose dense C and iterates would need 10 GiB: more than the 1 GiB worker has
        monkeypatch.setattr(fit_module, "in_task_memory", lambda n: 10 * 2**30 + 0 * in_task_memory(n))
        # the default rectifier: the low-rank path (ENN + LAW), named for it, the reason stored
        low = fit(tmp_path, n_topics=4, iterations=5, min_anchor_df=0)
        assert low.name == "k4-enn" and low.attrs["params"]["rectifier"] == "enn"
        assert low.attrs["path"]["chosen"] == "low-rank"
        assert re.search(r"needs about 10\.00 GiB for N = 80; the largest worker .* too little, so ENN \+ LAW",
                         low.attrs["path"]["reason"])
        # AP asked for explicitly: the tiled path
        tiled_cycles = []
        tiled = fit(tmp_path, n_topics=4, rectifier="ap", iterations=5, name="tiled", min_anchor_df=0,
                    on_cycle=tiled_cycles.append, eig_tol=1e-11)
        assert tiled.attrs["path"]["chosen"] == "tiled"
        np.testing.assert_allclose([c.relative_change for c in tiled_cycles], [c.relative_change for c in cycles],
                                   rtol=1e-6)
        assert "needs about 10.00 GiB for N = 80; the largest worker" in tiled.attrs["path"]["reason"]
        with pytest.raises(StoreError, match=r"rectifier='dc' runs only in one task .* --memory-limit of at least 12\.5GiB"):
            fit(tmp_path, n_topics=4, rectifier="dc", name="dc")
    assert not (tmp_path / "model.zarr" / "dc").exists()
    assert open_model(tmp_path, "tiled").attrs["path"]["chosen"] == "tiled"
    # both paths compute the same AP, and measure the distance to {C >= 0} before the clip
    np.testing.assert_allclose(tiled.B, fits.B, atol=1e-8)
    assert fits.trace["dist_nonnegative"][0] > 0
    np.testing.assert_allclose(tiled.trace["dist_nonnegative"], fits.trace["dist_nonnegative"], rtol=1e-6, atol=1e-15)


def test_non_convergence_is_a_warning_recorded_in_the_attrs(synthetic_root):
    from jsmf_dask.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match=r"eigensolves stopped above the relative residual 1e-30"):
        model = fit(synthetic_root, n_topics=5, iterations=3, eig_tol=1e-30, name="unconverged", overwrite=True)
    (issue,) = open_model(str(synthetic_root), "unconverged").attrs["convergence"]
    assert issue["step"] == "eigensolve" and issue["solves_above_tol"] == issue["of"] == 4
    assert issue["max_residual"] > 1e-30
    assert model.attrs["convergence"] == [issue]
    converged = fit(synthetic_root, n_topics=5, iterations=3, name="converged", overwrite=True)
    assert converged.attrs["convergence"] == []


def test_eg_solver_and_psd_ending_through_fit(synthetic_root):
    """The non-default B solver and last projection, on both paths, against the in-memory functions."""
    store = open_cooccurrence(f"{synthetic_root}/cooc.zarr")
    C = store.C[:]
    candidates = store.D1[:] >= 10
    for end_with in ("psd", "nonnegative"):
        rect = rectify(C, 5, iterations=20, end_with=end_with, eig_tol=1e-11)  # solvers differ by path: solve tightly
        anchors, _ = find_anchors(rect.C, 5, candidates=candidates)
        for path in ("in-task", "tiled"):
            solver = "eg" if end_with == "nonnegative" else "exact"
            model = fit(synthetic_root, n_topics=5, iterations=20, end_with=end_with, solver=solver, path=path,
                        name=f"{end_with}-{path}", overwrite=True, eig_tol=1e-11)
            np.testing.assert_array_equal(model.anchors, anchors)
            np.testing.assert_allclose(model.B, recover(rect.C, anchors, solver=solver).B, atol=1e-7)
            stored = open_model(str(synthetic_root), model.name)
            assert "C_rect" not in stored.group  # kept in low-rank form: Y, eigenvalues, correction/*
            C_rect = stored.rectified_C()
            np.testing.assert_allclose(C_rect, rect.C, rtol=0, atol=1e-7 * rect.C.max())  # same AP, other path
            assert abs(C_rect.sum() - 1) < 1e-9
            if end_with == "psd":  # exactly rank K, possibly slightly negative
                assert np.linalg.matrix_rank(C_rect, tol=1e-10 * np.abs(C_rect).max()) == 5
            else:  # the stored form L + max(−L, 0) is non-negative up to the rounding of L's entries
                assert C_rect.min() >= -1e-15 * C_rect.max()


@pytest.mark.parametrize(("rectifier", "path"), [("none", "in-task"), ("none", "tiled"), ("dc", "in-task")])
def test_baseline_and_dc_read_their_rectified_c_from_the_store(synthetic_root, rectifier, path):
    """The Baseline's rectified C is C / ΣC and DC's C with a completed diagonal: the model keeps the scale
    and DC's diagonal, not a second N×N array, and rows read through it equal the dense references."""
    store = open_cooccurrence(f"{synthetic_root}/cooc.zarr")
    C = store.C[:]
    name = f"ref-{rectifier}-{path}"
    model = fit(synthetic_root, n_topics=5, rectifier=rectifier, path=path, name=name, min_anchor_df=0,
                overwrite=True)
    stored = open_model(synthetic_root, name)
    if rectifier == "none":
        want = C / C.sum()  # by hand
    else:  # DC: the kernel's dense result (its off-diagonal entries are C's over the completed sum)
        want = rectify(C, 5, rectifier="dc", rng=np.random.default_rng(0)).C
        np.testing.assert_allclose(want - np.diag(np.diag(want)), (C - np.diag(np.diag(C))) / stored.attrs[
            "rectified"]["scale"], rtol=1e-12, atol=0)
    got = stored.rectified_C()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-18)
    assert ("rectified_diagonal" in stored.group) == (rectifier == "dc")
    # on disk: the small arrays only (the dense C_rect took 8N² = 720 kB here)
    files = [f for f in (synthetic_root / "model.zarr" / name).rglob("*") if f.is_file()]
    assert sum(f.stat().st_size for f in files) < 0.25 * 8 * C.size
    # B is the recovery on that C (dense reference), and evaluate measures against it
    anchors = model.anchors
    np.testing.assert_allclose(model.B, recover(want, anchors).B, rtol=0, atol=1e-9)


def test_more_topics_than_documents_is_refused_before_any_work(tmp_path):
    synth(tmp_path, n_docs=6, n_words=30, n_topics=2, doc_length=40, seed=1)
    cooccur(tmp_path)
    with pytest.raises(InvalidParameterError, match=r"at most the 6 documents C was built from .* Got 7 instead"):
        fit(tmp_path, n_topics=7, min_anchor_df=0)
    assert not (tmp_path / "model.zarr" / "k7-ap").exists()


def test_the_in_memory_fit_takes_blas_threads_by_the_vocabulary(monkeypatch):
    """fit_cooccurrence runs BLAS on the in-task path's threads (one below MULTITHREADED_MIN_WORDS): on the
    default threads it took 10.4 s instead of 2.4 s on the NIPS papers' C (N = 3,000, K = 20)."""
    from threadpoolctl import threadpool_info

    import jsmf_dask.estimator.model as estimator
    from jsmf_dask import RectifiedAnchorWords

    seen = []
    real = estimator.rectify

    def recording(*args, **kwargs):
        seen.extend(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
        return real(*args, **kwargs)

    monkeypatch.setattr(estimator, "rectify", recording)
    rng = np.random.default_rng(0)
    X = rng.poisson(1.0, size=(300, 40)).astype(float)
    C = X.T @ X - np.diag(X.sum(axis=0))
    RectifiedAnchorWords(n_components=3, min_anchor_df=0, max_iter=3, refine=None).fit_cooccurrence(C / C.sum())
    assert seen and set(seen) == {1}


def test_topic_labels_keep_multi_word_labels_apart():
    from jsmf_dask.pipeline.fit_model import topic_labels, word_separator

    assert word_separator(["neural", "network", "learning"]) == " "
    assert word_separator(["Heat (1995)", "Up"]) == " | "
    B = np.array([[0.5, 0.1], [0.3, 0.2], [0.2, 0.7]])
    assert topic_labels(B, np.array([0, 2]), ["a", "b", "c"], n=2) == ["[a] a b", "[c] c b"]
    # one separator for the whole vocabulary, whether or not a topic's own words hold a space
    assert topic_labels(B, np.zeros(0, dtype=int), ["A b", "C", "D"], n=2) == ["A b | C", "D | C"]


def test_a_fit_on_anchor_words_equals_a_dense_reference_and_every_word_beyond_the_vocabulary(synthetic_root,
                                                                                            tmp_path):
    """AP on the vocabulary's block, the anchors among it, every word against its columns (a slow dense reference
    written here: the dense AP kernel, the block's anchors, recovery word by word, ρ, Bayes' rule)."""
    from threadpoolctl import threadpool_limits

    from jsmf_dask.kernels.recover import simplex_least_squares
    from jsmf_dask.kernels.vocabulary import select_vocabulary

    root = tmp_path / "copy"
    shutil.copytree(synthetic_root, root, ignore=shutil.ignore_patterns("model.zarr", "topics"))
    fitted = fit(root, n_topics=5, iterations=20, anchor_words=60)
    store = open_cooccurrence(f"{root}/cooc.zarr")
    C = store.C[:] / store.C[:].sum()
    vocab = read_parquet(str(root / "corpus" / "vocab.parquet"))
    words = np.sort(select_vocabulary(np.asarray(vocab.column("df")), np.asarray(vocab.column("tf")), 3000,
                                      60).kept)
    with threadpool_limits(limits=1, user_api="blas"):  # the fit's task's BLAS threads at this size
        block = C[np.ix_(words, words)]
        rect = rectify(block / block.sum(), 5, iterations=20)  # AP from the block divided by its sum
    local, _ = find_anchors(rect.C, 5, candidates=store.D1[:][words] >= 10)
    anchors = words[local]
    np.testing.assert_array_equal(fitted.anchors, anchors)
    block_rows = {w: rect.C[i] for i, w in enumerate(words)}
    rows = np.array([block_rows[i] if i in block_rows else C[i, words] for i in range(300)])
    sums = rows.sum(axis=1, keepdims=True)
    Cbar = rows / np.where(sums > 0, sums, 1.0)  # a word that never co-occurs with the vocabulary: a zero row
    S = Cbar[anchors]
    y = np.array([simplex_least_squares(S @ S.T, S @ Cbar[i]) for i in range(300)])
    y[anchors] = np.eye(5)
    rho = C[np.ix_(anchors, words)].sum(axis=1) / C[anchors].sum(axis=1)
    y = y / rho
    y /= y.sum(axis=1, keepdims=True)
    B = y * C.sum(axis=1)[:, None]
    B /= B.sum(axis=0)
    # the fit's AP keeps its iterates factored where the reference's are dense, and each cycle's eigenpairs are
    # solved to a relative residual of 1e-6 (reached here: about 1e-8 factored, 3e-11 dense): measured 1.7e-9 apart
    np.testing.assert_allclose(fitted.B, B, rtol=0, atol=1e-8)
    model = open_model(root, "k5-ap")
    np.testing.assert_array_equal(model.arrays["anchor_words"], words)
    assert model.attrs["anchor_words"]["n"] == 60 and model.attrs["params"]["anchor_words"] == 60
    assert model.arrays["Y"].shape == (60, 5) and model.rectified_C().shape == (60, 60)
    np.testing.assert_allclose(model.arrays["p_word"], C.sum(axis=1), rtol=1e-12)
    assert "the block of the 60 words of highest tf-idf" in model.attrs["path"]["reason"]
    # a vocabulary no smaller than every word's is every word
    full = fit(root, n_topics=5, iterations=20, anchor_words=300, name="full")
    assert "anchor_words" not in full.attrs and full.attrs["params"]["anchor_words"] is None


def test_auto_anchor_words_by_topics_and_documents(synthetic_root, tmp_path, monkeypatch):
    from jsmf_dask import parameters

    assert parameters.auto_anchor_words(20, 9_999) == 1000 and parameters.auto_anchor_words(100, 500) == 2000
    assert parameters.auto_anchor_words(20, 10_000) is None  # C's rows are reliable: every word
    root = tmp_path / "copy"
    shutil.copytree(synthetic_root, root, ignore=shutil.ignore_patterns("model.zarr", "topics"))
    monkeypatch.setattr(parameters, "AUTO_ANCHOR_WORDS_MIN", 60)
    assert fit(root, n_topics=5, iterations=3, anchor_words="auto").attrs["anchor_words"]["n"] == 100  # 20 K
    # 'auto' fits every word where fewer than K of the vocabulary's words may be anchors (an explicit n: an error):
    # the five words in the most documents, whose tf-idf is lowest, are the only candidates at this floor
    floor = int(np.sort(open_cooccurrence(f"{root}/cooc.zarr").D1[:])[-5])
    assert "anchor_words" not in fit(root, n_topics=5, iterations=3, anchor_words="auto", overwrite=True,
                                     min_anchor_df=floor).attrs
    with pytest.raises(InvalidParameterError, match=r"only \d of the 100 anchor words occur in at least"):
        fit(root, n_topics=5, iterations=3, anchor_words=100, overwrite=True, min_anchor_df=floor)
    monkeypatch.setattr(parameters, "AUTO_ANCHOR_WORDS_MAX_DOCS", 3000)  # the 3,000 documents C counted
    assert "anchor_words" not in fit(root, n_topics=5, iterations=3, anchor_words="auto", overwrite=True).attrs


def test_evaluate_and_report_read_a_model_fitted_on_anchor_words(synthetic_root, tmp_path):
    from jsmf_dask import evaluate, report

    root = tmp_path / "copy"
    shutil.copytree(synthetic_root, root, ignore=shutil.ignore_patterns("model.zarr", "topics"))
    fit(root, n_topics=5, iterations=5, anchor_words=60)
    entry = evaluate(root)["models"]["k5-ap"]
    assert "rectified_C" not in entry and "60 words" in entry["notes"]["rectified_C"]
    assert entry["original_C"]["recovery"] >= 0
    from pathlib import Path

    assert "anchor vocabulary (60 words)" in Path(report(root)).read_text()


def test_weightless_topics_message_by_hand():
    """Rows of A under 5% of an even share (1/K) are named by their anchors; a healthy A says nothing; A = 0
    (no two anchors co-occur) keeps its own message, and so does a negative sum before normalisation (an
    unconverged ENN); the Baseline (no rectification) is checked for that only."""
    from jsmf_dask.pipeline.fit_model import WEIGHTLESS_SHARE, weightless_topics_message

    words = ["a", "b", "c", "d"]
    healthy = np.diag([0.4, 0.3, 0.2, 0.1])
    assert weightless_topics_message(1.0, healthy, np.arange(4), words, 10, "ap", 150) is None
    # topic 2's share 0.0124 is just under 0.05 / 4 = 0.0125; topic 3's 0.0126 just over
    edge = np.diag([0.5, 0.475, 0.0124, 0.0126])
    assert WEIGHTLESS_SHARE / 4 == 0.0125
    message = weightless_topics_message(1.0, edge, np.array([3, 2, 1, 0]), words, 10, "ap", 150)
    assert message.startswith("1 of 4 topics have almost no weight in A") and "anchors 'b')" in message
    assert "try more cycles (now iterations=150) or a higher anchor floor (now min_anchor_df=10)" in message
    from jsmf_dask.cli_words import cli_words

    assert "(now --iterations 150) or a higher anchor floor (now --min-anchor-df 10)" in cli_words(message)
    assert "never co-occur" in weightless_topics_message(0.0, np.zeros((4, 4)), np.arange(4), words, 0, "none", 1)
    below = weightless_topics_message(-6.19, np.zeros((4, 4)), np.arange(4), words, 1, "enn", 1)
    assert below.startswith("the 4 anchors' block of the rectified C gives A a sum of -6.19, below zero, so A cannot "
                            "be formed and is zero") and "(now iterations=1)" in below
    assert weightless_topics_message(1.0, edge, np.arange(4), words, 10, "none", 1) is None  # the Baseline: compared


def test_an_unconverged_enn_fit_keeps_b_and_a_probabilities(tmp_path):
    """ENN's C is ε-non-negative: after one cycle on Reuters (K 12, anchors down to one document) some words' rows
    sum below zero and the anchors' block gives A a negative sum (-6.2). B takes those words' p(w) as 0 (its entries
    were down to -7.6e-6), and A is zero with a warning that says why (it was returned undivided, its entries down
    to -1.7, under a message that called it zero)."""
    import dask

    from jsmf_dask import ingest
    from tests.conftest import REUTERS_DOCWORD

    root = tmp_path / "reuters"
    with dask.config.set(scheduler="synchronous"):
        ingest(root, [str(REUTERS_DOCWORD)])
        cooccur(root, heldout=0.1, validation=0.05, weighting="documents")  # the case as it was found
        with pytest.warns(UserWarning, match=r"gives A a sum of -6\.\d+, below zero, so A cannot be formed"):
            model = fit(root, n_topics=12, rectifier="enn", iterations=1, min_anchor_df=1, seed=7, path="in-task")
    assert model.B.min() >= 0 and np.allclose(model.B.sum(axis=0), 1)
    assert not model.A.any() and model.attrs["legality"] < 0


def test_an_anchor_outside_the_anchor_vocabulary_columns_is_a_clear_error(tmp_path):
    """On an anchor vocabulary, p(z | i) ∝ ỹ_ik / ρ_k with ρ_k the share of anchor k's row of C in the vocabulary's
    columns. With no document-frequency floor and two AP cycles on Reuters, a word of one document ('estrada') is
    an anchor whose row has none there: ρ_k = 0 made B NaN and numpy's SVD fail ('SVD did not converge'). Now the
    fit says which anchor and what to change, and writes nothing."""
    import dask

    from jsmf_dask import ingest
    from jsmf_dask.exceptions import InvalidParameterError
    from tests.conftest import REUTERS_DOCWORD

    root = tmp_path / "reuters"
    with dask.config.set(scheduler="synchronous"):
        ingest(root, [str(REUTERS_DOCWORD)])
        cooccur(root, heldout=0.1, validation=0.05, weighting="documents")  # the case as it was found
        with pytest.raises(InvalidParameterError, match=r"the anchor 'estrada' never co-occurs in C with the anchor "
                                                         r"vocabulary's 1000 words .* raise min_anchor_df \(now 0\), "
                                                         r"or pass anchor_words=None"):
            fit(root, n_topics=5, iterations=2, tol=0.5, min_anchor_df=0, seed=1, path="in-task", eig_tol=1e-3,
                anchor_words="auto", name="rare")
    assert not (root / "model.zarr" / "rare").exists()


@pytest.fixture(scope="module")
def rare_anchor_root(tmp_path_factory):
    """An LDA corpus of 3 topics over 60 words, and 6 rare words, each in 12 documents of its own (3 tokens of it
    and 10 words of one topic): with no document-frequency floor the rare words are the most extreme rows of C̄,
    so they anchor topics; a pair of them never shares a document."""
    import dask
    import json
    import string

    from jsmf_dask import ingest

    rng = np.random.default_rng(0)
    name = lambda i: "w" + string.ascii_lowercase[i // 26] + string.ascii_lowercase[i % 26]  # noqa: E731
    B = rng.dirichlet(np.full(60, 0.1), size=3)
    lines = []
    for _ in range(1500):
        z = rng.choice(3, 40, p=rng.dirichlet(np.full(3, 0.3)))
        lines.append(" ".join(name(rng.choice(60, p=B[t])) for t in z))
    for r in range(6):
        lines += [" ".join(["rare" + string.ascii_lowercase[r]] * 3 + [name(rng.choice(60, p=B[r % 3]))
                                                                       for _ in range(10)]) for _ in range(12)]
    root = tmp_path_factory.mktemp("rare-anchors")
    path = root / "docs.jsonl"
    path.write_text("\n".join(json.dumps({"id": str(i), "text": t}) for i, t in enumerate(lines)) + "\n")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        ingest(root / "run", [str(path)], format="text", id_column="id", min_doc_tokens=1)
        cooccur(root / "run", weighting="documents")  # the measured case: each document once (paper eq. 1)
    return root / "run"


def test_fit_warns_when_rare_anchors_leave_topics_without_weight(rare_anchor_root):
    """Five topics with no anchor floor: two of them, anchored by rare words, hold under 1% of A (measured 0.6%);
    the warning names them, and with a floor above the rare words' 12 documents it is gone."""
    import warnings

    import dask

    from jsmf_dask.io.parquet import read_vocabulary
    from jsmf_dask.pipeline.fit_model import WEIGHTLESS_SHARE

    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        with pytest.warns(UserWarning, match=r"2 of 5 topics have almost no weight in A") as caught:
            fit(rare_anchor_root, n_topics=5, rectifier="ap", min_anchor_df=0, name="rare")
        model = open_model(str(rare_anchor_root), "rare")
        shares = model.arrays["A"].sum(axis=1)
        weightless = np.flatnonzero(shares < WEIGHTLESS_SHARE / 5)
        assert weightless.size == 2
        words = read_vocabulary(f"{rare_anchor_root}/corpus").column("word").to_pylist()
        named = [words[a] for a in model.arrays["anchors"][weightless]]
        assert all(w.startswith("rare") for w in named)
        message = str(next(w.message for w in caught if "no weight" in str(w.message)))
        assert all(repr(w) in message for w in named)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            fit(rare_anchor_root, n_topics=5, rectifier="ap", min_anchor_df=13, name="floored")
        assert (open_model(str(rare_anchor_root), "floored").arrays["A"].sum(axis=1) >= WEIGHTLESS_SHARE / 5).all()


@pytest.mark.parametrize(("rectifier", "path"), [("ap", "in-task"), ("ap", "tiled"), ("enn", "auto")])
def test_auto_floor_picks_the_anchors_again_when_rare_ones_leave_topics_weightless(rare_anchor_root, monkeypatch,
                                                                                    rectifier, path):
    """``min_anchor_df='auto'`` with its first floor at 0 (patched; 10 admits the rare words' 12 documents too, and
    its second floor, 0.5% of these 1,572 documents, is 10 again: patched to 1%, 16): the first pick leaves 2 of 5
    topics weightless (as in the test above), so the anchors are picked again among the words in 16 documents or
    more, and the model is the one a floor of 16 fits (the same rectified C: the same anchors, B and A), with the
    record of both picks and no warning. On each path that keeps the rectified C at hand: AP in one task or
    tiled, ENN's LAW form."""
    import warnings

    import dask

    from jsmf_dask.pipeline import anchor_floor

    monkeypatch.setattr(anchor_floor, "ANCHOR_DF", 0)
    monkeypatch.setattr(anchor_floor, "RAISED_DF_SHARE", 0.01)
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}), warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        auto = fit(rare_anchor_root, n_topics=5, rectifier=rectifier, path=path, name=f"auto-{rectifier}-{path}")
        direct = fit(rare_anchor_root, n_topics=5, rectifier=rectifier, path=path, min_anchor_df=16,
                     name=f"direct-{rectifier}-{path}")
    assert auto.attrs["anchor_floor"] == {"rule": "auto", "kept": 16,
                                          "tried": [{"min_anchor_df": 0, "weightless": 2},
                                                    {"min_anchor_df": 16, "weightless": 0}]}
    assert auto.attrs["params"]["min_anchor_df"] == 16 and "anchor_floor" not in direct.attrs
    np.testing.assert_array_equal(auto.anchors, direct.anchors)
    np.testing.assert_allclose(auto.B, direct.B, rtol=0, atol=1e-12)
    np.testing.assert_allclose(auto.A, direct.A, rtol=0, atol=1e-12)
    stored = open_model(str(rare_anchor_root), f"auto-{rectifier}-{path}")
    np.testing.assert_array_equal(stored.arrays["anchors"], direct.anchors)
    assert stored.attrs["anchor_floor"]["kept"] == 16


def test_jsmf_fit_says_when_it_picked_the_anchors_again(rare_anchor_root, monkeypatch, capsys):
    """The CLI prints the second pick's line (patched floors as above), and `--min-anchor-df auto` is the default
    spelled out."""
    from jsmf_dask.cli import main
    from jsmf_dask.pipeline import anchor_floor

    monkeypatch.setattr(anchor_floor, "ANCHOR_DF", 0)
    monkeypatch.setattr(anchor_floor, "RAISED_DF_SHARE", 0.01)
    assert main(["fit", str(rare_anchor_root), "--topics", "5", "--rectifier", "ap", "--min-anchor-df", "auto",
                 "--name", "cli-auto", "--scheduler", "synchronous", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert ("anchors picked again among the words in at least 16 documents (1.0% of C's documents), kept: 2 of 5 "
            "topics had almost no weight in A with the floor of 0, 0 with it") in out



def test_jsmf_run_says_when_its_fit_picked_the_anchors_again(rare_anchor_root, monkeypatch, capsys):
    """`jsmf run` prints each stage's lines: its fit's include the second pick's (`jsmf topics` prints the refined
    topics only; the pick is in the spectral model's attrs)."""
    from jsmf_dask.cli import main
    from jsmf_dask.pipeline import anchor_floor

    monkeypatch.setattr(anchor_floor, "ANCHOR_DF", 0)
    monkeypatch.setattr(anchor_floor, "RAISED_DF_SHARE", 0.01)
    base = rare_anchor_root.parent
    config = base / "run.toml"
    config.write_text(f'root = "{base / "run-config"}"\n[ingest]\ninputs = ["{base / "docs.jsonl"}"]\n'
                      'min_doc_tokens = 1\n[cooccur]\nweighting = "documents"\n[[fit]]\ntopics = 5\nrectifier = "ap"\n',
                      encoding="utf-8")
    assert main(["run", str(config), "--scheduler", "synchronous", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert ("anchors picked again among the words in at least 16 documents (1.0% of C's documents), kept: 2 of 5 "
            "topics had almost no weight in A with the floor of 0, 0 with it") in out
