"""``choose-k``: one C, a fit and a short refine per K, scored on the validation documents; the true K found."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jsmf_dask import cooccur
from jsmf_dask.cli import main
from jsmf_dask.exceptions import InvalidParameterError, StoreError
from jsmf_dask.io.model_store import list_models
from jsmf_dask.pipeline.choose_k import choose_k, model_names
from jsmf_dask.pipeline.synth import synth
from jsmf_dask.kernels.doc_split import DocumentSplit
from jsmf_dask.io.parquet import corpus_dir, list_blocks, read_block
from tests.conftest import FakeClient


def _plain_lda_root(base, k: int):
    """A plain-LDA corpus (topics drawn from Dirichlet(0.05) over the words, no planted anchors), C built with 10%
    held out and 10% validation documents."""
    root = base / f"lda-k{k}"
    synth(root, n_docs=3000, n_words=1000, n_topics=k, doc_length=100, seed=k, topics_from="dirichlet", beta=0.05)
    cooccur(root, heldout=0.1, validation=0.1)
    return root


@pytest.mark.parametrize("k", [5, 10, 20])
def test_choose_k_recovers_the_true_number_of_topics(tmp_path, k):
    root = _plain_lda_root(tmp_path, k)
    candidates = sorted({k // 2, k - 1, k, k + 1, (3 * k) // 2, 2 * k})
    seen = []
    result = choose_k(root, topics=candidates, on_k=seen.append)
    assert result.recommended == k, result.lines()
    assert result.best_perplexity_k == k
    # reported as each K ends (two at a time here: threads, two cores), each once
    assert sorted(r.n_topics for r in seen) == candidates and not any(r.resumed for r in seen)
    # every K scored on the same validation documents, and only on them
    n_valid = 0
    for block in list_blocks(corpus_dir(str(root))):
        ids = read_block(block, 1000).column("doc_id")
        held, valid = DocumentSplit(0.1, 0.1).masks(ids)
        assert not (held & valid).any()
        n_valid += int(valid.sum())
    assert result.validation["n_docs"] == n_valid
    assert {r["n_topics"] for r in result.rows} == set(candidates)
    written = json.loads((root / "report" / "choose_k.json").read_text())
    assert written["recommended"] == k and len(written["rows"]) == len(candidates)
    assert len(written["eigenvalues"]) == 2 * k + 1
    assert (root / "report" / "choose_k.png").read_bytes()[:4] == b"\x89PNG"
    assert (root / "report" / "choose_k.csv").read_text().count("\n") == len(candidates) + 1
    if k == 5:  # a rerun resumes: nothing fitted again, the same table
        again = []
        second = choose_k(root, topics=candidates, on_k=again.append)
        assert all(r.resumed for r in again)
        assert second.rows[0]["perplexity"] == result.rows[0]["perplexity"]
        assert second.recommended == k
        assert {name for c in candidates for name in model_names(c)} <= set(list_models(str(root)))


def test_choose_k_fits_side_by_side_as_it_would_one_at_a_time(tmp_path, monkeypatch):
    import os
    import shutil

    import jsmf_dask.pipeline.choose_k as module
    from jsmf_dask.io.model_store import open_model

    root = tmp_path / "r"
    synth(root, n_docs=800, n_words=300, n_topics=4, doc_length=60, seed=5, topics_from="dirichlet")
    cooccur(root, heldout=0.1, validation=0.1)
    alone = tmp_path / "alone"
    shutil.copytree(root, alone)
    assert module.parallel_fits(300, 4) == min(2, os.cpu_count())  # threads, N small: a fit a core
    side_by_side = choose_k(root, topics=[2, 3, 4, 6])
    monkeypatch.setattr(module, "parallel_fits", lambda n_words, n_candidates: 1)
    one_at_a_time = choose_k(alone, topics=[2, 3, 4, 6])
    # the same rows but the seconds; to 1e-9, not to the bit: side by side every fit runs BLAS on one thread,
    # and the recovery's products on two threads round differently in the last bit (B within 1e-17 below),
    # which the standard errors of the refined scores can carry into their last digits
    for a, b in zip(side_by_side.rows, one_at_a_time.rows, strict=True):
        assert a.keys() == b.keys()
        for key in a.keys() - {"fit_seconds", "refine_seconds"}:
            assert a[key] == (pytest.approx(b[key], rel=1e-9) if isinstance(b[key], float) else b[key]), (key, a, b)
    for k in (2, 3, 4, 6):
        for name in model_names(k):
            np.testing.assert_allclose(open_model(str(root), name).arrays["B"],
                                       open_model(str(alone), name).arrays["B"], rtol=0, atol=1e-12)


def test_parallel_fits_keep_each_ks_warnings_and_stop_at_the_first_error():
    import threading
    import time
    import warnings

    import dask

    from jsmf_dask.pipeline.choose_k import KRecord, _fit_all, _warnings_of_this_k

    def fit_one(k):
        with _warnings_of_this_k() as caught:
            time.sleep(0.02 * (5 - k))
            warnings.warn(f"driver {k}")
            # a warning raised in a dask thread of this K's computation is this K's too
            dask.delayed(lambda: warnings.warn(f"task {k}"))().compute(scheduler="threads")
        return KRecord(k, f"s{k}", f"r{k}", 0.0, 0.0, 1, False, caught)

    records = _fit_all([1, 2, 3, 4], 2, fit_one, None)
    assert [r.warnings for r in records] == [[f"driver {k}", f"task {k}"] for k in (1, 2, 3, 4)]

    started = []
    lock = threading.Lock()

    def failing(k):
        with lock:
            started.append(k)
        if k == 8:
            raise ValueError("K = 8 failed")
        time.sleep(0.2)
        return KRecord(k, "s", "r", 0.0, 0.0, 1, False)

    with pytest.raises(ValueError, match="K = 8 failed"):
        _fit_all([1, 2, 3, 4, 5, 6, 7, 8], 2, failing, None)
    assert len(started) < 8  # the largest K starts first; once it failed the rest were not started


def test_choose_k_needs_validation_documents_and_valid_topics(tmp_path):
    root = tmp_path / "r"
    synth(root, n_docs=300, n_words=200, n_topics=3, doc_length=40, seed=1, topics_from="dirichlet")
    cooccur(root, heldout=0.1)
    with pytest.raises(StoreError, match="no validation documents.*--validation 0.05 --heldout 0.1"):
        choose_k(root, topics=[2, 3])
    cooccur(root, heldout=0.1, validation=0.1, overwrite=True)
    for bad in ([3], [1, 3], [2, 200], [2, 2], "2,3", [2, 3.0]):
        with pytest.raises(InvalidParameterError, match="'topics' parameter of choose_k"):
            choose_k(root, topics=bad)
    with pytest.raises(InvalidParameterError, match="'sweeps' parameter of choose_k"):
        choose_k(root, topics=[2, 3], sweeps=0)
    assert not (root / "report" / "choose_k.json").exists()
    assert not any(name.startswith("choose-k") for name in list_models(str(root)))


def test_choose_k_command_line(tmp_path, capsys):
    root = tmp_path / "r"
    synth(root, n_docs=600, n_words=300, n_topics=4, doc_length=60, seed=3, topics_from="dirichlet")
    cooccur(root, heldout=0.1, validation=0.1)
    assert main(["choose-k", str(root), "--topics", "2:6:2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "recommended K:" in out and "| 6 |" in out and "held out for evaluate took no part" in out
    with pytest.raises(SystemExit) as exit_:
        main(["choose-k", str(root), "--topics", "6:2"])
    assert exit_.value.code == 2
    assert "expected A:B" in capsys.readouterr().err


def test_topics_spec():
    from jsmf_dask.cli_parser import _topics_spec

    assert _topics_spec("5:100") == [5, 7, 10, 14, 19, 26, 37, 51, 72, 100]
    assert _topics_spec("4:10:3") == [4, 7, 10]
    assert _topics_spec("3,8,5") == [3, 8, 5]
    np.testing.assert_array_equal(_topics_spec("2:3"), [2, 3])


def test_on_a_cluster_the_k_are_fitted_side_by_side_unpinned(tmp_path):
    """Two single-threaded workers that each hold an in-task fit: the fits are not pinned to one worker, two K
    are submitted at once, and the table equals the one fitted in this process."""
    import shutil

    import distributed

    from jsmf_dask.cluster import connect
    from jsmf_dask.io.model_store import open_model

    root = tmp_path / "r"
    synth(root, n_docs=600, n_words=300, n_topics=4, doc_length=60, seed=7, topics_from="dirichlet")
    cooccur(root, heldout=0.1, validation=0.1)
    here = tmp_path / "here"
    shutil.copytree(root, here)
    in_process = choose_k(here, topics=[2, 3, 4, 6])
    with connect(n_workers=2, memory_limit="1GiB", dashboard=False) as client:
        from jsmf_dask.pipeline.choose_k import parallel_fits
        from jsmf_dask.pipeline.fit_plan import fat_worker, in_task_memory

        assert parallel_fits(300, 4) == 2
        assert fat_worker(client, in_task_memory(300)) is None  # either worker holds it: the scheduler places it
        with distributed.get_task_stream(client) as stream:
            on_cluster = choose_k(root, topics=[2, 3, 4, 6])
    fits = [t for t in stream.data if str(t["key"]).startswith("rectify-in-task")]
    assert len(fits) == 4
    # Not bitwise: the workers' BLAS runs on one thread, this process's on two, and every K starts from C's
    # eigenvectors solved to a residual of 1e-4 (CHOOSE_K_EIG_TOL) then 2 AP cycles, which carry a difference of
    # rounding in that solve through. Up to the true K = 4 the eigenvalues are well apart and B agrees closely;
    # at K = 6 the two extra ones are noise close together, their vectors are ill-determined, and B moved by
    # 1e-5 (its perplexity by 8e-7 relative). The picks are the same.
    assert [r["perplexity"] for r in on_cluster.rows] == pytest.approx([r["perplexity"] for r in in_process.rows],
                                                                       rel=1e-5)
    assert on_cluster.recommended == in_process.recommended
    for k in (2, 3, 4):
        np.testing.assert_allclose(open_model(str(root), model_names(k)[1]).arrays["B"],
                                   open_model(str(here), model_names(k)[1]).arrays["B"], rtol=0, atol=1e-8)


def _cluster(**workers) -> FakeClient:
    """A client stand-in whose workers are given as ``address=(threads, GiB)``."""
    return FakeClient({addr: {"nthreads": n, "memory_limit": gib * 2**30} for addr, (n, gib) in workers.items()})


def test_fits_run_side_by_side_on_a_cluster_only_where_every_worker_thread_holds_one():
    from jsmf_dask.pipeline.fit_plan import concurrent_in_task_fits, fat_worker

    half = 2**29  # 0.5 GiB: within 80% of 1 GiB once, not twice
    assert concurrent_in_task_fits(_cluster(a=(1, 1), b=(1, 1)), half) == 2
    assert concurrent_in_task_fits(_cluster(a=(2, 1), b=(1, 1)), half) == 1  # a could take two at once
    assert concurrent_in_task_fits(_cluster(a=(2, 2), b=(1, 1)), half) == 3
    assert concurrent_in_task_fits(_cluster(a=(1, 1), b=(1, 0.25)), half) == 1  # b cannot hold one
    assert fat_worker(_cluster(a=(1, 1), b=(1, 1)), half) is None  # any worker: unpinned
    assert fat_worker(_cluster(a=(1, 1), b=(1, 0.25)), half) == "a"  # only a: pinned there


def test_choose_k_scores_only_validation_documents_no_refine_trained_on(tmp_path, monkeypatch):
    """Beyond its scored sample, refine trains on the validation documents: choose-k scores that sample alone
    (a document some K trained on would flatter it), the same documents for every K."""
    import jsmf_dask.pipeline.refine as refine_module
    from jsmf_dask.io.model_store import open_model
    from jsmf_dask.kernels.doc_split import doc_hashes, sample_mask

    root = tmp_path / "r"
    synth(root, n_docs=1000, n_words=200, n_topics=3, doc_length=40, seed=5, topics_from="dirichlet")
    cooccur(root, heldout=0.1, validation=0.2)
    monkeypatch.setattr(refine_module, "VALIDATION_SCORED_DOCS", 60)
    result = choose_k(root, topics=[2, 3], sweeps=3)
    attrs = [open_model(str(root), row["model"]).attrs for row in result.rows]
    sample = attrs[0]["validation"]["sample"]
    assert sample < 0.5 and all(a["validation"]["sample"] == sample for a in attrs)
    scored = 0
    for block in list_blocks(corpus_dir(str(root))):
        hashes = doc_hashes(read_block(block, 200).column("doc_id"))
        scored += int((DocumentSplit(0.1, 0.2).masks(hashes=hashes)[1] & sample_mask(hashes, sample)).sum())
    assert result.validation["n_docs"] == scored == attrs[0]["validation"]["n_docs"]
    assert attrs[0]["training"]["n_docs"] > 1000 * 0.75  # the unscored validation documents trained
    # the validation documents check each refine against its start too: no held-out document is scored
    assert all(a["params"]["start_check"] == "validation" and a["heldout"]["sampled_fold_in"]["n_tokens"] == 0
               for a in attrs)
    # each K's perplexity is the exact fold-in's (evaluate's reference scorer, as refine's choices are made by the
    # exact fold-in), recomputed here from the stored model on that sample, to 1e-10
    from jsmf_dask.kernels.heldout import document_completion, split_tokens
    from jsmf_dask.pipeline.evaluate import document_prior
    from jsmf_dask.stages.infer import block_counts

    for row in result.rows:
        m = open_model(str(root), row["model"])
        loglik = tokens = 0.0
        for block in list_blocks(corpus_dir(str(root))):
            table = read_block(block, 200)
            hashes = doc_hashes(table.column("doc_id"))
            chosen = DocumentSplit(0.1, 0.2).masks(hashes=hashes)[1] & sample_mask(hashes, sample)
            observed, held = split_tokens(block_counts(table, 200)[chosen], hashes[chosen])
            ll, n, _ = document_completion(observed, held, m.arrays["B"], document_prior(m)[0], fold_in="sampled",
                                           hashes=hashes[chosen])
            loglik, tokens = loglik + ll.sum(), tokens + n.sum()
        assert row["perplexity"] == pytest.approx(np.exp(-loglik / tokens), rel=1e-10)
