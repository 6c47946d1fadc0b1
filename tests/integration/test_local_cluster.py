"""The embedded default: a LocalCluster of worker processes, through the API and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys

import shutil

import numpy as np
import pytest

from jsmf_dask import cooccur, ingest, open_cooccurrence
from jsmf_dask.cluster import connect, registered_workers
from tests.conftest import REUTERS_DOCWORD


def _blas_threads() -> list[int]:
    import threadpoolctl

    return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]


@pytest.mark.slow
def test_same_C_with_one_and_two_worker_processes(tmp_path):
    results = {}
    for workers in (1, 2):
        root = tmp_path / f"w{workers}"
        with connect(n_workers=workers, dashboard=False) as client:
            assert len(registered_workers(client)) == workers
            # BLAS is limited to one thread inside every worker process.
            assert all(all(n == 1 for n in t) for t in client.run(_blas_threads).values())
            ingest(root, [str(REUTERS_DOCWORD)], vocab_size=1200, row_group_size=50)
            cooccur(root, tile_size=400)
        results[workers] = open_cooccurrence(f"{root}/cooc.zarr")
    C1, C2 = results[1].C[:], results[2].C[:]
    np.testing.assert_allclose(C2, C1, rtol=1e-14, atol=0)
    np.testing.assert_array_equal(results[1].D2[:], results[2].D2[:])


@pytest.mark.slow
def test_cli_on_the_embedded_local_cluster(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    cmd = [sys.executable, "-m", "jsmf_dask.cli"]
    root = str(tmp_path / "run")
    out = subprocess.run(
        cmd + ["ingest", root, str(REUTERS_DOCWORD), "--vocab-size", "800", "--workers", "2"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "= 800 words kept" in out.stdout and "= 395 documents kept" in out.stdout
    assert "dask dashboard: http://127.0.0.1:" in out.stderr
    out = subprocess.run(cmd + ["cooccur", root, "--workers", "2", "--quiet"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "C: 800 x 800 from 395 documents" in out.stdout
    store = open_cooccurrence(f"{root}/cooc.zarr")
    assert abs(store.C[:].sum() - 1) < 1e-12


@pytest.mark.slow
def test_identical_outputs_with_1_2_and_4_workers_and_any_chunking(tmp_path, monkeypatch):
    """Determinism: C, the fitted and the refined models agree to 1e-10 across worker counts, tile and row-group
    sizes, and so does the default refine's choice between CVB0 and the sampled method from either start."""
    import jsmf_dask.pipeline.refine_candidates as candidates_module
    from jsmf_dask import fit, open_model, refine
    from jsmf_dask.io.parquet import read_parquet_dir

    results = []
    for workers, tile, rows in ((1, 400, 50), (2, 256, 100), (4, 1200, 395)):
        root = tmp_path / f"w{workers}"
        with connect(n_workers=workers, dashboard=False, memory_limit="2GiB"):
            ingest(root, [str(REUTERS_DOCWORD)], vocab_size=1200, row_group_size=rows)
            cooccur(root, tile_size=tile, heldout=0.2, validation=0.1)
            fit(root, n_topics=8, iterations=40)
            # refine from the very same spectral model (the fits agree only to 1e-10, which sweeps amplify)
            shutil.copytree(tmp_path / "w1" / "model.zarr" / "k8-ap", root / "model.zarr" / "source")
            refine(root, model="source", sweeps=3, name="refined", alpha="auto", eta="auto")
            # counts drawn in the first two sweeps: seeded by document id and sweep, not by worker or row group
            refine(root, model="source", sweeps=4, drawn_sweeps=2, name="drawn", refit="never")
            # every sweep draws each document's topics (seeded the same way), with α learned from the draws
            refine(root, model="source", sweeps=3, method="sampled", name="sampled")
            # the default method with Reuters inside its band of short documents: CVB0 and sampled side by side,
            # and sampled from a collapsed Gibbs chain's topics (a sample of the documents by id, in hash order)
            with monkeypatch.context() as band:
                band.setattr(candidates_module, "SAMPLED_MIN_TOKENS", 1)
                band.setattr(candidates_module, "SAMPLED_MAX_MEAN_TOKENS", 10**6)
                auto = refine(root, model="source", sweeps=3, name="auto", refit="never")
            assert [(c["method"], c["start"]) for c in auto.attrs["candidates"]] == [
                ("cvb0", "spectral"), ("sampled", "spectral"), ("sampled", "chain")]
        theta = read_parquet_dir(str(root / "model.zarr" / "refined" / "doc_topics"))
        results.append((open_cooccurrence(f"{root}/cooc.zarr").C[:], open_model(str(root), "k8-ap"),
                        open_model(str(root), "refined"), theta, open_model(str(root), "drawn"),
                        open_model(str(root), "sampled"), open_model(str(root), "auto")))
    C0, m0, r0, t0, d0, s0, a0 = results[0]
    attrs = open_cooccurrence(f"{tmp_path}/w1/cooc.zarr").attrs
    # the refit (refit='auto', 300-odd documents) trained on the validation documents too: every document but the
    # held-out ones has its weights, and the refit's sweeps are in every comparison below
    assert len(t0) == 395 - attrs["n_docs_heldout"] and attrs["n_docs_validation"] > 0
    assert r0.attrs["refit"]["sweeps"] == 3
    for C, m, r, t, d, sampled, auto in results[1:]:
        np.testing.assert_allclose(d.group["lambda"][...], d0.group["lambda"][...], rtol=1e-10, atol=0)
        assert (auto.attrs["method"], auto.attrs["start"]) == (a0.attrs["method"], a0.attrs["start"])  # the same
        # choice, from the same scores (the chain's run's too)
        np.testing.assert_allclose([c["validation_perplexity"] for c in auto.attrs["candidates"]],
                                   [c["validation_perplexity"] for c in a0.attrs["candidates"]], rtol=1e-10, atol=0)
        np.testing.assert_allclose(auto.group["lambda"][...], a0.group["lambda"][...], rtol=1e-10, atol=0)
        np.testing.assert_allclose(sampled.group["lambda"][...], s0.group["lambda"][...], rtol=1e-10, atol=0)
        np.testing.assert_allclose(sampled.arrays["alpha"], s0.arrays["alpha"], rtol=1e-10, atol=0)
        np.testing.assert_allclose(r.group["lambda"][...], r0.group["lambda"][...], rtol=1e-10, atol=0)
        np.testing.assert_allclose(r.arrays["A"], r0.arrays["A"], rtol=0, atol=1e-10)
        np.testing.assert_allclose(r.trace["bound_per_word"], r0.trace["bound_per_word"], rtol=1e-12)
        assert t.column("doc_id").to_pylist() == t0.column("doc_id").to_pylist()
        np.testing.assert_allclose(np.array(t.column("topics").to_pylist()), np.array(t0.column("topics").to_pylist()),
                                   rtol=0, atol=1e-10)
        np.testing.assert_allclose(C, C0, rtol=0, atol=1e-10 * np.abs(C0).max())
        np.testing.assert_array_equal(m.arrays["anchors"], m0.arrays["anchors"])
        np.testing.assert_allclose(m.arrays["B"], m0.arrays["B"], rtol=0, atol=1e-10)
        np.testing.assert_allclose(m.arrays["A"], m0.arrays["A"], rtol=0, atol=1e-10)


