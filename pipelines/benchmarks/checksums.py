"""What the stores' checksums cost: C written and read with and without Zarr's crc32c codec, a corpus's row groups
read with and without Parquet's page checksums (medians of ``--runs``, in one run).

Every Zarr chunk and Parquet page this project writes carries a checksum that every read verifies
(``jsmf_dask.io.zarr_store.CHECKSUM``, ``jsmf_dask.io.parquet.write_parquet``)::

    python -m pipelines.benchmarks.checksums --words 10000 --docs 100000 --runs 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import zarr

from jsmf_dask.io.zarr_store import CHECKSUM, checksummed


def _timed(run, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def zarr_rows(work: Path, n_words: int, tile: int, runs: int) -> list[tuple[str, float, float]]:
    """(codecs, write seconds, read seconds) of a dense N×N float64 C in ``tile``² chunks."""
    C = np.random.default_rng(0).random((n_words, n_words))
    rows = []
    for label, codecs in (("none (before)", None), ("crc32c (now)", checksummed())):
        url = str(work / f"{label.split()[0]}.zarr")

        def create():
            shutil.rmtree(url, ignore_errors=True)
            group = zarr.open_group(url, mode="w", zarr_format=3)
            return group.create_array("C", shape=C.shape, chunks=(tile, tile), dtype="float64", compressors=codecs,
                                      config={"write_empty_chunks": True})

        def write():
            create()[...] = C

        write_s = _timed(write, runs)
        read_s = _timed(lambda: zarr.open_group(url, mode="r")["C"][...], runs)
        rows.append((label, write_s, read_s))
    assert zarr.open_group(str(work / "crc32c.zarr"), mode="r")["C"].compressors == (CHECKSUM,)
    return rows


def parquet_rows(work: Path, n_docs: int, n_words: int, runs: int) -> list[tuple[str, float, float]]:
    """(page checksums, write seconds, read seconds) of a shard of ``n_docs`` documents of 50–150 words."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(50, 150, n_docs)
    ids = [np.sort(rng.choice(n_words, n, replace=False)).astype(np.int32) for n in lengths]
    counts = [rng.integers(1, 5, n).astype(np.int32) for n in lengths]
    table = pa.table({"doc_id": pa.array([f"d{i}" for i in range(n_docs)]),
                      "word_ids": pa.array(ids, pa.list_(pa.int32())), "counts": pa.array(counts, pa.list_(pa.int32()))})
    rows = []
    for label, checked in (("none (before)", False), ("page CRC (now)", True)):
        path = str(work / f"shard-{checked}.parquet")
        write_s = _timed(lambda: pq.write_table(table, path, row_group_size=10_000, write_page_checksum=checked),
                         runs)

        def read():
            with pq.ParquetFile(path, page_checksum_verification=checked) as shard:
                for group in range(shard.num_row_groups):
                    shard.read_row_group(group)

        rows.append((label, write_s, _timed(read, runs)))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=10_000, help="N of the dense C")
    parser.add_argument("--tile", type=int, default=2048)
    parser.add_argument("--docs", type=int, default=100_000, help="documents of the Parquet shard")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="jsmf-checksums-") as tmp:
        work = Path(tmp)
        print(f"| C (N {args.words:,}, {args.tile}² tiles, {8 * args.words**2 / 2**20:.0f} MiB) | write s | read s |")
        print("|---|---|---|")
        for label, write_s, read_s in zarr_rows(work, args.words, args.tile, args.runs):
            print(f"| {label} | {write_s:.3f} | {read_s:.3f} |")
        print()
        print(f"| corpus shard ({args.docs:,} documents, row groups of 10,000) | write s | read s (every row group) |")
        print("|---|---|---|")
        for label, write_s, read_s in parquet_rows(work, args.docs, args.words, args.runs):
            print(f"| {label} | {write_s:.3f} | {read_s:.3f} |")
    print(f"\nmedians of {args.runs} runs")


if __name__ == "__main__":
    main()
