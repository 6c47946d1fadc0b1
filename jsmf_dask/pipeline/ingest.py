"""``ingest``: raw input → curated Parquet corpus under ``<root>/corpus``.

Vocabulary curation follows the paper's experiments (and the authors'
``readBows.m``): stop words out; words ranked by tf·idf with
``idf = log(floor(M / df))``; the top ``vocab_size`` kept; then documents with
fewer than ``min_doc_tokens`` tokens or fewer than ``min_doc_words`` distinct
words dropped. word_id is the tf·idf rank.
"""

from __future__ import annotations

import codecs
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jsmf_dask import _progress, config
from jsmf_dask._validation import check_int, check_option
from jsmf_dask.exceptions import InputError, InvalidParameterError
from jsmf_dask.parameters import INPUT_FORMATS, STRIPS
from jsmf_dask.io.fs import get_fs, join, remove, staged_output, total_bytes
from jsmf_dask.io.parquet import (
    corpus_dir,
    read_parquet,
    row_group_size_for,
    write_labels,
    repeated_doc_id,
    write_vocabulary,
)
from jsmf_dask.io.sources import (
    RatingsColumns,
    read_labels,
)
from jsmf_dask.kernels.vocabulary import select_vocabulary
from jsmf_dask.pipeline.ingest_inputs import (
    MANIFEST,
    detect_format,
    existing_corpus,
    input_partitions,
    link_existing,
    read_manifest,
)
from jsmf_dask.stages.ingest import (
    TermMapping,
    staged_files,
    stage_raw_blocks,
    term_statistics,
    write_curated_shards,
)
from jsmf_dask.cluster import Work, choose_engine

__all__ = ["IngestReport", "ingest", "load_stopwords"]
#: Default (min_doc_tokens, min_doc_words) of each input format (see :func:`ingest`).
DOC_FILTERS = {"uci": (5, 3), "text": (5, 3), "ratings": (2, 2), "baskets": (2, 2)}
_STOPWORDS_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "stopwords_en.txt")


@dataclass
class IngestReport:
    """What ingest read, removed and wrote (also stored as ``<root>/corpus/_ingest.json``)."""

    format: str
    n_input_docs: int
    n_empty_docs: int
    n_ignored_records: int
    n_source_words: int
    words_removed_stopwords: int
    words_removed_absent: int
    words_removed_vocab_size: int
    n_words: int
    words_unused_after_filter: int
    docs_removed_short: int
    docs_removed_few_words: int
    n_docs: int
    n_tokens: int
    n_shards: int
    min_doc_tokens: int
    min_doc_words: int
    n_labelled: int = 0
    filters_note: str = ""  # where the document filters came from, when not from the caller

    def lines(self) -> list[str]:
        """Human-readable summary, one rule per line."""
        return [
            f"read {self.n_input_docs} documents ({self.format}); {self.n_empty_docs} had no terms"
            + (f"; {self.n_ignored_records} records ignored (worth 0 copies)" if self.n_ignored_records else ""),
            f"words: {self.n_source_words} distinct in the input",
            f"  - {self.words_removed_stopwords} removed as stop words",
            f"  - {self.words_removed_absent} removed as absent from every document",
            f"  - {self.words_removed_vocab_size} removed below the tf-idf cut",
            f"  = {self.n_words} words kept"
            + (f" ({self.words_unused_after_filter} left with no document after the document filters)"
               if self.words_unused_after_filter else ""),
            f"documents: {self.n_input_docs - self.n_empty_docs} with terms",
            f"  - {self.docs_removed_short} removed with fewer than {self.min_doc_tokens} tokens{self.filters_note}",
            f"  - {self.docs_removed_few_words} removed with fewer than {self.min_doc_words} distinct words"
            f"{self.filters_note}",
            f"  = {self.n_docs} documents kept, {self.n_tokens} tokens, in {self.n_shards} shards",
        ] + ([f"labels: {self.n_labelled} of the {self.n_words} words have one (shown in topics)"]
             if self.n_labelled else [])


