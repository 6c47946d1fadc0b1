"""The co-occurrence store: its codecs, and C read once for many fits in one process (``sharing_C``)."""

from __future__ import annotations

import threading

import dask
import numpy as np
import pytest
import zarr

from jsmf_dask import cooccur
from jsmf_dask.io.zarr_store import C_CODEC, D2_CODEC, cooc_path, read_checked_C, sharing_C
from jsmf_dask.pipeline.synth import synth


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("store") / "r"
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):  # module scope: no autouse one
        synth(root, n_docs=300, n_words=120, n_topics=3, doc_length=40, seed=2, topics_from="dirichlet")
        cooccur(root)
    return str(root)


def test_C_and_D2_are_written_with_their_codecs_and_read_back_exactly(root):
    group = zarr.open_group(cooc_path(root), mode="r")
    for name, codec in (("C", C_CODEC), ("D2", D2_CODEC)):
        stored = group[name].metadata.codecs[-1]
        assert (stored.cname, stored.clevel, stored.shuffle) == (codec.cname, codec.clevel, codec.shuffle)
    C = group["C"][...]
    assert np.isclose(C.sum(), 1.0) and np.array_equal(C, C.T)


def test_sharing_C_reads_once_and_hands_out_one_read_only_array(root, monkeypatch):
    import jsmf_dask.io.zarr_store as module

    url = cooc_path(root)
    fresh = read_checked_C(url)
    assert fresh.flags.writeable  # outside the block each caller owns its copy
    reads = []
    real = module._read_checked_C
    monkeypatch.setattr(module, "_read_checked_C", lambda u: reads.append(u) or real(u))
    seen = []
    with sharing_C(url):
        threads = [threading.Thread(target=lambda: seen.append(read_checked_C(url))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(reads) == 1 and all(s is seen[0] for s in seen)
        np.testing.assert_array_equal(seen[0], fresh)
        with pytest.raises(ValueError, match="read-only"):
            seen[0][0, 0] = 1.0
    assert read_checked_C(url).flags.writeable and len(reads) == 2  # the block's end dropped it
