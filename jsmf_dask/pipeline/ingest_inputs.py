"""What ``ingest`` reads: the input format, its partitions, and the corpus an append adds to.

* :func:`detect_format`: ``format='auto'`` — UCI for docword files (or a
  directory of them), raw text otherwise.
* :func:`input_partitions`: the input split into the partitions a Dask bag
  reads in parallel, per format.
* :func:`existing_corpus` and :func:`link_existing`: ``--append`` — the
  existing corpus's vocabulary and shards, and the check that the appended
  documents' ids are new.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from jsmf_dask import _progress, config
from jsmf_dask.exceptions import InputError
from jsmf_dask.io.damage import read_json_object
from jsmf_dask.io.fs import get_fs, is_local, join
from jsmf_dask.io.parquet import (
    display_words,
    doc_id_hashes,
    list_blocks,
    read_parquet,
    read_vocabulary,
    repeated_doc_id,
)
from jsmf_dask.io.sources import (
    RatingsBucketPartition,
    TextOptions,
    baskets_partitions,
    ratings_buckets,
    text_partitions,
    uci_partitions,
)
from jsmf_dask.stages.ingest import partition_ratings

__all__ = ["MANIFEST", "read_manifest", "AppendTarget", "detect_format", "uci_vocab_for", "existing_corpus", "link_existing",
           "input_partitions"]

#: The corpus's record of what each ingest read (JSON beside the shards).
MANIFEST = "_ingest.json"


_DOCWORD = re.compile(r"docword\..*\.txt(\.gz|\.bz2|\.xz)?$")
_UCI_FILE = re.compile(r"(docword|vocab)\..*\.txt(\.gz|\.bz2|\.xz)?$")


def detect_format(inputs: Sequence[str]) -> tuple[str, list[str]]:
    """``format='auto'``: UCI for docword files (or a directory of UCI files: its docword files), else text.

    Returns the format and the inputs to read (a UCI directory is replaced by
    its docword files). A directory mixing UCI files with others is refused
    rather than read as raw text.
    """
    kinds, expanded = set(), []
    for url in inputs:
        name = posixpath.basename(url.rstrip("/")).lower()
        fs, path = get_fs(url)
        if fs.isdir(path):
            names = sorted(posixpath.basename(p) for p in fs.find(path) if not posixpath.basename(p).startswith("."))
            uci = [n for n in names if _UCI_FILE.match(n.lower())]
            if uci:
                docwords = [n for n in uci if _DOCWORD.match(n.lower())]
                if len(uci) != len(names) or not docwords:
                    raise InputError(
                        f"{url}: directory holds UCI bag-of-words files ({', '.join(uci[:4])}) and other files; "
                        "pass the docword.*.txt[.gz] file itself, or a directory of text files only"
                    )
                kinds.add("uci")
                expanded += [join(url, n) for n in docwords]
                continue
        kinds.add("uci" if _DOCWORD.match(name) else "text")
        expanded.append(url)
    if len(kinds) != 1:
        raise InputError(f"inputs {list(inputs)} mix UCI docword files and other files; ingest them separately")
    return kinds.pop(), expanded


@dataclass
class AppendTarget:
    """The corpus an append adds to: its vocabulary table, shard URLs, manifest and next shard number."""

    vocab: pa.Table
    shards: list[str]
    manifest: dict
    next_index: int
    labels: dict[str, str] | None = None


def read_manifest(corpus: str) -> dict:
    """The corpus's ``_ingest.json`` (empty when absent: a corpus not written by ``ingest``)."""
    fs, path = get_fs(join(corpus, MANIFEST))
    if not fs.exists(path):
        return {}
    return read_json_object(join(corpus, MANIFEST), "ingest the corpus again")


