"""What ``cooccur --update`` checks and keeps: the store it adds to, the shards it has not counted, the settings.

An update adds the documents of new shards to the stored, unnormalised sum of
``C`` (``entry_sum``), so it must count them exactly as the store counted the
others (the same held-out and validation split, the same weighting), count no
document twice, and commit only onto the version of the store it read.
"""

from __future__ import annotations

import posixpath

import numpy as np

from jsmf_dask.exceptions import CorpusSchemaError, InvalidParameterError, StoreError
from jsmf_dask.io.fs import get_fs, join
from jsmf_dask.io.parquet import read_block, vocabulary_hash
from jsmf_dask.io.zarr_store import CooccurrenceStore, cooc_path, open_cooccurrence, weighting_of

__all__ = ["store_version", "kept_settings", "uncounted_blocks", "check_not_counted"]


def store_version(root: str) -> tuple | None:
    """What identifies the committed ``cooc.zarr`` of ``root`` (None when there is none): an update builds on one
    version and must not replace another (a concurrent update's), or it would count those documents twice."""
    try:
        attrs = open_cooccurrence(cooc_path(root)).attrs
    except StoreError:
        return None
    return (attrs.get("created"), len(attrs.get("corpus_manifest", [])), attrs.get("entry_sum"),
            len(attrs.get("updates", [])))


def kept_settings(old: CooccurrenceStore, heldout: float, validation: float, weighting: str | None
                  ) -> tuple[float, float, str]:
    """The store's held-out fraction, validation fraction and weighting, which an update keeps; an explicit other
    value of any of them is an error (``weighting`` None: not given)."""
    if old.compressed:
        raise StoreError(f"{old.url}: a compressed store (rank {old.rank}) cannot be updated (its eigenpairs are "
                         "not a sum over documents); rebuild it: `jsmf cooccur --overwrite --rank "
                         f"{old.rank}`")
    stored = float(old.attrs.get("heldout_fraction", 0.0))
    if heldout and heldout != stored:
        raise InvalidParameterError(f"{old.url} holds out a fraction {stored} of the documents; an update keeps "
                                    f"it (got heldout={heldout}); rebuild with --overwrite to change it")
    heldout = stored
    stored = float(old.attrs.get("validation_fraction", 0.0))
    if validation and validation != stored:
        raise InvalidParameterError(f"{old.url} keeps a fraction {stored} of the documents for validation; an "
                                    f"update keeps it (got validation={validation}); rebuild with --overwrite "
                                    "to change it")
    kept = weighting_of(old.attrs)
    if weighting is not None and weighting != kept:
        raise InvalidParameterError(f"{old.url} weighs each document by {kept!r}; an update keeps it (got "
                                    f"weighting={weighting!r}); rebuild with --overwrite to change it")
    return heldout, stored, kept


def uncounted_blocks(old, blocks, words, corpus: str):
    """The blocks of shards ``old`` has not counted, after checking that what it counted is unchanged."""
    if old.attrs["vocab_hash"] != vocabulary_hash(words):
        raise StoreError(
            f"{corpus}/vocab.parquet: its words differ from those {old.url} was built with; an update needs the "
            "same vocabulary (add documents with `jsmf ingest --append`), or rebuild with `jsmf cooccur --overwrite`"
        )
    if not old.has("doc_hashes"):
        raise StoreError(f"{old.url}: built without doc_id hashes, so repeats cannot be refused; rebuild it with "
                         "`jsmf cooccur --overwrite`")
    counted = {posixpath.basename(m["path"]): m for m in old.attrs["corpus_manifest"]}
    present: dict[str, int] = {}
    for b in blocks:
        name = posixpath.basename(b.path)
        present[name] = present.get(name, 0) + b.n_rows
    for name, m in counted.items():
        if name not in present:
            raise StoreError(f"{corpus}/{name}: counted in {old.url} but no longer in the corpus; rebuild with "
                             "`jsmf cooccur --overwrite`")
        url = join(corpus, name)
        fs, path = get_fs(url)
        if present[name] != m["rows"] or fs.size(path) != m["bytes"]:
            raise StoreError(f"{url}: changed since {old.url} counted it ({m['rows']} rows, {m['bytes']} bytes "
                             f"then; {present[name]} rows, {fs.size(path)} bytes now); rebuild with --overwrite")
    new = [b for b in blocks if posixpath.basename(b.path) not in counted]
    if not new:
        raise StoreError(f"{corpus}: every shard is already counted in {old.url}; nothing to update "
                         "(add documents with `jsmf ingest --append`)")
    return new


def check_not_counted(old, blocks, hashes) -> None:
    """Refuse a new document whose doc_id is already counted in ``old``."""
    counted = old.read("doc_hashes")
    for block, h in zip(blocks, hashes, strict=True):
        hit = np.flatnonzero(np.isin(h, counted))
        if hit.size:
            row = int(hit[0])
            doc_id = read_block(block, None).column("doc_id")[row].as_py()
            raise CorpusSchemaError(
                f"{block.path}: row {block.row_offset + row}: field 'doc_id' {doc_id!r} is already counted in "
                f"{old.url}; expected only new documents in an update"
            )
