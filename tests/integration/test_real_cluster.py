"""A real cluster: `dask scheduler` and two `dask worker` processes on loopback, started and stopped here.

The pipeline runs through `--scheduler` and must give the LocalCluster's result; a worker killed
mid-`cooccur` or mid-fit must not change it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from jsmf_dask import cooccur, fit, open_cooccurrence, refine, synth
from jsmf_dask.cli import main
from jsmf_dask.cluster import connect, registered_workers

BIN = Path(sys.executable).parent


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def _start_scheduler(tmp_path: Path, procs: list) -> str:
    """Start `dask scheduler` on loopback (appended to ``procs``); its address."""
    sched_file = tmp_path / "scheduler.json"
    procs.append(subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                   "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sched_file)],
                                  env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    _wait_for(sched_file.exists, 60, "the scheduler file")
    _wait_for(lambda: "address" in sched_file.read_text(), 10, "the scheduler address")
    return json.loads(sched_file.read_text())["address"]


def _start_worker(address: str, name: str, cwd: Path | None = None) -> subprocess.Popen:
    # --no-nanny: the worker is the process we start, so killing it kills the worker for good
    return subprocess.Popen(
        [str(BIN / "dask"), "worker", address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
         "--no-dashboard", "--name", name, "--memory-limit", "4GiB"],
        env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)


def _stop(procs: list) -> None:
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    # a worker still running a task (a test's last computation) closes only when the task ends: these are our
    # own processes, and a test's outputs are checked before its teardown, so 3 s of grace is enough
    deadline = time.monotonic() + 3
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@pytest.fixture
def real_cluster(tmp_path):
    """(address, {worker pid: address}) of a scheduler and two single-threaded workers on 127.0.0.1."""
    procs: list = []
    try:
        address = _start_scheduler(tmp_path, procs)
        procs.extend(_start_worker(address, f"w{i}") for i in range(2))
        from distributed import Client

        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
            pids = client.run(os.getpid)
        yield address, {pid: addr for addr, pid in pids.items()}
    finally:
        _stop(procs)


@pytest.fixture
def bare_scheduler(tmp_path):
    """(address, start a worker, stop every worker and wait until the scheduler has none): no worker at first."""
    procs: list = []
    workers: list = []
    from distributed import Client

    def start_worker() -> None:
        workers.append(_start_worker(address, f"late{len(workers)}"))

    def stop_workers() -> None:
        _stop(workers)
        with Client(address, timeout=30) as client:
            _wait_for(lambda: not registered_workers(client), 30, "the workers to leave")

    try:
        address = _start_scheduler(tmp_path, procs)
        yield address, start_worker, stop_workers
    finally:
        _stop(workers)
        _stop(procs)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The reference: a corpus, C and a model built on the embedded LocalCluster (2 worker processes)."""
    root = tmp_path_factory.mktemp("corpus")
    synth(root, n_docs=20000, n_words=600, n_topics=6, doc_length=60, seed=2, row_group_size=500)
    with connect(n_workers=2, dashboard=False):
        cooccur(root, tile_size=100)
        fit(root, n_topics=6, iterations=30, min_anchor_df=0)
        refine(root, model="k6-ap", sweeps=4)
        refine(root, model="k6-ap", sweeps=4, drawn_sweeps=2, name="k6-ap-drawn")
        refine(root, model="k6-ap", sweeps=3, method="sampled", name="k6-ap-sampled")
        refine(root, model="k6-ap", sweeps=3, method="sampled", start="chain", name="k6-ap-chain")
    return root


def _copy_corpus(src: Path, dst: Path) -> str:
    import shutil

    shutil.copytree(src / "corpus", dst / "corpus")
    return str(dst)


