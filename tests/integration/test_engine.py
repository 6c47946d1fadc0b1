"""The engine chosen by the work's size, and ``jsmf topics`` (the one-command route) against the four commands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from jsmf_dask import cluster, evaluate, open_cooccurrence, open_model
from jsmf_dask.cli import main
from jsmf_dask.parameters import refined_fit_iterations
from tests.conftest import REUTERS_DOCWORD


@pytest.fixture
def local_clusters(monkeypatch):
    """Every LocalCluster started from here on (its worker count), recorded where it is constructed."""
    import distributed

    started: list[int] = []
    real = distributed.LocalCluster

    def recording(*args, **kwargs):
        started.append(kwargs.get("n_workers"))
        return real(*args, **kwargs)

    monkeypatch.setattr(distributed, "LocalCluster", recording)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    return started


def _B(root, name: str) -> np.ndarray:
    return open_model(str(root), name).arrays["B"]


def test_topics_and_fit_take_the_same_anchor_vocabulary(tmp_path):
    """`jsmf topics --anchor-words n --start both` writes what `jsmf fit --anchor-words n` and `jsmf refine --start
    both` write."""
    four, one = str(tmp_path / "four"), str(tmp_path / "one")
    for argv in (["ingest", four, str(REUTERS_DOCWORD), "--vocab-size", "500"],
                 ["cooccur", four, "--validation", "0.05"],
                 ["fit", four, "--topics", "3", "--iterations", "20", "--anchor-words", "100"],
                 ["refine", four, "--model", "k3-ap", "--start", "both"],
                 ["topics", str(REUTERS_DOCWORD), "--topics", "3", "--out", one, "--vocab-size", "500",
                  "--anchor-words", "100", "--start", "both"]):
        assert main([*argv, "--scheduler", "threads", "--quiet"]) == 0, argv
    for name in ("k3-ap", "k3-ap-refined"):
        np.testing.assert_allclose(_B(one, name), _B(four, name), rtol=0, atol=1e-10)
    assert open_model(one, "k3-ap").attrs["anchor_words"]["n"] == 100
    refined = open_model(one, "k3-ap-refined").attrs
    assert refined["params"]["start"] == "both" and {c["start"] for c in refined["candidates"]} == {"spectral", "chain"}


@pytest.mark.slow
def test_small_work_runs_on_threads_large_work_on_the_local_cluster_same_model(tmp_path, capsys, monkeypatch,
                                                                             local_clusters):
    root = str(tmp_path / "run")
    assert main(["ingest", root, str(REUTERS_DOCWORD), "--vocab-size", "400"]) == 0
    assert main(["cooccur", root]) == 0
    assert main(["fit", root, "--topics", "5", "--iterations", "10"]) == 0
    err = capsys.readouterr().err
    assert "engine: threads in this process (" in err and "MB of input, at most 200 MB" in err  # ingest
    assert "M tokens, at most 20M" in err  # cooccur and fit
    assert local_clusters == []  # no worker process was spawned

    monkeypatch.setattr(cluster, "THREADS_MAX_TOKENS", 1000)  # the corpus is now "large"
    assert main(["fit", root, "--topics", "5", "--iterations", "10", "--name", "big"]) == 0
    err = capsys.readouterr().err
    assert "engine: LocalCluster of" in err and "M tokens, over 0.001M" in err
    assert len(local_clusters) == 1
    np.testing.assert_allclose(_B(root, "big"), _B(root, "k5-ap"), rtol=0, atol=1e-10)

    # --scheduler overrides the size, either way
    assert main(["fit", root, "--topics", "5", "--iterations", "10", "--name", "forced", "--scheduler", "threads"]) == 0
    assert "engine:" not in capsys.readouterr().err and len(local_clusters) == 1
    monkeypatch.setattr(cluster, "THREADS_MAX_TOKENS", 10**12)
    assert main(["fit", root, "--topics", "5", "--iterations", "10", "--name", "local", "--scheduler", "local",
                 "--quiet"]) == 0
    assert len(local_clusters) == 2
    for name in ("forced", "local"):
        np.testing.assert_allclose(_B(root, name), _B(root, "k5-ap"), rtol=0, atol=1e-10)


def test_python_api_follows_the_same_rule(tmp_path, local_clusters):
    """``connect()`` without an address: threads for small work (the choice's line through ``on_engine``)."""
    from jsmf_dask import ingest

    lines: list[str] = []
    with cluster.connect(dashboard=False, on_engine=lines.append):
        ingest(tmp_path / "run", [str(REUTERS_DOCWORD)], vocab_size=300)
    assert len(lines) == 1 and lines[0].startswith("engine: threads in this process") and local_clusters == []


def test_work_small_uses_both_limits(monkeypatch):
    assert cluster.Work(tokens=cluster.THREADS_MAX_TOKENS).small()
    assert not cluster.Work(tokens=cluster.THREADS_MAX_TOKENS + 1).small()
    assert cluster.Work(input_bytes=cluster.THREADS_MAX_INPUT_BYTES).small()
    assert not cluster.Work(input_bytes=cluster.THREADS_MAX_INPUT_BYTES + 1).small()
    # outside an automatic connect() the choice is not ours to make
    assert cluster.choose_engine(cluster.Work(tokens=1)) is None


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::jsmf_dask.exceptions.ConvergenceWarning")  # 395 documents, 5 topics
def test_topics_writes_what_the_four_commands_write_and_resumes_after_a_kill(tmp_path, capsys):
    four = str(tmp_path / "four")
    for argv in (["ingest", four, str(REUTERS_DOCWORD), "--vocab-size", "500"],
                 ["cooccur", four, "--validation", "0.05"],
                 ["fit", four, "--topics", "5", "--iterations", str(refined_fit_iterations(5))],
                 ["refine", four, "--model", "k5-ap"]):
        assert main([*argv, "--scheduler", "threads", "--quiet"]) == 0, argv

    one = str(tmp_path / "one")
    cmd = [sys.executable, "-m", "jsmf_dask.cli", "topics", str(REUTERS_DOCWORD), "--topics", "5", "--out", one,
           "--vocab-size", "500"]
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in proc.stderr:  # killed as refine starts: ingest, cooccur and fit are committed
            if line.startswith("[refine-k5-ap-refined] running"):
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.wait(timeout=300)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "one" / "model.zarr" / "k5-ap-refined").exists()

    capsys.readouterr()
    assert main(["topics", str(REUTERS_DOCWORD), "--topics", "5", "--out", one, "--vocab-size", "500"]) == 0
    captured = capsys.readouterr()
    for stage in ("ingest", "cooccur", "fit-k5-ap"):
        assert f"[{stage}] up to date, skipped" in captured.err
    assert "[refine-k5-ap-refined] ran in" in captured.err
    assert "3 up to date" in captured.out and captured.out.count("\n") > 5  # the topics, then the summary
    for name in ("k5-ap", "k5-ap-refined"):
        np.testing.assert_allclose(_B(one, name), _B(four, name), rtol=0, atol=1e-10)
    # topics counts C without D2 (nothing on its route reads it); evaluate's coherence is the same without it
    assert "D2" not in open_cooccurrence(f"{one}/cooc.zarr").group
    assert "D2" in open_cooccurrence(f"{four}/cooc.zarr").group
    coherence = [evaluate(r, models=["k5-ap-refined"])["models"]["k5-ap-refined"]["original_C"]["coherence"]
                 for r in (one, four)]
    assert coherence[0] == pytest.approx(coherence[1], rel=1e-12)


