"""Every stage on an S3 root: moto's S3 server on loopback, started and stopped here.

The pipeline writes and reads ``s3://…`` through fsspec (s3fs), Zarr's FsspecStore and pyarrow's
fsspec bridge; its results must equal the same run on a local root.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import s3fs  # noqa: F401  (the test extra installs s3fs and moto[server])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_root(tmp_path_factory):
    """``s3://jsmf-test/run`` on a moto server; fsspec is pointed at it through its environment variables."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                                            "FSSPEC_S3_ENDPOINT_URL")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      FSSPEC_S3_ENDPOINT_URL=endpoint)
    import fsspec.config

    fsspec.config.conf.setdefault("s3", {})["endpoint_url"] = endpoint
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        fs = s3fs.S3FileSystem(endpoint_url=endpoint)
        fs.mkdir("jsmf-test")
        yield "s3://jsmf-test/run"
    finally:
        fsspec.config.conf.get("s3", {}).pop("endpoint_url", None)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.slow
def test_every_stage_on_s3_equals_local(s3_root, tmp_path):
    from jsmf_dask import cooccur, evaluate, fit, infer, ingest, open_cooccurrence, open_model, report
    from jsmf_dask.pipeline.infer import read_doc_topics
    from tests.conftest import REUTERS_DOCWORD

    results = {}
    for root in (s3_root, str(tmp_path / "run")):
        ingest(root, [str(REUTERS_DOCWORD)], vocab_size=500, row_group_size=100)
        cooccur(root, tile_size=128)
        fit(root, n_topics=6, iterations=20)
        evaluate(root)
        html = report(root)
        infer(root, model="k6-ap")
        results[root] = (open_cooccurrence(f"{root}/cooc.zarr").C[:], open_model(root, "k6-ap"),
                         read_doc_topics(root, "k6-ap"), html)
    (C_s3, m_s3, dt_s3, html_s3), (C_loc, m_loc, dt_loc, _) = results.values()
    np.testing.assert_array_equal(C_s3, C_loc)
    np.testing.assert_array_equal(m_s3.arrays["anchors"], m_loc.arrays["anchors"])
    np.testing.assert_allclose(m_s3.arrays["B"], m_loc.arrays["B"], rtol=0, atol=1e-12)
    assert dt_s3.equals(dt_loc)
    fs = s3fs.S3FileSystem()
    listed = fs.find("jsmf-test/run")
    assert "jsmf-test/run/report/report.html" in listed and html_s3 == "s3://jsmf-test/run/report/report.html"
    assert not [p for p in listed if ".tmp" in p or ".old-" in p]  # staged names all renamed or removed


@pytest.mark.slow
def test_an_interrupted_commit_on_s3_is_refused_then_rolled_back(s3_root, monkeypatch):
    from jsmf_dask import cooccur, ingest, open_cooccurrence
    from jsmf_dask.exceptions import StoreError
    from jsmf_dask.io.fs import get_fs, recover_interrupted
    from tests.conftest import REUTERS_DOCWORD

    root = s3_root.replace("/run", "/crash")
    ingest(root, [str(REUTERS_DOCWORD)], vocab_size=300, row_group_size=100)
    cooccur(root, tile_size=64)
    url = f"{root}/cooc.zarr"
    C_old = open_cooccurrence(url).C[:]
    fs, path = get_fs(url)
    real_copy = fs.copy  # fsspec caches the instance: the stages use this same object
    copied = []

    def crash_midway(src, dst, *args, **kwargs):  # the "kill": after 3 objects of the new store are in place
        if dst.startswith(path + "/"):
            if len(copied) == 3:
                raise RuntimeError("simulated crash during the commit")
            copied.append(dst)
        return real_copy(src, dst, *args, **kwargs)

    monkeypatch.setattr(fs, "copy", crash_midway)
    with pytest.raises(RuntimeError, match="simulated crash"):
        cooccur(root, tile_size=32, overwrite=True)
    monkeypatch.setattr(fs, "copy", real_copy)
    with pytest.raises(StoreError, match="incomplete: writing it was interrupted"):
        open_cooccurrence(url)  # never a mix of old and new
    recover_interrupted(url)  # what the next write of cooc.zarr does first
    np.testing.assert_array_equal(open_cooccurrence(url).C[:], C_old)
    fs.invalidate_cache()
    assert not [p for p in fs.ls(path.rsplit("/", 1)[0], detail=False) if ".old-" in p or ".tmp-" in p]


