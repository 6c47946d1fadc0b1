"""One writer per output: two commands writing the same output at once — exactly one commits, the other fails clearly."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jsmf_dask import cooccur, open_model, synth
from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.fs import staged_output

BIN = Path(sys.executable).parent


def test_a_commit_never_replaces_an_output_that_appeared_meanwhile(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    final = str(root / "out")
    with pytest.raises(StoreError, match="committed by another writer while this command ran"):
        with staged_output(final, root=str(root)) as tmp:
            Path(tmp, "mine").write_text("mine")
            os.makedirs(final)  # another writer commits first
            Path(final, "theirs").write_text("theirs")
    assert sorted(os.listdir(final)) == ["theirs"]
    assert sorted(os.listdir(root)) == ["out"]  # this writer's temporary is gone
    # with overwrite the later commit replaces it, as asked
    with staged_output(final, root=str(root), overwrite=True) as tmp:
        Path(tmp, "mine").write_text("mine")
    assert sorted(os.listdir(final)) == ["mine"]


def test_a_writer_whose_reads_were_torn_by_another_commit_reports_the_race(tmp_path):
    """A writer that builds on ``out`` (``cooccur --update``) and fails because another writer committed a new
    ``out`` under its reads (an array's metadata read before, its chunks after: "cannot reshape array of size 395
    into shape (250,)", seen once in CI) reports the lost race, not the torn read; a failure of its own while
    ``out`` is unchanged stays what it is."""
    root = tmp_path / "r"
    final = root / "out"
    final.mkdir(parents=True)
    (final / "version").write_text("0")

    def unchanged():
        return (final / "version").read_text() == "0"

    with pytest.raises(StoreError, match="committed by another writer while this command ran") as raised:
        with staged_output(str(final), root=str(root), overwrite=True, unchanged=unchanged) as tmp:
            Path(tmp, "version").write_text("mine")
            (final / "version").write_text("1")  # another writer commits ...
            raise ValueError("cannot reshape array of size 395 into shape (250,)")  # ... under this one's read
    assert isinstance(raised.value.__cause__, ValueError)  # the torn read kept as the cause
    assert (final / "version").read_text() == "1" and sorted(os.listdir(root)) == ["out"]
    with pytest.raises(ValueError, match="its own"):
        with staged_output(str(final), root=str(root), overwrite=True, unchanged=lambda: True):
            raise ValueError("its own")
    assert sorted(os.listdir(root)) == ["out"]


def test_two_replacing_commits_are_serialised_so_neither_loses_the_other(tmp_path):
    """Two writers that each rebuild ``out`` from the version they read (two ``ingest --append``): the second to
    commit must find the first's commit and fail, never swap it away after the first reported success. Writer A is
    held inside its commit (its version check has passed) until writer B has reached its own commit; without the
    commit lock B's check also passes and B's swap discards A's committed output."""
    import threading

    root = tmp_path / "r"
    final = root / "out"
    final.mkdir(parents=True)
    (final / "version").write_text("0")
    b_committing, results = threading.Event(), {}

    def writer(label):
        def unchanged():
            ok = (final / "version").read_text() == "0"
            if label == "a":
                a_committing.set()  # A is inside its commit (holding the lock, its check passed) ...
                b_committing.wait(timeout=10)  # ... and B now at its own
                time.sleep(0.3)
            return ok

        try:
            with staged_output(str(final), root=str(root), overwrite=True, unchanged=unchanged) as tmp:
                Path(tmp, "version").write_text(label)
                if label == "b":  # leave the body (and go to commit) only once A is inside its commit
                    a_committing.wait(timeout=10)
                    b_committing.set()
            results[label] = "committed"
        except StoreError as err:
            results[label] = str(err)

    a_committing = threading.Event()
    threads = [threading.Thread(target=writer, args=(x,)) for x in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results["a"] == "committed", results
    assert "committed by another writer while this command ran" in results["b"], results
    assert (final / "version").read_text() == "a"  # what reported success is what is in place
    assert sorted(os.listdir(root)) == ["out"]  # no temporaries, no moved-aside copy


@pytest.mark.slow
def test_two_concurrent_fits_of_one_name_one_succeeds(tmp_path):
    root = tmp_path / "r"
    synth(root, n_docs=3000, n_words=2000, n_topics=8, doc_length=80, seed=4)
    cooccur(root)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    procs = {k: subprocess.Popen([str(BIN / "jsmf"), "fit", str(root), "--topics", str(k), "--name", "same",
                                  "--iterations", "300", "--scheduler", "threads", "--quiet"],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in (8, 5)}
    outcomes = {k: (p.wait(timeout=300), p.stderr.read()) for k, p in procs.items()}
    for p in procs.values():
        p.stdout.close()
        p.stderr.close()
    winners = [k for k, (rc, _) in outcomes.items() if rc == 0]
    assert len(winners) == 1, outcomes
    (loser,) = set(outcomes) - set(winners)
    rc, err = outcomes[loser]
    # both started before either committed (the fits take seconds): the loser finds the winner's commit at its own
    # (were the machine slow enough to start it after that commit, its start check refuses it instead)
    assert rc == 1 and "--overwrite" in err
    assert "committed by another writer while this command ran" in err or "already exists" in err
    assert "Traceback" not in err
    assert open_model(str(root), "same").arrays["B"].shape[1] == winners[0]
    assert not [p for p in os.listdir(root / "model.zarr") if p.startswith(".")]  # no temporaries left


def test_recovery_removes_only_what_writers_that_are_gone_left(tmp_path):
    """The next writer cleans up after a killed one, never under a live one: a temporary named for a running
    process stays, one named for a finished process (or in the old unnamed form) goes."""
    from jsmf_dask.io.fs import _HOST, recover_interrupted

    host = _HOST
    live = subprocess.Popen(["sleep", "60"])
    dead = subprocess.Popen(["true"])
    dead.wait()
    try:
        for name in (f".out.tmp-aaa.{live.pid}.{host}", f".out.tmp-bbb.{dead.pid}.{host}", ".out.tmp-0123456789ab",
                     f".out.tmp-ccc.{live.pid}.ffffffff",  # a writer of another host, just started
                     f".out.tmp-ddd.{os.getpid()}.{host}"):  # this process's, which no thread of it is writing
            (tmp_path / name).mkdir()
        recover_interrupted(str(tmp_path / "out"))
        assert sorted(os.listdir(tmp_path)) == [f".out.tmp-aaa.{live.pid}.{host}", f".out.tmp-ccc.{live.pid}.ffffffff"]
        # a temporary another thread of this process is writing stays, whatever dashes the output's name holds
        from jsmf_dask.io.fs import _IN_PROGRESS, _writer_token

        token = _writer_token()
        (tmp_path / f".k20-ap.tmp-{token}").mkdir()
        _IN_PROGRESS.add(token)
        try:
            recover_interrupted(str(tmp_path / "k20-ap"))
            assert (tmp_path / f".k20-ap.tmp-{token}").exists()
        finally:
            _IN_PROGRESS.discard(token)
        recover_interrupted(str(tmp_path / "k20-ap"))  # no thread writes it any more: this process's leftover
        assert not (tmp_path / f".k20-ap.tmp-{token}").exists()
    finally:
        live.kill()
        live.wait()
