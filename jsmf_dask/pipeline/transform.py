"""``transform``: topic weights of new documents under a run root's model, read the way ``ingest`` read the corpus.

The inputs are read by ingest's own readers and tokeniser (:mod:`jsmf_dask.io.sources`, with the settings the
corpus was ingested with, recorded in its manifest), their terms mapped to the model's vocabulary (the rest
counted as unknown), and each document folded in under the model's topics and document prior
(:func:`~jsmf_dask.kernels.infer.document_topics`). Nothing under the run root is
written: the raw blocks go to a scratch directory beside the output, and the output (a directory of Parquet
parts, :data:`~jsmf_dask.io.schema.NEW_DOC_TOPICS_SCHEMA`) is committed by one rename.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jsmf_dask import _progress, config
from jsmf_dask._validation import check_name, check_option
from jsmf_dask.cluster import Work, choose_engine
from jsmf_dask.exceptions import InputError, StoreError
from jsmf_dask.io.fs import (check_under, join, make_dir, parent_url, remove, staged_output, total_bytes,
                             write_file)
from jsmf_dask.io.model_store import chosen_model, open_model
from jsmf_dask.io.parquet import corpus_dir, display_words, read_vocabulary
from jsmf_dask.io.sources import RatingsColumns
from jsmf_dask.kernels.infer import model_prior
from jsmf_dask.parameters import INPUT_FORMATS, STRIPS
from jsmf_dask.pipeline.infer import INFER_INFO, topic_info
from jsmf_dask.pipeline.ingest_inputs import detect_format, input_partitions, read_manifest
from jsmf_dask.stages.ingest import TermMapping, stage_raw_blocks, staged_files
from jsmf_dask.stages.transform import transform_tasks

__all__ = ["TransformReport", "transform", "reading_settings"]

#: How ``ingest`` reads documents when its manifest does not say (corpora ingested before it was recorded).
DEFAULT_READING = {"format": "auto", "min_word_length": 3, "text_column": "text", "id_column": None,
                   "delimiter": None, "encoding": "utf-8", "ratings_columns": {}, "strip": None, "header": True}
_RATINGS_KEYS = {"user", "item", "rating"}
#: Documents without a known word named in the report (all are counted).
SHOWN_EMPTY = 5


@dataclass
class TransformReport:
    """What ``transform`` wrote."""

    path: str
    model: str
    format: str
    n_docs: int
    n_tokens: int
    n_unknown: int
    empty_doc_ids: list[str]
    n_empty: int

    def lines(self) -> list[str]:
        total = self.n_tokens + self.n_unknown
        share = self.n_unknown / total if total else 0.0
        lines = [f"topic compositions of {self.n_docs} new documents ({self.format}) under model {self.model} "
                 f"-> {self.path}",
                 f"tokens: {self.n_tokens} in the model's vocabulary, {self.n_unknown} not ({share:.1%}: "
                 "unknown words and stop words, counted and left out)"]
        if self.n_empty:
            shown = ", ".join(self.empty_doc_ids)
            more = f" and {self.n_empty - len(self.empty_doc_ids)} more" if self.n_empty > len(self.empty_doc_ids) \
                else ""
            lines.append(f"note: {self.n_empty} documents have no word of the vocabulary; their topic weights are "
                         f"the model's prior mean: {shown}{more}")
        return lines


#: The JSON types of the manifest's ``reading`` fields.
_READING_TYPES = {"format": str, "min_word_length": int, "text_column": str, "id_column": (str, int, type(None)),
                  "delimiter": (str, type(None)), "encoding": str, "ratings_columns": dict,
                  "strip": (str, type(None)), "header": bool}


def reading_settings(root: str) -> dict:
    """How the corpus of ``root`` was read (its manifest's ``reading``; :data:`DEFAULT_READING` where absent).

    Raises
    ------
    StoreError
        If the manifest's ``reading`` is not what ``ingest`` writes (a damaged or hand-edited ``_ingest.json``).
    """
    manifest = read_manifest(corpus_dir(root))
    stored = manifest.get("reading", {})
    where = f"{join(corpus_dir(root), '_ingest.json')}: field 'reading'"
    if not isinstance(stored, dict):
        raise StoreError(f"{where} is {stored!r}; expected an object; ingest the corpus again")
    settings = {**DEFAULT_READING, **stored}
    wrong = [key for key, value in settings.items() if key not in _READING_TYPES
             or not isinstance(value, _READING_TYPES[key]) or (isinstance(value, bool) and key != "header")]
    if not wrong:
        wrong = [key for key, bad in (("format", settings["format"] not in INPUT_FORMATS),
                                      ("strip", settings["strip"] not in (None, *STRIPS)),
                                      ("ratings_columns", not set(settings["ratings_columns"]) <= _RATINGS_KEYS))
                 if bad]
    if wrong:
        raise StoreError(f"{where}: {wrong[0]!r} is {settings.get(wrong[0])!r}, not what `jsmf ingest` records; "
                         "ingest the corpus again")
    return settings


def transform(root: str, inputs: Sequence[str], *, output: str, model: str | None = None,
              format: str | None = None, overwrite: bool = False) -> TransformReport:
    """Write the topic weights of the documents in ``inputs`` under ``model`` of ``root`` to ``output``.

    Parameters
    ----------
    root : str
        Run root with the model and its corpus (only read).
    inputs : sequence of str
        Files in any format ``ingest`` reads (UCI docword + vocab, text files or tarballs, JSONL/CSV/Parquet
        text columns, ratings, baskets).
    output : str
        Directory to write (``part-NNNNN.parquet`` + ``_infer.json``); must lie outside ``root``.
    model : str, optional
        Model name; required when the root holds more than one.
    format : str, optional
        Input format (default: the one the corpus was ingested from, if recorded, else detected).
    overwrite : bool, default=False
        Replace an existing ``output``.

    Returns
    -------
    TransformReport
    """
    root, output = os.fspath(root), os.fspath(output).rstrip("/")
    check_name(model, "model", "transform", allow_none=True)
    if format is not None:
        check_option(format, "format", "transform", INPUT_FORMATS)
    if not inputs:
        raise InputError("transform: no input files given")
    model = chosen_model(root, model)
    fitted = open_model(root, model)
    B, alpha = fitted.arrays["B"], model_prior(fitted.arrays)
    corpus = corpus_dir(root)
    words = read_vocabulary(corpus).column("word").to_pylist()
    if B.shape[0] != len(words):
        raise StoreError(f"{fitted.url}: B has {B.shape[0]} words but {corpus}/vocab.parquet has {len(words)}")
    _check_outside(root, output)
    reading = reading_settings(root)
    fmt = format or reading["format"]
    inputs = [os.fspath(u) for u in inputs]
    if fmt == "auto":
        fmt, inputs = detect_format(inputs)
    choose_engine(Work(input_bytes=total_bytes(inputs)))
    with staged_output(output, root=parent_url(output), overwrite=overwrite) as tmp:
        scratch = join(tmp, "_scratch")
        make_dir(scratch)
        partitions, source_words = input_partitions(
            fmt, inputs, scratch, vocab=None, doc_ids=None, text_column=reading["text_column"],
            id_column=reading["id_column"], min_word_length=reading["min_word_length"],
            ratings_columns=RatingsColumns(**reading["ratings_columns"]), delimiter=reading["delimiter"],
            block_size=int(config.get("ingest.docs-per-shard")), encoding=reading["encoding"],
            strip=reading["strip"], header=reading["header"])
        (infos,) = _progress.compute(staged_files(stage_raw_blocks(
            partitions, scratch, len(source_words) if source_words is not None else None)))
        raw_files = [url for info in infos for url, _ in info.files]
        mapping = _mapping(words, source_words)
        with _progress.data_in_graph():  # the model's B
            blocks = _progress.compute(*transform_tasks(raw_files, mapping, B, alpha, tmp))
        remove(scratch, root=tmp)
        if not sum(b.n_docs for b in blocks):
            raise InputError(f"{', '.join(inputs)}: no document was found")
        write_file(join(tmp, INFER_INFO), topic_info(model, B, fitted.arrays.get("anchors", ()),
                                                     display_words(corpus, words)), root=tmp)
    empty = [d for b in blocks for d in b.empty_doc_ids]
    return TransformReport(output, model, fmt, sum(b.n_docs for b in blocks), sum(b.n_tokens for b in blocks),
                           sum(b.n_unknown for b in blocks), empty[:SHOWN_EMPTY], len(empty))


def _mapping(words: list[str], source_words: list[str] | None) -> TermMapping:
    """Source terms → the model's word ids (−1: unknown); by position for integer-term sources (UCI)."""
    vocabulary = pa.array(words, pa.string())
    if source_words is None:
        return TermMapping(len(words), words=vocabulary)
    position = pc.fill_null(pc.index_in(pa.array([str(w) for w in source_words]), value_set=vocabulary), -1)
    return TermMapping(len(words), lookup=np.asarray(position.to_numpy(), dtype=np.int64))


def _check_outside(root: str, output: str) -> None:
    """The output must not lie in the run root: transform leaves the root as it is."""
    try:
        check_under(root, join(output, "part"))  # the root itself counts as inside
    except StoreError:
        return
    raise StoreError(f"{output}: inside the run root {root}; transform writes outside it (the run root stays as "
                     "it is): choose --output elsewhere")