def test_two_replacing_commits_on_s3_are_serialised_so_neither_loses_the_other(s3_root):
    """As the local test in ``test_concurrent_writers``: writer A is held inside its commit (its version check
    passed) until writer B reaches its own. Without the lock object B's check also passes and its swap
    discards A's committed output; with it B waits, then finds A's commit and fails."""
    import threading

    from jsmf_dask.exceptions import StoreError
    from jsmf_dask.io.fs import get_fs, staged_output

    root = s3_root.replace("/run", "/race")
    final = f"{root}/out"
    fs, path = get_fs(final)
    fs.pipe_file(f"{path}/version", b"0")
    fs.pipe_file(f"{path}/_jsmf_committed", b"")
    started_a, b_committing, results = threading.Event(), threading.Event(), {}

    def writer(label):
        def unchanged():
            fs.invalidate_cache()
            ok = fs.cat_file(f"{path}/version") == b"0"
            if label == "a":
                b_committing.wait(timeout=5)  # B is now at its commit while A is inside its own
                time.sleep(0.5)
            return ok

        try:
            with staged_output(final, root=root, overwrite=True, unchanged=unchanged) as tmp:
                fs.pipe_file(f"{get_fs(tmp)[1]}/version", label.encode())
                if label == "b":
                    started_a.wait(timeout=5)
                    time.sleep(0.2)
                    b_committing.set()
                else:
                    started_a.set()
            results[label] = "committed"
        except StoreError as err:
            results[label] = str(err)

    threads = [threading.Thread(target=writer, args=(x,)) for x in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results["a"] == "committed", results
    assert "committed by another writer while this command ran" in results["b"], results
    fs.invalidate_cache()
    assert fs.cat_file(f"{path}/version") == b"a"  # what reported success is what is in place
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(path.rsplit("/", 1)[0], detail=False)) == ["out"]


def test_a_dead_writers_commit_lock_on_s3_is_broken_and_a_live_one_waited_for(s3_root, monkeypatch):
    import json

    import jsmf_dask.io.commit_lock as fsmod
    from jsmf_dask.exceptions import StoreError
    from jsmf_dask.io.fs import get_fs, staged_output

    root = s3_root.replace("/run", "/locks")
    final = f"{root}/out"
    fs, path = get_fs(final)
    lock = f"{path.rsplit('/', 1)[0]}/.out.lock"
    old = time.time() - fsmod.COMMIT_LOCK_STALE_SECONDS - 5
    fs.pipe_file(lock, json.dumps({"writer": "x.1.dead", "host": "gone", "time": old}).encode())
    with staged_output(final, root=root) as tmp:  # the dead writer's lock is broken, the commit goes through
        fs.pipe_file(f"{get_fs(tmp)[1]}/data", b"mine")
    fs.invalidate_cache()
    assert fs.cat_file(f"{path}/data") == b"mine" and not fs.exists(lock)

    # a live writer's lock: waited for, then a clear error naming it; nothing of this writer stays
    fs.pipe_file(lock, json.dumps({"writer": "x.1.live", "host": "h", "time": time.time()}).encode())
    monkeypatch.setattr(fsmod, "COMMIT_LOCK_WAIT_SECONDS", 1.0)
    with pytest.raises(StoreError, match=r"\.out\.lock: another writer has held this output's commit lock"):
        with staged_output(final, root=root, overwrite=True) as tmp:
            fs.pipe_file(f"{get_fs(tmp)[1]}/data", b"second")
    fs.invalidate_cache()
    assert fs.cat_file(f"{path}/data") == b"mine"
    assert not [p for p in fs.ls(path.rsplit("/", 1)[0], detail=False) if ".tmp-" in p or ".old-" in p]
    # released by its writer: the next commit goes through at once
    fs.rm_file(lock)
    with staged_output(final, root=root, overwrite=True) as tmp:
        fs.pipe_file(f"{get_fs(tmp)[1]}/data", b"third")
    fs.invalidate_cache()
    assert fs.cat_file(f"{path}/data") == b"third"