def test_registered_workers_are_the_schedulers_own_answer_every_time():
    """The client's periodic refresh rewrites ``Client.scheduler_info``'s cache without workers (distributed 2026.8:
    about 2% of calls read no worker with a 5 ms refresh); a fit once planned on such a read and failed with
    "no worker is registered". Refreshed every 5 ms, 1,000 reads of the one worker must all find it."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.client.scheduler-info-interval": "5ms"}):
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.wait_for_workers(1, timeout=30)
            counts = [len(registered_workers(client)) for _ in range(1000)]
    assert set(counts) == {1}


def test_registered_workers_retries_a_failed_query_then_names_the_scheduler(monkeypatch):
    """A connection error is asked again (twice, after 0.5 s and 1 s); a third is a ClusterError naming the
    scheduler, never an empty list of workers."""
    import time

    from jsmf_dask.exceptions import ClusterError
    from tests.conftest import FakeClient

    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    workers = {"tcp://127.0.0.1:2": {"nthreads": 1, "memory_limit": 2**30}}
    assert registered_workers(FakeClient(workers, failures=2)) == workers
    with pytest.raises(ClusterError, match=r"the scheduler at tcp://127\.0\.0\.1:1 did not answer which workers it "
                                           r"has \(3 attempts; the last: connection reset by peer\)"):
        registered_workers(FakeClient(workers, failures=3))


def _drops_compute_failed() -> bool:
    import logging

    from jsmf_dask._worker_plugins import _DropReportedElsewhere

    return any(isinstance(f, _DropReportedElsewhere) for f in logging.getLogger("distributed.worker").filters)


def test_worker_filter_drops_only_what_is_reported_elsewhere():
    """The task failure dump and a heartbeat lost at shutdown go; any other worker error stays."""
    import logging

    from jsmf_dask._worker_plugins import _DropReportedElsewhere

    def record(msg: str, level: int = logging.ERROR) -> logging.LogRecord:
        return logging.LogRecord("distributed.worker", level, __file__, 1, msg, None, None)

    keep = _DropReportedElsewhere().filter
    assert not keep(record("Compute Failed\nKey: fit-abc\nState: executing"))
    assert not keep(record("Failed to communicate with scheduler during heartbeat."))
    assert keep(record("Unexpected exception during heartbeat. Closing worker."))
    assert keep(record("Worker is at 95% memory usage.", logging.WARNING))


@pytest.mark.slow
def test_workers_restarted_by_their_nanny_stay_quiet_about_failed_tasks():
    """The "Compute Failed" filter is a worker plugin: a worker restarted later installs it too."""
    import logging

    import distributed  # noqa: F401 - importing it sets its loggers; the CLI imports it, then sets its level

    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.WARNING)  # what the CLI sets without -v
    try:
        with connect(n_workers=1, dashboard=False) as client:
            assert all(client.run(_drops_compute_failed).values())
            client.restart()
            assert len(registered_workers(client)) == 1
            assert all(client.run(_drops_compute_failed).values())
    finally:
        logger.setLevel(level)


@pytest.mark.slow
def test_cli_prints_only_its_own_lines(tmp_path):
    """No distributed logging, no worker tracebacks, no shutdown noise: on success and on an error inside a task.

    Progress bars go to stderr: stdout holds the command's results only (``jsmf fit ... > topics.txt``)."""
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    cmd = [sys.executable, "-m", "jsmf_dask.cli"]
    root = str(tmp_path / "run")
    ok = subprocess.run(cmd + ["ingest", root, str(REUTERS_DOCWORD), "--workers", "2"], capture_output=True,
                        text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert " INFO " not in ok.stderr and "Traceback" not in ok.stderr and "WARNING" not in ok.stderr
    assert "Completed" not in ok.stdout and "% Completed" in ok.stderr  # dask's bar, on stderr
    quiet = subprocess.run(cmd + ["cooccur", root, "--workers", "2", "--quiet"], capture_output=True, text=True,
                           env=env, timeout=300)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr  # --quiet: results only
    fitted = subprocess.run(cmd + ["fit", root, "--topics", "5", "--iterations", "20", "--workers", "2"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert fitted.returncode == 0, fitted.stderr
    assert " INFO " not in fitted.stderr and "Traceback" not in fitted.stderr
    assert "Completed" not in fitted.stdout and "cycle" not in fitted.stdout
    assert "fit: AP cycle 20/20" in fitted.stderr  # progress per cycle from inside the worker's task
    # malformed input found inside a task (pass 1 reads the docword file in a worker)
    bad = tmp_path / "docword.bad.txt"
    lines = REUTERS_DOCWORD.read_bytes()
    import gzip

    text = gzip.decompress(lines).decode().splitlines()
    bad.write_text("\n".join(text[:50] + ["7 x 1"] + text[50:]) + "\n")
    (tmp_path / "vocab.bad.txt").write_bytes((REUTERS_DOCWORD.parent / "vocab.reuters395.txt").read_bytes())
    failed = subprocess.run(cmd + ["ingest", str(tmp_path / "bad-run"), str(bad), "--workers", "2"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert failed.returncode == 1
    errors = [x for x in failed.stderr.splitlines() if x.startswith("jsmf: error:")]
    assert errors == [f"jsmf: error: {bad}: line 51: field word is 'x'; expected an integer"], failed.stderr
    assert "Traceback" not in failed.stderr and "Compute Failed" not in failed.stderr and " INFO " not in failed.stderr
    assert not (tmp_path / "bad-run").exists()


@pytest.mark.slow
def test_stages_that_carry_a_models_topics_in_their_graphs_say_nothing_of_it(tmp_path):
    """evaluate, infer and transform send a model's topics (N × K) inside their graphs on purpose, as refine does:
    distributed's "Sending large graph … Consider loading the data with Dask directly" is advice a user cannot
    follow (at N = 15,000 and K = 100 every such graph is 12 MB or more, over its 10 MB threshold). Here the
    threshold is lowered below this model's B (1,200 × 8 float64: 77 kB) and above the graphs' own size."""
    import warnings

    import dask

    from jsmf_dask import evaluate, fit, infer
    from jsmf_dask.pipeline.transform import transform

    root = tmp_path / "run"
    with connect(n_workers=1, dashboard=False, memory_limit="2GiB"):
        ingest(root, [str(REUTERS_DOCWORD)], vocab_size=1200, row_group_size=100)
        cooccur(root, heldout=0.2)
        fit(root, n_topics=8, iterations=20)
        with dask.config.set({"distributed.admin.large-graph-warning-threshold": "40kB"}), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            evaluate(root, models=["k8-ap"])
            infer(root, model="k8-ap")
            transform(root, [str(REUTERS_DOCWORD)], output=str(tmp_path / "new"), model="k8-ap")
    assert [str(w.message) for w in caught if "large graph" in str(w.message)] == []
