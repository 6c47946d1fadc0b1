"""``cooccur``: the corpus under ``<root>/corpus`` → ``<root>/cooc.zarr``.

``C = Σ_m (h_m h_mᵀ − diag h_m) / (n_m (n_m − 1))`` over documents with
``n_m >= 2`` tokens, divided by its entry sum (paper eq. 1, DESIGN §1.2), plus
the document frequencies ``D1`` and co-document frequencies ``D2`` used by the
coherence metric.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
from dataclasses import dataclass

import dask
import zarr

from jsmf_dask import _progress, config
from jsmf_dask._validation import check_int
from jsmf_dask.exceptions import CorpusSchemaError, StoreError
from jsmf_dask.io.fs import get_fs, join, staged_output
from jsmf_dask.io.parquet import (
    corpus_dir,
    file_manifest,
    find_duplicate_doc_id,
    list_blocks,
    read_block,
    read_vocabulary,
    vocabulary_hash,
)
from jsmf_dask.io.schema import SCHEMA_VERSION
from jsmf_dask.io.zarr_store import cooc_path, create_cooccurrence, zarr_store
from jsmf_dask.stages.cooccurrence import (
    block_hashes,
    block_partials,
    corpus_summary,
    tile_tasks,
    word_block_edges,
)

__all__ = ["CooccurrenceSummary", "cooccur", "library_versions"]


def library_versions() -> dict[str, str]:
    """Versions of this package and the libraries whose behaviour the stores depend on."""
    out = {}
    for name in ("jsmf_dask", "dask", "distributed", "zarr", "pyarrow", "numpy", "scipy"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


@dataclass
class CooccurrenceSummary:
    """What ``cooccur`` counted (also stored in the attrs of ``cooc.zarr``)."""

    n_words: int
    n_docs: int
    n_docs_skipped: dict[str, int]
    n_tokens: int
    entry_sum: float
    n_blocks: int
    n_tiles: int
    path: str

    def lines(self) -> list[str]:
        skipped = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in self.n_docs_skipped.items()) or "none"
        return [
            f"C: {self.n_words} x {self.n_words} from {self.n_docs} documents ({self.n_tokens} tokens) "
            f"in {self.n_blocks} blocks, {self.n_tiles} tiles",
            f"documents skipped: {skipped}",
            f"written to {self.path}",
        ]


def cooccur(
    root: str,
    *,
    tile_size: int | None = None,
    codoc: bool = True,
    batch_nnz: int | None = None,
    overwrite: bool = False,
) -> CooccurrenceSummary:
    """Build ``<root>/cooc.zarr`` from ``<root>/corpus``.

    Parameters
    ----------
    root : str
        Run root (local path or fsspec URL).
    tile_size : int, optional
        Edge of a tile of ``C`` (Zarr chunk; ``jsmf.cooccur.tile-size``).
    codoc : bool, default=True
        Also build ``D2`` (doubles the multiply work).
    batch_nnz : int, optional
        Non-zeros multiplied at once in a tile task (``jsmf.cooccur.batch-nnz``).
    overwrite : bool, default=False
        Replace an existing store.

    Returns
    -------
    CooccurrenceSummary

    Raises
    ------
    StoreError
        Missing corpus or vocabulary, or an existing store without ``overwrite``.
    CorpusSchemaError
        A shard violating the schema (naming file, row and field), or a
        doc_id repeated across the corpus.

    Notes
    -----
    Memory: a map task holds one row group's sparse counts; a tile task
    holds two dense tiles (``C`` and ``D2``) plus ``batch_nnz`` non-zeros of
    ``H̃``. Scratch storage of about 12 bytes per non-zero of the corpus lives
    under the temporary store until it is committed.
    """
    owner = "cooccur"
    tile_size = config.get("cooccur.tile-size", tile_size)
    batch_nnz = config.get("cooccur.batch-nnz", batch_nnz)
    check_int(tile_size, "tile_size", owner, low=1)
    check_int(batch_nnz, "batch_nnz", owner, low=1)
    corpus = corpus_dir(root)
    vocab = read_vocabulary(corpus)
    words = vocab.column("word").to_pylist()
    n_words = len(words)
    blocks = list_blocks(corpus)
    edges = word_block_edges(n_words, tile_size)
    with staged_output(cooc_path(root), overwrite=overwrite) as tmp:
        create_cooccurrence(tmp, n_words, tile_size, codoc=codoc)
        scratch = join(tmp, "_scratch")
        fs, scratch_path = get_fs(scratch)
        fs.makedirs(scratch_path, exist_ok=True)
        partials = block_partials(blocks, n_words, edges, scratch)
        shards = sorted({b.path for b in blocks})
        manifest = [dask.delayed(file_manifest, pure=True)(u) for u in shards]
        summary, hashes, manifest = _progress.compute(corpus_summary(partials), block_hashes(partials), manifest)
        _check_unique(blocks, list(hashes))
        if summary.n_docs == 0:
            raise StoreError(f"{corpus}: no document has 2 or more tokens; C is undefined")
        tiles = tile_tasks(
            len(blocks), edges, scratch, summary.diagonal, summary.entry_sum, tmp,
            batch_nnz=batch_nnz, codoc=codoc,
        )
        _progress.compute(*tiles)
        group = zarr.open_group(zarr_store(tmp), mode="r+")
        group["D1"][:] = summary.doc_freq
        result = CooccurrenceSummary(
            n_words=n_words,
            n_docs=summary.n_docs,
            n_docs_skipped={"fewer_than_2_tokens": summary.n_short},
            n_tokens=summary.n_tokens,
            entry_sum=summary.entry_sum,
            n_blocks=len(blocks),
            n_tiles=len(tiles),
            path=cooc_path(root),
        )
        group.attrs.update(
            {
                "schema_version": SCHEMA_VERSION,
                "n_words": n_words,
                "tile_size": tile_size,
                "n_docs": result.n_docs,
                "n_docs_skipped": result.n_docs_skipped,
                "n_tokens": result.n_tokens,
                "entry_sum": result.entry_sum,
                "vocab_hash": vocabulary_hash(words),
                "corpus_manifest": list(manifest),
                "codoc": codoc,
                "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                "versions": library_versions(),
            }
        )
        fs.rm(scratch_path, recursive=True)
    return result


def _check_unique(blocks, hashes) -> None:
    dup = find_duplicate_doc_id(hashes)
    if dup is None:
        return
    a_block, a_row, b_block, b_row = dup
    found = []
    for block, row in ((a_block, a_row), (b_block, b_row)):
        doc_id = read_block(blocks[block], None).column("doc_id")[row].as_py()
        found.append((blocks[block].path, blocks[block].row_offset + row, doc_id))
    if found[0][2] != found[1][2]:  # 64-bit hash collision, not a duplicate
        return
    (pa_, ra, ida), (pb, rb, _) = found
    raise CorpusSchemaError(
        f"{pb}: row {rb}: field 'doc_id' repeats {ida!r} (first at {pa_} row {ra}); "
        "expected doc_id unique across the corpus"
    )