@pytest.mark.slow
def test_a_run_on_threads_never_imports_distributed(tmp_path):
    """Work small enough for threads pays nothing for the cluster it does not start: distributed (0.2 s of
    imports) stays unimported through ingest, cooccur, fit and refine in one process; its loggers' levels are set
    for when a command does import it (the quiet ones below)."""
    root = tmp_path / "run"
    code = (
        "import json, logging, sys\n"
        "from jsmf_dask.cli import main\n"
        f"status = main(['topics', {str(REUTERS_DOCWORD)!r}, '--topics', '5', '--vocab-size', '400', "
        f"'--out', {str(root)!r}, '--quiet'])\n"
        "loaded = 'distributed' in sys.modules\n"
        "import distributed\n"
        "print(json.dumps({'status': status, 'loaded': loaded,\n"
        "                  'client': logging.getLogger('distributed.client').level}))\n"
    )
    env = dict(os.environ)
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    import json

    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"status": 0, "loaded": False, "client": 50}, out.stderr


def test_topics_says_nothing_of_a_vocabulary_size_nobody_asked_for(tmp_path, capsys):
    """`jsmf topics` keeps at most 5,000 words by default: a corpus with fewer keeps them all without a warning
    (Reuters has 4,111 eligible words); an explicit --vocab-size above that still gets one."""
    import warnings

    from jsmf_dask.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=Warning)  # the fit's and refine's own, on 395 documents
        warnings.filterwarnings("always", r"vocab_size=\d+ exceeds", UserWarning)
        assert main(["topics", str(REUTERS_DOCWORD), "--topics", "3", "--out", str(tmp_path / "a"),
                     "--iterations", "5", "--quiet"]) == 0
        assert "exceeds" not in capsys.readouterr().err
        assert main(["topics", str(REUTERS_DOCWORD), "--topics", "3", "--out", str(tmp_path / "b"),
                     "--iterations", "5", "--vocab-size", "5000", "--quiet"]) == 0
        assert "--vocab-size 5000 exceeds the" in capsys.readouterr().err
