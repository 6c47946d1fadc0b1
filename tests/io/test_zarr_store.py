"""The co-occurrence store: its codecs, and C read once for many fits in one process (``sharing_C``)."""

from __future__ import annotations

import threading

import dask
import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

from jsmf_dask import cooccur
from jsmf_dask.io.zarr_store import CHECKSUM, C_CODEC, D2_CODEC, cooc_path, read_checked_C, sharing_C
from jsmf_dask.pipeline.synth import synth
from jsmf_dask.stages.cooccurrence import even_tile_size, word_block_edges
from tests.conftest import examples


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("store") / "r"
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):  # module scope: no autouse one
        synth(root, n_docs=300, n_words=120, n_topics=3, doc_length=40, seed=2, topics_from="dirichlet")
        cooccur(root)
    return str(root)


def test_C_is_stored_uncompressed_and_D2_with_its_codec_both_checksummed_and_read_back_exactly(root):
    group = zarr.open_group(cooc_path(root), mode="r")
    assert C_CODEC is None and group["C"].compressors == (CHECKSUM,)
    blosc, crc = group["D2"].metadata.codecs[-2:]
    assert (blosc.cname, blosc.clevel, blosc.shuffle) == (D2_CODEC.cname, D2_CODEC.clevel, D2_CODEC.shuffle)
    assert crc == CHECKSUM and group["D1"].compressors[-1] == CHECKSUM
    C = group["C"][...]
    assert np.isclose(C.sum(), 1.0) and np.array_equal(C, C.T)


def test_a_bit_flipped_in_a_stored_tile_fails_its_read(root, tmp_path):
    """Uncompressed, a flipped bit of C would read as a wrong number; its checksum makes it a StoreError."""
    import shutil

    from jsmf_dask.exceptions import StoreError
    from jsmf_dask.io.zarr_store import read_tile

    copy = tmp_path / "r"
    shutil.copytree(root, copy)
    tile = copy / "cooc.zarr" / "C" / "c" / "0" / "0"
    data = bytearray(tile.read_bytes())
    data[40] ^= 0x10
    tile.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"cooc\.zarr/C: cannot be read, the store is damaged \(ValueError: Stored "
                                         r"and computed checksum do not match"):
        read_tile(cooc_path(str(copy)), "C", (0, 4), (0, 4))


def test_tiles_are_written_whole_even_where_a_tile_is_all_zero(tmp_path):
    """``write_empty_chunks`` is a runtime setting, not stored: the writer of a reopened array must ask for it
    again, or zarr scans every tile for the fill value (and drops an all-zero one)."""
    from jsmf_dask.io.zarr_store import create_cooccurrence, write_tile

    url = str(tmp_path / "c.zarr")
    create_cooccurrence(url, 4, 2)
    write_tile(url, (0, 2), (2, 4), np.zeros((2, 2)), np.zeros((2, 2), dtype=np.int32))
    stored = sorted(p.relative_to(tmp_path / "c.zarr").as_posix() for p in (tmp_path / "c.zarr").rglob("c/*/*"))
    assert stored == ["C/c/0/1", "C/c/1/0", "D2/c/0/1", "D2/c/1/0"]


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


@settings(max_examples=examples(100), deadline=None)
@given(n=st.integers(1, 50_000), most=st.integers(1, 5_000))
def test_tiles_are_as_equal_as_they_can_be_and_never_above_the_size_asked(n, most):
    edge = even_tile_size(n, most)
    sizes = np.diff(word_block_edges(n, edge))
    assert edge <= most and sizes.sum() == n and len(sizes) == -(-n // most)
    assert sizes.max() - sizes.min() <= len(sizes)  # the last tile is short by less than one word per tile


def test_the_store_is_chunked_by_its_recorded_tile_size_without_padding(root):
    group = zarr.open_group(cooc_path(root), mode="r")
    assert group["C"].chunks == (group.attrs["tile_size"],) * 2 == (120, 120)  # N = 120 words, tiles up to 2,048