@pytest.mark.slow
def test_cli_through_scheduler_equals_local_cluster(real_cluster, corpus, tmp_path):
    address, _ = real_cluster
    root = _copy_corpus(corpus, tmp_path)
    assert main(["cooccur", root, "--tile-size", "100", "--scheduler", address, "--quiet"]) == 0
    assert main(["fit", root, "--topics", "6", "--iterations", "30", "--min-anchor-df", "0",
                 "--scheduler", address, "--quiet"]) == 0
    ref, got = open_cooccurrence(f"{corpus}/cooc.zarr"), open_cooccurrence(f"{root}/cooc.zarr")
    np.testing.assert_allclose(got.C[:], ref.C[:], rtol=1e-13, atol=0)
    np.testing.assert_array_equal(got.D2[:], ref.D2[:])
    from jsmf_dask import open_model

    a, b = open_model(root, "k6-ap"), open_model(str(corpus), "k6-ap")
    np.testing.assert_array_equal(a.arrays["anchors"], b.arrays["anchors"])
    np.testing.assert_allclose(a.arrays["B"], b.arrays["B"], rtol=0, atol=1e-10)


def _kill_a_worker_when_busy(address: str, pids: dict, prefix: str, done: threading.Event, killed: list) -> None:
    from distributed import Client

    with Client(address, timeout=30) as client:
        while not done.is_set():
            processing = client.processing()
            busy = [w for w, keys in processing.items() if any(prefix in str(k) for k in keys)]
            if busy:
                pid = next(p for p, a in pids.items() if a == busy[0])
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["cooccur", "fit"])
def test_a_worker_killed_mid_stage_changes_nothing(real_cluster, corpus, tmp_path, stage):
    address, pids = real_cluster
    root = _copy_corpus(corpus, tmp_path)
    if stage == "fit":
        import dask

        with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
            cooccur(root, tile_size=100)
    done, killed = threading.Event(), []
    prefix = "cooc-tile-" if stage == "cooccur" else "rectify-in-task-"
    watcher = threading.Thread(target=_kill_a_worker_when_busy, args=(address, pids, prefix, done, killed))
    with connect(address):
        watcher.start()
        try:
            if stage == "cooccur":
                cooccur(root, tile_size=100)
            else:
                fit(root, n_topics=6, iterations=30, min_anchor_df=0)
        finally:
            done.set()
            watcher.join()
    assert killed, f"no worker was busy with {prefix!r} tasks to kill"
    ref = open_cooccurrence(f"{corpus}/cooc.zarr")
    np.testing.assert_allclose(open_cooccurrence(f"{root}/cooc.zarr").C[:], ref.C[:], rtol=1e-13, atol=0)
    if stage == "fit":
        from jsmf_dask import open_model

        a, b = open_model(root, "k6-ap"), open_model(str(corpus), "k6-ap")
        np.testing.assert_array_equal(a.arrays["anchors"], b.arrays["anchors"])
        np.testing.assert_allclose(a.arrays["B"], b.arrays["B"], rtol=0, atol=1e-10)


