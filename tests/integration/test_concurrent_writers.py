"""One writer per output: two commands writing the same output at once — exactly one commits, the other fails clearly."""

from __future__ import annotations

import os
import subprocess
import sys
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
    from jsmf_dask.io.fs import _WRITER, recover_interrupted

    host = _WRITER.split(".")[1]
    live = subprocess.Popen(["sleep", "60"])
    dead = subprocess.Popen(["true"])
    dead.wait()
    try:
        for name in (f".out.tmp-aaa.{live.pid}.{host}", f".out.tmp-bbb.{dead.pid}.{host}", ".out.tmp-0123456789ab",
                     f".out.tmp-ccc.{live.pid}.ffffffff"):  # the last: a writer of another host, just started
            (tmp_path / name).mkdir()
        recover_interrupted(str(tmp_path / "out"))
        assert sorted(os.listdir(tmp_path)) == [f".out.tmp-aaa.{live.pid}.{host}", f".out.tmp-ccc.{live.pid}.ffffffff"]
    finally:
        live.kill()
        live.wait()
