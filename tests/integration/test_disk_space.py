"""A full disk: the space a stage needs is checked before work, and ENOSPC mid-stage is one error line, no leftovers.

The root lives on a small tmpfs mounted in a private mount namespace of the command's own process (``unshare -m``),
so nothing outside the test sees it; skipped where this machine does not allow that.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jsmf_dask import synth

BIN = Path(sys.executable).parent


def _on_small_disk(mount: Path, megabytes: int, setup: str, command: list[str]) -> subprocess.CompletedProcess:
    script = (f"mount -t tmpfs -o size={megabytes}m jsmf-test {mount} && {setup} && "
              f"exec {' '.join(command)}")
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def can_mount(tmp_path_factory):
    probe = tmp_path_factory.mktemp("probe")
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) here: cannot mount a small file system privately")
    done = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=1m t {probe}"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a private mount namespace here: {done.stderr.strip()}")


def test_cooccur_refuses_before_work_when_c_cannot_fit(can_mount, tmp_path):
    built = tmp_path / "built"
    synth(built, n_docs=2000, n_words=3000, n_topics=5, doc_length=60, seed=0)
    disk = tmp_path / "disk"
    disk.mkdir()
    done = _on_small_disk(disk, 30, f"cp -r {built} {disk}/root",
                          [str(BIN / "jsmf"), "cooccur", f"{disk}/root", "--scheduler", "threads", "--quiet",
                           "&&", "ls", "-a", f"{disk}/root"])
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "cooccur (C and D2 of N = 3000 words" in lines[0] and "needs up to 0.13 GiB" in lines[0]
    assert "GiB free" in lines[0] and "--no-codoc halves it" in lines[0]


def test_enospc_mid_stage_is_one_line_and_leaves_no_temporaries(can_mount, tmp_path):
    rng = np.random.default_rng(0)
    n_docs, n_words, per_doc = 40000, 2000, 60
    docword = tmp_path / "docword.big.txt.gz"
    with gzip.open(docword, "wt") as f:
        f.write(f"{n_docs}\n{n_words}\n{n_docs * per_doc}\n")
        for d in range(n_docs):
            words = np.sort(rng.choice(n_words, size=per_doc, replace=False)) + 1
            f.write("".join(f"{d + 1} {w} {c}\n" for w, c in zip(words, rng.integers(1, 4, per_doc))))
    (tmp_path / "vocab.big.txt").write_text("\n".join(f"w{i}" for i in range(n_words)) + "\n")
    disk = tmp_path / "disk"
    disk.mkdir()
    done = _on_small_disk(disk, 2, "true",
                          [str(BIN / "jsmf"), "ingest", f"{disk}/root", str(docword), "--scheduler", "threads",
                           "--quiet", ";", "status=$?;", "find", str(disk), ";", "exit", "$status"])
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jsmf: error: no space left on the device writing"), done.stderr
    assert "during `jsmf ingest`" in lines[0] and "Traceback" not in done.stderr
    left = [line for line in done.stdout.splitlines() if line.strip() and line.strip() != str(disk)]
    assert not [p for p in left if ".tmp-" in p or "_scratch" in p], left