def load_stopwords(stopwords: str | Sequence[str] | None) -> frozenset[str]:
    """``"english"`` (the shipped list), a path to a one-word-per-line file, a collection, or None."""
    if stopwords is None:
        return frozenset()
    if isinstance(stopwords, str):
        path = _STOPWORDS_FILE if stopwords == "english" else stopwords
        fs, p = get_fs(path)
        if not fs.exists(p):
            raise InputError(f"{path}: stop-word file does not exist")
        with fs.open(p, "rb") as f:
            return frozenset(w.strip().lower() for w in f.read().decode("utf-8").splitlines() if w.strip())
    return frozenset(stopwords)


def _corpus_version(root: str) -> str | None:
    """What identifies the committed corpus of ``root`` (its manifest, serialised), None when there is none."""
    try:
        return json.dumps(read_manifest(corpus_dir(root)), sort_keys=True)
    except (OSError, ValueError):  # half-moved by a concurrent commit: not the version read
        return None


def ingest(
    root: str,
    inputs: Sequence[str],
    *,
    format: str = "auto",
    vocab: str | None = None,
    doc_ids: str | None = None,
    text_column: str = "text",
    id_column: str | None = None,
    stopwords: str | Sequence[str] | None = "english",
    min_word_length: int = 3,
    ratings_columns: RatingsColumns = RatingsColumns(),
    delimiter: str | None = None,
    vocab_size: int | None = None,
    min_doc_tokens: int | None = None,
    min_doc_words: int | None = None,
    docs_per_shard: int | None = None,
    row_group_size: int | None = None,
    overwrite: bool = False,
    append: bool = False,
    encoding: str = "utf-8",
    labels: str | None = None,
    strip: str | None = None,
    header: bool = True,
) -> IngestReport:
    """Read raw input, curate the vocabulary and write the corpus under ``<root>/corpus``.

    Parameters
    ----------
    root : str
        Run root (local path or fsspec URL).
    inputs : sequence of str
        Input files or directories.
    format : {'auto', 'uci', 'text', 'ratings', 'baskets'}, default='auto'
        ``auto`` takes ``docword.*.txt[.gz]`` as UCI and anything else as text.
    vocab : str, optional
        UCI vocabulary file; default: ``vocab.X.txt`` beside ``docword.X.txt``.
    doc_ids : str, optional
        UCI only: file whose line k names document k.
    text_column, id_column : str
        Columns of JSONL/CSV/Parquet text input; without ``id_column`` a
        document is named ``<file>:<row>``.
    stopwords : 'english', path, collection or None, default='english'
        Words removed before the tf·idf ranking. Applied to text and UCI input;
        ratings and baskets ignore the default (pass a file to apply one).
    min_word_length : int, default=3
        Shorter tokens are dropped when tokenising text.
    ratings_columns : RatingsColumns
        User, item and rating column names (default: the first three).
    delimiter : str, optional
        Field separator of CSV/TSV text tables (default: tab for ``.tsv``,
        else comma) and item separator of baskets (default: comma).
    vocab_size : int or None, default=None
        Words kept by tf·idf rank; None keeps all. Above the number of
        eligible words every word is kept, with a warning.
    min_doc_tokens, min_doc_words : int, optional
        Documents below either, after curation, are dropped. Defaults by
        format (:data:`DOC_FILTERS`): 5 tokens and 3 distinct words for text
        and bag of words, as in the paper's experiments; 2 and 2 for ratings
        and baskets, whose documents are short (a median basket has a few
        items: the text defaults dropped 62% of a basket corpus) and need only
        two distinct items to carry a co-occurrence.
    docs_per_shard, row_group_size : int, optional
        Shard and row-group sizes in documents (``jsmf.ingest.*`` config);
        the row-group size by default: 10,000, or fewer for a small corpus
        (:func:`~jsmf_dask.io.parquet.row_group_size_for`).
    overwrite : bool, default=False
        Replace an existing corpus.
    append : bool, default=False
        Add the input's documents to the existing corpus as new shards, with
        the existing vocabulary (words outside it are dropped; ``vocab_size``
        does not apply): the nightly path, followed by ``cooccur(update=True)``.
        A doc_id already in the corpus is refused. The old shards are linked
        (local) or copied into the new corpus, committed as one rename.
    encoding : str, default='utf-8'
        Encoding of text, JSONL, CSV and baskets input. Decoding is strict
        everywhere: a binary file or bytes invalid in this encoding are an
        :class:`InputError` naming the file (and line), never replaced.
    labels : str, optional
        A CSV (``.tsv``: tab-separated) file with a header whose first column
        is an item (a word of the vocabulary: ratings' item ids, basket items)
        and second its label, e.g. MovieLens ``movies.csv`` (``movieId,title``).
        Stored as ``corpus/labels.parquet``; topics, reports and the CLI show
        the labels. An append keeps the corpus's labels unless new ones are given.
    strip : {'email'}, optional
        Text input: remove each document's e-mail header block, quoted replies
        and signature before tokenising (:func:`~jsmf_dask.io.sources.tokenize.strip_email`).
    header : bool, default=True
        CSV/TSV text tables: False when the first line is data; the columns
        are then named by position, ``"1"``, ``"2"``, … (``text_column="2"``).

    Returns
    -------
    IngestReport

    Raises
    ------
    InputError
        Malformed input, naming the file, line and field.
    InvalidParameterError
        A parameter outside its range.
    """
    owner = "ingest"
    check_option(format, "format", owner, INPUT_FORMATS)
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise InvalidParameterError(f"The 'encoding' parameter of ingest must name a Python codec such as "
                                    f"'utf-8' or 'latin-1'. Got {encoding!r} instead.") from None
    check_int(vocab_size, "vocab_size", owner, low=1, allow_none=True)
    check_int(min_doc_tokens, "min_doc_tokens", owner, low=1, allow_none=True)
    check_int(min_doc_words, "min_doc_words", owner, low=1, allow_none=True)
    check_int(min_word_length, "min_word_length", owner, low=1)
    docs_per_shard = config.get("ingest.docs-per-shard", docs_per_shard)
    row_group_size = config.get("ingest.row-group-size", row_group_size)
    check_int(docs_per_shard, "docs_per_shard", owner, low=1)
    check_int(row_group_size, "row_group_size", owner, low=1, allow_none=True)
    if not inputs:
        raise InputError("no input given; expected at least one file or directory")
    inputs = [os.fspath(u) for u in inputs]
    if format == "auto":
        format, inputs = detect_format(inputs)
    if format in ("ratings", "baskets") and stopwords == "english":
        stopwords = None
    filter_defaults = min_doc_tokens is None or min_doc_words is None
    min_doc_tokens = DOC_FILTERS[format][0] if min_doc_tokens is None else min_doc_tokens
    min_doc_words = DOC_FILTERS[format][1] if min_doc_words is None else min_doc_words
    stop = load_stopwords(stopwords)
    existing = None
    if append:
        if overwrite:
            raise InvalidParameterError("append=True adds to the existing corpus and overwrite=True replaces it; "
                                        "pass one of them")
        if vocab_size is not None:
            raise InvalidParameterError("vocab_size applies to a new corpus; an append keeps the existing vocabulary")
        existing = existing_corpus(corpus_dir(root))

    if strip is not None:
        check_option(strip, "strip", "ingest", STRIPS)
    label_map = read_labels(labels, encoding=encoding) if labels is not None else None  # checked before any work
    choose_engine(Work(input_bytes=total_bytes(inputs)))
    # an append rebuilds the corpus from the one it read: commit only if that is still the corpus (another
    # append committed meanwhile would otherwise lose its documents)
    read = _corpus_version(root) if append else None
    with staged_output(corpus_dir(root), root=root, overwrite=overwrite or append,
                       unchanged=None if read is None else lambda: _corpus_version(root) == read) as tmp:
        scratch = join(tmp, "_scratch")
        fs, scratch_path = get_fs(scratch)
        fs.makedirs(scratch_path, exist_ok=True)
        partitions, source_words = input_partitions(
            format, inputs, scratch, vocab=vocab, doc_ids=doc_ids, text_column=text_column,
            id_column=id_column, min_word_length=min_word_length, ratings_columns=ratings_columns,
            delimiter=delimiter, block_size=docs_per_shard, encoding=encoding, strip=strip, header=header,
        )
        n_terms = len(source_words) if source_words is not None else None
        staged = stage_raw_blocks(partitions, scratch, n_terms)
        infos, stats = _progress.compute(staged_files(staged), term_statistics(staged))
        raw_files = [url for info in infos for url, _ in info.files]
        _check_unique_doc_ids(infos, raw_files)
        n_input = sum(i.summary.n_docs for i in infos)
        n_empty = sum(i.summary.n_empty for i in infos)
        n_ignored = sum(i.summary.n_ignored for i in infos)
        if stats is None:
            why = (f" (text is read as runs of at least {min_word_length} letters; digits, underscores and "
                   "punctuation separate them: see --min-word-length)" if format == "text" else "")
            raise InputError(f"{', '.join(inputs)}: no document with any term was found{why}")
        if source_words is not None:
            words = np.array(source_words, dtype=object)
            n_source = int(np.count_nonzero(stats.df))
        else:
            words = np.array(stats.terms.to_pylist(), dtype=object)
            n_source = words.size
        if existing is not None:
            # An append keeps the corpus's vocabulary: each source term maps to its word_id there, or is dropped.
            vocab_words = existing.vocab.column("word")
            n_words = len(vocab_words)
            selection = None
            if source_words is not None:
                position = pc.fill_null(pc.index_in(pa.array([str(w) for w in words]), value_set=vocab_words), -1)
                mapping = TermMapping(n_words, lookup=position.to_numpy().astype(np.int64))
            else:
                mapping = TermMapping(n_words, words=vocab_words)
            kept_words = vocab_words.to_pylist()
        else:
            is_stop = np.array([w.lower() in stop for w in words], dtype=bool) if stop else None
            tiebreak = np.argsort(np.argsort(words.astype(str), kind="stable"), kind="stable")
            selection = select_vocabulary(
                stats.df, stats.tf, n_input, vocab_size, is_stopword=is_stop, tiebreak=tiebreak
            )
            n_words = selection.kept.size
            if n_words == 0:
                raise InputError(
                    f"{', '.join(inputs)}: the vocabulary is empty after curation "
                    f"({selection.n_stopwords} stop words and {selection.n_absent} absent words removed)"
                )
            if vocab_size is not None and vocab_size > n_words:
                warnings.warn(
                    f"vocab_size={vocab_size} exceeds the {n_words} eligible words; keeping every word",
                    UserWarning,
                    stacklevel=2,
                )
            if source_words is not None:
                lookup = np.full(len(source_words), -1, dtype=np.int64)
                lookup[selection.kept] = np.arange(n_words)
                mapping = TermMapping(n_words, lookup=lookup)
            else:
                mapping = TermMapping(n_words, words=pa.array(words[selection.kept].tolist(), pa.string()))
            kept_words = [str(w) for w in words[selection.kept]]
        if row_group_size is None:
            row_group_size = row_group_size_for(n_input)
        (results,) = _progress.compute(
            write_curated_shards(
                raw_files, mapping, tmp, min_doc_tokens=min_doc_tokens,
                min_doc_words=min_doc_words, row_group_size=row_group_size,
                first_index=existing.next_index if existing is not None else 0,
            )
        )
        n_docs = sum(r.n_docs for r in results)
        if n_docs == 0:
            raise InputError(
                f"{', '.join(inputs)}: the corpus is empty after curation: every document has fewer than "
                f"{min_doc_tokens} tokens or {min_doc_words} distinct words of the {n_words}-word vocabulary"
            )
        df = np.sum([r.df for r in results], axis=0)
        tf = np.sum([r.tf for r in results], axis=0)
        n_new_shards = sum(r.url is not None for r in results)
        if existing is not None:
            link_existing(existing, tmp, [r.url for r in results if r.url is not None])
            df = df + existing.vocab.column("df").to_numpy()
            tf = tf + existing.vocab.column("tf").to_numpy()
        vocab_table = pa.table(
            {
                "word_id": np.arange(n_words, dtype=np.int32),
                "word": pa.array(kept_words, pa.string()),
                "df": df.astype(np.int64),
                "tf": tf.astype(np.int64),
            }
        )
        write_vocabulary(vocab_table, tmp)
        if label_map is not None:
            n_labelled = write_labels(label_map, kept_words, tmp)
        elif existing is not None and existing.labels is not None:
            n_labelled = write_labels(existing.labels, kept_words, tmp)
        else:
            n_labelled = 0
        report = IngestReport(
            format=format,
            n_input_docs=n_input,
            n_empty_docs=n_empty,
            n_ignored_records=n_ignored,
            n_source_words=n_source,
            words_removed_stopwords=selection.n_stopwords if selection is not None else 0,
            words_removed_absent=selection.n_absent if selection is not None and source_words is not None else 0,
            words_removed_vocab_size=selection.n_beyond_size if selection is not None else 0,
            n_words=n_words,
            words_unused_after_filter=int(np.count_nonzero(df == 0)),
            docs_removed_short=sum(r.n_short for r in results),
            docs_removed_few_words=sum(r.n_few_words for r in results),
            n_docs=n_docs,
            n_tokens=sum(r.n_tokens for r in results),
            n_shards=n_new_shards,
            min_doc_tokens=min_doc_tokens,
            min_doc_words=min_doc_words,
            filters_note=f" (the {format} defaults)" if filter_defaults else "",
            n_labelled=n_labelled,
        )
        if report.words_unused_after_filter:
            warnings.warn(
                f"{report.words_unused_after_filter} vocabulary words occur only in documents removed by "
                "the document filters; their rows of C will be zero",
                UserWarning,
                stacklevel=2,
            )
        remove(scratch, root=root)
        manifest = {"report": asdict(report), "inputs": inputs, "vocab_size": vocab_size,
                    "row_group_size": row_group_size, "docs_per_shard": docs_per_shard,
                    # how documents were read and tokenised: `jsmf transform` reads new ones the same way
                    "reading": {"format": format, "min_word_length": min_word_length, "text_column": text_column,
                                "id_column": id_column, "delimiter": delimiter, "encoding": encoding, "strip": strip,
                                "header": header,
                                "ratings_columns": asdict(ratings_columns)}}
        if existing is not None:  # the first ingest stays the manifest's head; appends are listed after it
            manifest = dict(existing.manifest)
            manifest["appends"] = list(manifest.get("appends", [])) + [
                {"report": asdict(report), "inputs": inputs, "row_group_size": row_group_size}]
        with fs.open(get_fs(join(tmp, MANIFEST))[1], "w") as f:
            json.dump(manifest, f, indent=2)
    return report


def _check_unique_doc_ids(infos, raw_files: list[str]) -> None:
    def doc_id_at(part: int, row: int) -> str:
        return read_parquet(raw_files[part], columns=["doc_id"]).column("doc_id")[row].as_py()

    dup = repeated_doc_id([h for info in infos for h in info.hashes], doc_id_at)
    if dup is not None:
        raise InputError(f"document id {dup[2]!r} occurs more than once in the input; expected unique ids")