@pytest.mark.slow
def test_concurrent_fits_on_one_scheduler_get_their_own_results(real_cluster, corpus, tmp_path):
    """Task keys carry a token of their inputs: two drivers' fits never share a task."""
    import shutil

    from jsmf_dask import open_model

    address, _ = real_cluster
    roots = {}
    for k in (5, 6):
        roots[k] = tmp_path / f"k{k}"
        shutil.copytree(corpus / "corpus", roots[k] / "corpus")
        shutil.copytree(corpus / "cooc.zarr", roots[k] / "cooc.zarr")
    errors = []

    def fit_in(k):
        try:
            fit(roots[k], n_topics=k, iterations=30, min_anchor_df=0, name="m")
        except Exception as err:  # reported below
            errors.append(err)

    with connect(address):
        threads = [threading.Thread(target=fit_in, args=(k,)) for k in (5, 6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    assert open_model(str(roots[5]), "m").arrays["B"].shape[1] == 5
    got, ref = open_model(str(roots[6]), "m"), open_model(str(corpus), "k6-ap")
    np.testing.assert_array_equal(got.arrays["anchors"], ref.arrays["anchors"])
    np.testing.assert_allclose(got.arrays["B"], ref.arrays["B"], rtol=0, atol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "how", "busy_with"), [
    # two sweeps of drawn counts, then two soft ones: a rerun task draws what the killed one drew
    ("k6-ap-drawn", {"sweeps": 4, "drawn_sweeps": 2}, "refine-sweep"),
    # every sweep draws each document's topics, seeded by its id and the sweep
    ("k6-ap-sampled", {"sweeps": 3, "method": "sampled"}, "refine-sweep"),
    # the chain start: its one task (a collapsed Gibbs chain on a sample of the documents) killed and rerun
    ("k6-ap-chain", {"sweeps": 3, "method": "sampled", "start": "chain"}, "chain-run-"),
])
def test_a_worker_killed_mid_refine_sweep_changes_nothing(real_cluster, corpus, tmp_path, name, how, busy_with):
    import shutil

    from jsmf_dask import open_model

    address, pids = real_cluster
    root = _copy_corpus(corpus, tmp_path)
    shutil.copytree(corpus / "model.zarr" / "k6-ap", tmp_path / "model.zarr" / "k6-ap")
    done, killed = threading.Event(), []
    watcher = threading.Thread(target=_kill_a_worker_when_busy, args=(address, pids, busy_with, done, killed))
    with connect(address):
        watcher.start()
        try:
            refine(root, model="k6-ap", name=name, **how)
        finally:
            done.set()
            watcher.join()
    assert killed, f"no worker was busy with a {busy_with!r} task to kill"
    a, b = open_model(root, name), open_model(str(corpus), name)
    np.testing.assert_allclose(a.group["lambda"][...], b.group["lambda"][...], rtol=1e-10, atol=0)
    np.testing.assert_allclose(a.arrays["A"], b.arrays["A"], rtol=0, atol=1e-10)
    assert not (tmp_path / "model.zarr" / name / "_scratch").exists()


@pytest.mark.slow
def test_driver_killed_mid_run_on_the_cluster_resumes_and_matches(real_cluster, corpus, tmp_path):
    from jsmf_dask import open_model
    from jsmf_dask.pipeline.run import run

    address, _ = real_cluster
    _copy_corpus(corpus, tmp_path)
    config = tmp_path / "run.toml"
    config.write_text(f'root = "{tmp_path}"\nscheduler = "{address}"\n[cooccur]\ntile_size = 100\n'
                      "[[fit]]\ntopics = 6\niterations = 30\nmin_anchor_df = 0\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]))
    driver = subprocess.Popen([sys.executable, "-m", "jsmf_dask.cli", "run", str(config), "--quiet"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    models = tmp_path / "model.zarr"
    try:
        _wait_for(lambda: list(models.glob(".k6-ap.tmp-*")) or driver.poll() is not None, 120,
                  "the fit to start staging its model")
        assert driver.poll() is None, "the run ended before it could be killed"
        os.kill(driver.pid, signal.SIGKILL)  # mid-fit: the cluster keeps running
    finally:
        driver.wait(timeout=30)
    # it was interrupted mid-fit: C committed, the model not
    assert (tmp_path / "_run" / "cooccur.json").exists()
    assert not (models / "k6-ap").exists() and list(models.glob(".k6-ap.tmp-*"))
    with connect(address):
        outcomes = {o.stage: o.status for o in run(config)}
    assert outcomes["cooccur"] == "skipped"
    a, b = open_model(str(tmp_path), "k6-ap"), open_model(str(corpus), "k6-ap")
    np.testing.assert_array_equal(a.arrays["anchors"], b.arrays["anchors"])
    np.testing.assert_allclose(a.arrays["B"], b.arrays["B"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(open_cooccurrence(f"{tmp_path}/cooc.zarr").C[:],
                               open_cooccurrence(f"{corpus}/cooc.zarr").C[:], rtol=1e-13, atol=0)


@pytest.mark.slow
def test_stages_wait_for_a_worker_that_arrives_late(bare_scheduler, corpus, tmp_path, capsys):
    """fit, refine, evaluate and a resumed `jsmf run` started with no worker registered: each waits (and says so)
    for one that arrives 2.5 s later, and gives the embedded cluster's results."""
    import shutil

    from jsmf_dask import open_model

    address, start_worker, stop_workers = bare_scheduler
    root = _copy_corpus(corpus, tmp_path / "root")
    shutil.copytree(corpus / "cooc.zarr", Path(root) / "cooc.zarr")
    commands = [["fit", root, "--topics", "6", "--iterations", "30", "--min-anchor-df", "0"],
                ["refine", root, "--model", "k6-ap", "--sweeps", "4"],
                ["evaluate", root]]
    # a run whose ingest and cooccur are committed (on threads, here) resumes at its fit
    from tests.conftest import REUTERS_DOCWORD, REUTERS_VOCAB

    shutil.copy(REUTERS_DOCWORD, tmp_path)
    shutil.copy(REUTERS_VOCAB, tmp_path)
    head = (f'[ingest]\ninputs = ["{tmp_path / REUTERS_DOCWORD.name}"]\nvocab_size = 400\n'
            '[cooccur]\ntile_size = 128\n')
    fit_table = "[[fit]]\ntopics = 5\niterations = 20\n"
    config, reference = tmp_path / "run.toml", tmp_path / "reference.toml"
    config.write_text(f'root = "{tmp_path / "run"}"\n' + head)
    reference.write_text(f'root = "{tmp_path / "reference"}"\n' + head + fit_table)
    for path in (config, reference):
        assert main(["run", str(path), "--scheduler", "threads", "--quiet"]) == 0
    config.write_text(config.read_text() + fit_table)
    commands.append(["run", str(config)])
    capsys.readouterr()
    for argv in commands:
        stop_workers()  # none registered when the command starts
        timer = threading.Timer(2.5, start_worker)
        timer.start()
        t0 = time.monotonic()
        try:
            assert main([*argv, "--scheduler", address]) == 0, capsys.readouterr().err
        finally:
            timer.join()
        assert time.monotonic() - t0 >= 2.5
        assert f"waiting for 1 worker(s) to register with {address}" in capsys.readouterr().err
    for name in ("k6-ap", "k6-ap-refined"):
        np.testing.assert_allclose(open_model(root, name).arrays["B"], open_model(str(corpus), name).arrays["B"],
                                   rtol=0, atol=1e-10)
    np.testing.assert_allclose(open_model(str(tmp_path / "run"), "k5-ap").arrays["B"],
                               open_model(str(tmp_path / "reference"), "k5-ap").arrays["B"], rtol=0, atol=1e-10)


def test_no_worker_within_the_timeout_is_one_clear_error(bare_scheduler, tmp_path, capsys):
    address, _, _ = bare_scheduler
    root = tmp_path / "r"
    synth(root, n_docs=200, n_words=100, n_topics=3, doc_length=30, seed=0)
    t0 = time.monotonic()
    assert main(["cooccur", str(root), "--scheduler", address, "--worker-timeout", "2", "--quiet"]) == 1
    assert time.monotonic() - t0 < 30
    err = capsys.readouterr().err
    assert f"only 0 of 1 worker(s) registered with the scheduler at {address} within 2 s" in err
    assert "Traceback" not in err and not (root / "cooc.zarr").exists()


@pytest.mark.slow
def test_scheduler_killed_mid_stage_is_one_error_line_and_a_rerun_resumes(corpus, tmp_path):
    from distributed import Client

    root = _copy_corpus(corpus, tmp_path / "root")
    first: list = []
    try:
        (tmp_path / "first").mkdir()
        address = _start_scheduler(tmp_path / "first", first)
        first.append(_start_worker(address, "w0"))
        with Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
        stage = subprocess.Popen([str(BIN / "jsmf"), "cooccur", root, "--tile-size", "100", "--scheduler", address,
                                  "--quiet"], env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        with Client(address, timeout=30) as client:
            _wait_for(lambda: any(client.processing().values()), 120, "the stage's tasks")
        first[0].send_signal(signal.SIGKILL)  # the scheduler, mid-stage
        first[0].wait()
        rc, err = stage.wait(timeout=120), stage.stderr.read()
        stage.stderr.close()
    finally:
        _stop(first)
    assert rc == 1, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("jsmf: error: lost the Dask scheduler"), err
    assert "rerun the same command to resume" in lines[0]
    assert not (Path(root) / "cooc.zarr").exists()
    second: list = []
    try:  # a new scheduler: the rerun completes and equals the embedded cluster's C
        address = _start_scheduler(tmp_path, second)
        second.append(_start_worker(address, "w1"))
        assert main(["cooccur", root, "--tile-size", "100", "--scheduler", address, "--quiet"]) == 0
    finally:
        _stop(second)
    np.testing.assert_allclose(open_cooccurrence(f"{root}/cooc.zarr").C[:], open_cooccurrence(f"{corpus}/cooc.zarr").C[:],
                               rtol=1e-13, atol=0)


@pytest.mark.slow
def test_a_relative_root_works_on_workers_started_elsewhere(corpus, tmp_path, monkeypatch):
    from jsmf_dask import open_model

    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    _copy_corpus(corpus, here / "runs" / "x")
    procs: list = []
    try:
        address = _start_scheduler(elsewhere, procs)
        procs.append(_start_worker(address, "w0", cwd=elsewhere))
        monkeypatch.chdir(here)
        assert main(["cooccur", "runs/x", "--tile-size", "100", "--scheduler", address, "--quiet"]) == 0
        assert main(["fit", "runs/x", "--topics", "6", "--iterations", "30", "--min-anchor-df", "0",
                     "--scheduler", address, "--quiet"]) == 0
    finally:
        _stop(procs)
    assert not (elsewhere / "runs").exists()
    np.testing.assert_allclose(open_model(str(here / "runs" / "x"), "k6-ap").arrays["B"],
                               open_model(str(corpus), "k6-ap").arrays["B"], rtol=0, atol=1e-10)


@pytest.mark.slow
def test_a_frozen_scheduler_is_given_up_on_within_the_heartbeat_timeout(corpus, tmp_path):
    from distributed import Client

    root = _copy_corpus(corpus, tmp_path / "root")
    procs: list = []
    try:
        address = _start_scheduler(tmp_path, procs)
        procs.append(_start_worker(address, "w0"))
        with Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
        stage = subprocess.Popen([str(BIN / "jsmf"), "cooccur", root, "--tile-size", "100", "--scheduler", address,
                                  "--heartbeat-timeout", "4", "--quiet"],
                                 env=_env() | {"PYTHONFAULTHANDLER": "1"}, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        with Client(address, timeout=30) as client:
            _wait_for(lambda: any(client.processing().values()), 120, "the stage's tasks")
        procs[0].send_signal(signal.SIGSTOP)  # the scheduler freezes mid-stage
        t0 = time.monotonic()
        try:
            _, err = stage.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # its threads' stacks (faulthandler, on SIGABRT) say where it hangs
            stage.send_signal(signal.SIGABRT)
            _, err = stage.communicate(timeout=30)
            pytest.fail(f"the stage outlived its frozen scheduler by 60 s:\n{err}")
        rc, waited = stage.returncode, time.monotonic() - t0
        stage.stderr.close()
    finally:
        if procs:
            procs[0].send_signal(signal.SIGKILL)  # a stopped process still dies of SIGKILL
        _stop(procs)
    assert rc == 1, err
    assert waited < 4 + 1 + 5 + 7  # the timeout, a heartbeat interval, HUNG_AFTER at most (the last resort), exit
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "stopped answering for 4 s" in lines[0] and lines[0].startswith("jsmf: error:"), err
    assert not (Path(root) / "cooc.zarr").exists()


class _SilentScheduler:
    """What :class:`~jsmf_dask._heartbeat.Heartbeat` needs of a client whose scheduler never answers: an event loop
    (in a thread) and a ``scheduler.identity`` that waits for ever."""

    def __init__(self):
        import asyncio
        from types import SimpleNamespace

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.loop = SimpleNamespace(asyncio_loop=self._loop)
        self.scheduler = SimpleNamespace(identity=lambda: asyncio.sleep(3600))

    def close(self):
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@pytest.mark.parametrize("inherited", ["python's handler", "ignored"])
def test_a_process_still_running_after_the_heartbeat_gave_up_is_ended(monkeypatch, inherited):
    """The watchdog's last resort: it interrupts the main thread once the scheduler has not answered for the
    timeout, and when the process is still running HUNG_AFTER seconds later it calls ``on_hung`` with the
    give-up message (the executable then says it, unless it has said an error, and exits 1). A process started
    with SIGINT ignored (in the background without job control: ``nohup jsmf … &`` from a script) is interrupted
    too; any other SIGINT stays ignored, and is ignored again once the watchdog stops."""
    import jsmf_dask._heartbeat as heartbeat

    monkeypatch.setattr(heartbeat, "HUNG_AFTER", 0.3)
    client, called, interrupted, seen = _SilentScheduler(), threading.Event(), [], []

    def on_hung(message):
        seen.append((message, time.monotonic()))
        called.set()

    disposition = signal.default_int_handler if inherited == "python's handler" else signal.SIG_IGN
    previous = signal.signal(signal.SIGINT, disposition)
    t0 = time.monotonic()
    try:
        watchdog = heartbeat.Heartbeat(client, 0.4, "the scheduler froze", on_hung)
        try:
            if inherited == "ignored":
                os.kill(os.getpid(), signal.SIGINT)  # not the watchdog's: still ignored
            time.sleep(30)
        except KeyboardInterrupt:  # the watchdog's SIGINT
            interrupted.append(time.monotonic())
        assert called.wait(10)
        watchdog.stop()
        assert signal.getsignal(signal.SIGINT) == disposition
    finally:
        client.close()
        signal.signal(signal.SIGINT, previous)
    assert watchdog.frozen and interrupted
    # the first question goes after 0.1 s, unanswered for 0.4 s: the interrupt; on_hung 0.3 s after it
    assert 0.4 <= interrupted[0] - t0 < 5
    assert seen[0][0] == "the scheduler froze" and seen[0][1] - interrupted[0] >= 0.25


def test_the_executable_ends_a_hung_process_with_status_1_saying_why_once():
    script = ("import sys, threading; from jsmf_dask.cli import _hung_ender; said = threading.Event(); "
              "said.set() if sys.argv[2] == '1' else None; _hung_ender(said)(sys.argv[1])")
    for said, stderr in ((False, "jsmf: error: the scheduler froze\n"), (True, "")):
        done = subprocess.run([sys.executable, "-c", script, "the scheduler froze", str(int(said))],
                              capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stderr) == (1, stderr)


def _start_worker_in_namespace(address: str, name: str, hidden: Path, cwd: Path) -> subprocess.Popen:
    """A worker in its own mount namespace, where ``hidden`` is covered by an empty tmpfs: it sees everything the
    driver sees except what lies under ``hidden`` (as a pod or node sees only the volumes it mounts)."""
    worker = " ".join([str(BIN / "dask"), "worker", address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
                       "--no-dashboard", "--name", name, "--memory-limit", "4GiB"])
    return subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                             f"mount -t tmpfs jsmf-private {hidden} && exec {worker}"],
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)


@pytest.mark.slow
def test_workers_in_their_own_mount_namespace(tmp_path, capsys):
    """Workers see the shared folder only: an input left on the driver's private disk is named, with the worker,
    before any work; with everything shared, `jsmf run` gives the embedded cluster's result bit for bit."""
    import shutil

    from distributed import Client

    from jsmf_dask import open_model
    from tests.conftest import REUTERS_DOCWORD, REUTERS_VOCAB

    if subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs t {tmp_path}"], capture_output=True).returncode:
        pytest.skip("cannot mount in a private mount namespace here")
    shared, private, elsewhere = tmp_path / "shared", tmp_path / "private", tmp_path / "elsewhere"
    for d in (shared, private, elsewhere):
        d.mkdir()
    for src in (REUTERS_DOCWORD, REUTERS_VOCAB):
        shutil.copy(src, private)
        shutil.copy(src, shared)
    body = "[ingest]\nvocab_size = 400\ninputs = [\"{}\"]\n[cooccur]\ntile_size = 128\n[[fit]]\ntopics = 5\niterations = 20\n"
    configs = {}
    for name, where in (("private", private), ("shared", shared), ("embedded", shared)):
        configs[name] = tmp_path / f"{name}.toml"
        configs[name].write_text(f'root = "{shared / ("run-" + name)}"\n' + body.format(where / REUTERS_DOCWORD.name))
    procs: list = []
    try:
        address = _start_scheduler(elsewhere, procs)
        procs.append(_start_worker_in_namespace(address, "pod0", private, elsewhere))
        with Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
            (worker,) = registered_workers(client)
        assert main(["run", str(configs["private"]), "--scheduler", address, "--quiet"]) == 1
        err = capsys.readouterr().err
        assert f"worker {worker} cannot see {private / REUTERS_DOCWORD.name}" in err, err
        assert not (shared / "run-private").exists()
        assert main(["run", str(configs["shared"]), "--scheduler", address, "--quiet"]) == 0
    finally:
        _stop(procs)
    assert main(["run", str(configs["embedded"]), "--workers", "1", "--quiet"]) == 0  # the embedded LocalCluster
    np.testing.assert_array_equal(open_model(str(shared / "run-shared"), "k5-ap").arrays["B"],
                                  open_model(str(shared / "run-embedded"), "k5-ap").arrays["B"])


@pytest.mark.slow
def test_a_fat_task_that_ends_its_worker_is_one_line_with_figures(tmp_path, capsys, monkeypatch):
    """The in-task rectification whose worker dies under it (most often: memory) is one `jsmf: error:` line
    naming the task, what it needs, the worker it killed and that worker's limit, and what to change; nothing of
    the model is written. (The task here ends its worker itself; distributed retries it on no other worker.)"""
    import os

    import dask

    import jsmf_dask.pipeline.fit as fit_module
    from jsmf_dask import cooccur, synth
    from jsmf_dask.cli import main

    root = tmp_path / "r"
    synth(root, n_docs=300, n_words=60, n_topics=3, doc_length=30, seed=1)
    cooccur(root)
    monkeypatch.setattr(fit_module, "rectify_in_task",
                        lambda *a, **k: dask.delayed(os._exit, pure=False)(3))  # ends the worker running it
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        status = main(["fit", str(root), "--topics", "3", "--scheduler", "local", "--workers", "1",
                       "--memory-limit", "1GiB", "--quiet"])
    err = capsys.readouterr().err
    assert status == 1, err
    lines = [line for line in err.strip().splitlines() if line.startswith("jsmf:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("jsmf: error: the in-task rectification (it needs about ")
    assert "ended the worker running it once (the last tcp://127.0.0.1:" in lines[0]
    assert "memory limit 1.00 GiB" in lines[0] and "--rectifier enn" in lines[0]
    assert not (root / "model.zarr" / "k3-ap").exists()



@pytest.mark.slow
def test_the_commands_own_cluster_restarts_a_dead_worker_and_leaves_dasks_config_as_it_was(caplog, monkeypatch):
    """The LocalCluster a command starts on demand: its nannies restart a worker that died (memory, most often)
    with the command's dask config, so the on-demand scheduler in it must pickle — as the 'dask.distributed' its
    workers use (a bound method did not: a worker dying as the command ended was never restarted, and distributed
    raised out of the cluster's close instead of the command's own error). And once the block ends, dask's
    scheduler is what it was before (it was left pointing at the closed cluster, whose next graph would have
    started a new one)."""
    import pickle

    import dask
    from distributed import KilledWorker

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    before = dask.config.get("scheduler", None)
    with connect("local", n_workers=1, dashboard=False, lazy=True):
        assert pickle.loads(pickle.dumps(dask.config.get("scheduler"))) == "dask.distributed"
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}), pytest.raises(KilledWorker):
            dask.delayed(os._exit, pure=False)(3).compute()  # ends its worker; the nanny restarts it as we close
    assert dask.config.get("scheduler", None) == before
    assert "Failed to restart" not in caplog.text and "Failed to start" not in caplog.text, caplog.text