def existing_corpus(corpus: str) -> AppendTarget:
    vocab = read_vocabulary(corpus)
    shards = sorted({b.path for b in list_blocks(corpus)})
    numbers = [int(m.group(1)) for u in shards if (m := re.match(r"part-(\d+)\.parquet$", posixpath.basename(u)))]
    manifest = read_manifest(corpus)
    words = vocab.column("word").to_pylist()
    shown = display_words(corpus, words)
    labels = {w: lab for w, lab in zip(words, shown, strict=True) if lab != w} or None
    return AppendTarget(vocab=vocab, shards=shards, manifest=manifest, next_index=max(numbers, default=-1) + 1,
                         labels=labels)


def link_existing(existing: AppendTarget, tmp: str, new_shards: list[str]) -> None:
    """Refuse new documents whose doc_id is already in the corpus, then put the old shards beside the new."""
    tables = [(u, read_parquet(u, columns=["doc_id"]).column("doc_id")) for u in existing.shards + new_shards]
    dup = repeated_doc_id([doc_id_hashes(t) for _, t in tables], lambda part, row: tables[part][1][row].as_py())
    if dup is not None:
        (a, ra), _, doc_id = dup
        first = existing.shards[a] if a < len(existing.shards) else "the appended input"
        raise InputError(f"doc_id {doc_id!r} of the appended input is already in the corpus ({first} row {ra}); "
                         "expected new documents only")
    for url in existing.shards:
        target = join(tmp, posixpath.basename(url))
        fs, src = get_fs(url)
        if is_local(url):
            os.link(src, get_fs(target)[1])
        else:
            fs.copy(src, get_fs(target)[1])


def uci_vocab_for(docword: str) -> str:
    """The vocabulary file that goes with a UCI ``docword.X.txt[.gz]``: ``vocab.X.txt`` beside it."""
    head, name = posixpath.split(docword)
    m = re.match(r"docword\.(.*)\.txt", name)
    stem = m.group(1) if m else ""
    return join(head, f"vocab.{stem}.txt") if head else f"vocab.{stem}.txt"


def input_partitions(format, inputs, scratch, *, vocab, doc_ids, text_column, id_column, min_word_length,
                ratings_columns, delimiter, block_size, encoding, strip=None, header=True):
    if format == "uci":
        if vocab is None:
            if unnamed := [u for u in inputs if not _DOCWORD.match(posixpath.basename(u))]:
                raise InputError(f"{unnamed[0]}: read as a UCI docword file, but it is not named "
                                 "docword.<name>.txt[.gz] (its vocabulary is the vocab.<name>.txt beside it): rename "
                                 "it (ingest also takes --vocab), or pass --format for another format")
            vocabs = {uci_vocab_for(u) for u in inputs}
            if len(vocabs) != 1:
                raise InputError(f"docword files {inputs} imply different vocabularies; pass --vocab")
            vocab = vocabs.pop()
        return uci_partitions(inputs, vocab, doc_ids_url=doc_ids, block_size=block_size)
    if format == "text":
        if delimiter is not None and len(delimiter) != 1:
            raise InputError(f"the text table delimiter must be one character (a CSV/TSV field separator); got "
                             f"{delimiter!r}")
        parts = text_partitions(
            inputs, text_column=text_column, id_column=id_column,
            options=TextOptions(min_word_length=min_word_length, encoding=encoding, strip=strip, header=header,
                                delimiter=delimiter),
            block_size=block_size,
            files_per_partition=config.get("ingest.files-per-partition"),
        )
        return parts, None
    if format == "baskets":
        delimiter = "," if delimiter is None else delimiter
        if not delimiter:
            raise InputError("the baskets delimiter is empty; expected a separator such as ','")
        return baskets_partitions(inputs, delimiter=delimiter, block_size=block_size, encoding=encoding), None
    n_buckets = int(ratings_buckets(inputs))
    (bucket_files,) = _progress.compute(partition_ratings(inputs, ratings_columns, scratch, n_buckets, encoding))
    parts = []
    for b in range(n_buckets):
        files = tuple(f[b] for f in bucket_files if f[b])
        if files:
            parts.append(RatingsBucketPartition(files, tuple(inputs), block_size))
    return parts, None
