"""The stored formats: Arrow schemas of the corpus and Zarr layout of the stores.

This module is the one home of the formats that ``data_schemas/`` publishes
(``tests/io/test_schema.py`` checks that those files equal what is here). Every
reader and writer in :mod:`jsmf_dask.io` validates through these functions, so
that an error names the file, the row and the field.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

from jsmf_dask.exceptions import CorpusSchemaError

__all__ = [
    "SCHEMA_VERSION",
    "DOCUMENT_SCHEMA",
    "VOCAB_SCHEMA",
    "COOCCURRENCE_LAYOUT",
    "MODEL_LAYOUT",
    "DOC_TOPICS_SCHEMA",
    "NEW_DOC_TOPICS_SCHEMA",
    "doc_topics_schema",
    "check_schema",
    "validate_documents",
    "validate_vocabulary",
    "published_schemas",
]

#: Version of every stored format below; bumped on any incompatible change.
SCHEMA_VERSION = 1

DOCUMENT_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("word_ids", pa.list_(pa.field("item", pa.int32(), nullable=False)), nullable=False),
        pa.field("counts", pa.list_(pa.field("item", pa.int32(), nullable=False)), nullable=False),
    ],
    metadata={"jsmf.schema_version": str(SCHEMA_VERSION)},
)
"""One row per document: ``doc_id`` unique across the corpus; ``word_ids``
strictly increasing, each in ``[0, N)``; ``counts`` each > 0, same length."""

LABELS_SCHEMA = pa.schema(
    [
        pa.field("word_id", pa.int32(), nullable=False),
        pa.field("label", pa.string(), nullable=False),
    ],
    metadata={"jsmf.schema_version": str(SCHEMA_VERSION)},
)

VOCAB_SCHEMA = pa.schema(
    [
        pa.field("word_id", pa.int32(), nullable=False),
        pa.field("word", pa.string(), nullable=False),
        pa.field("df", pa.int64(), nullable=False),
        pa.field("tf", pa.int64(), nullable=False),
    ],
    metadata={"jsmf.schema_version": str(SCHEMA_VERSION)},
)
"""One row per word: ``word_id`` dense ``0..N-1`` in row order, ``word``
unique, ``df`` documents and ``tf`` tokens of the word in the stored corpus."""

DOC_TOPICS_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("n_tokens", pa.int64(), nullable=False),
        pa.field("topics", pa.list_(pa.field("item", pa.float64(), nullable=False)), nullable=False),
    ],
    metadata={"jsmf.schema_version": str(SCHEMA_VERSION)},
)
"""``<root>/doc_topics/<model>/part-NNNNN.parquet``, one row per document:
its ``doc_id``, its length, and ``topics``, its K topic weights (on the
simplex; uniform for a document with no words). Written by ``jsmf infer``, and
by ``jsmf refine`` for its training documents into
``<root>/model.zarr/<name>/doc_topics/part-NNNNN.parquet``."""


NEW_DOC_TOPICS_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("n_tokens", pa.int64(), nullable=False),
        pa.field("n_unknown", pa.int64(), nullable=False),
        pa.field("topics", pa.list_(pa.field("item", pa.float64(), nullable=False)), nullable=False),
    ],
    metadata={"jsmf.schema_version": str(SCHEMA_VERSION)},
)
"""``jsmf transform``'s output: :data:`DOC_TOPICS_SCHEMA` for documents outside the corpus, with
``n_tokens`` the tokens in the model's vocabulary and ``n_unknown`` the tokens that are not."""


def doc_topics_schema(n_topics: int, *, new_documents: bool = False) -> pa.Schema:
    """:data:`DOC_TOPICS_SCHEMA` (``new_documents``: :data:`NEW_DOC_TOPICS_SCHEMA`) with ``topics`` as a
    fixed-size list of ``n_topics`` weights."""
    base = NEW_DOC_TOPICS_SCHEMA if new_documents else DOC_TOPICS_SCHEMA
    field = pa.field("topics", pa.list_(pa.field("item", pa.float64(), nullable=False), n_topics), nullable=False)
    schema = base.set(base.get_field_index("topics"), field)
    return schema.with_metadata({**base.metadata, b"jsmf.n_topics": str(n_topics).encode()})


COOCCURRENCE_LAYOUT: dict[str, Any] = {
    "zarr_format": 3,
    "arrays": {
        "C": {
            "dtype": "float64",
            "shape": ["N", "N"],
            "chunks": ["tile", "tile"],
            "codecs": "bytes (uncompressed) + crc32c",
            "fill_value": 0.0,
            "meaning": "joint word co-occurrence, symmetric, entries >= 0, sums to 1 (paper eq. 1, each document "
                       "weighed as the attribute 'weighting' says)",
        },
        "D1": {"dtype": "int64", "shape": ["N"], "chunks": ["tile"],
               "meaning": "document frequency: number of counted documents containing word i"},
        "D2": {
            "dtype": "int32",
            "shape": ["N", "N"],
            "chunks": ["tile", "tile"],
            "codecs": "bytes + blosc(lz4, clevel=5, bitshuffle) + crc32c",
            "fill_value": 0,
            "meaning": "co-document frequency: counted documents containing both i and j; D2[i, i] = D1[i]",
        },
        "eigenvalues": {
            "dtype": "float64",
            "shape": ["R"],
            "meaning": "compressed store only (form 'compressed', no C or D2): the top-R algebraic eigenvalues "
                       "of C, descending",
        },
        "eigenvectors": {
            "dtype": "float64",
            "shape": ["N", "R"],
            "chunks": ["tile", "R"],
            "meaning": "compressed store only: the matching orthonormal eigenvectors",
        },
        "row_sums": {
            "dtype": "float64",
            "shape": ["N"],
            "meaning": "compressed store only: C's exact row sums p(w) (one more pass over the corpus)",
        },
        "doc_hashes": {
            "dtype": "uint64",
            "shape": ["n_docs"],
            "meaning": "64-bit hashes of the counted documents' doc_ids, sorted: `cooccur --update` refuses "
                       "documents already counted",
        },
    },
    "attrs": {
        "schema_version": "int, equal to SCHEMA_VERSION",
        "n_words": "int N",
        "tile_size": "int, chunk edge of C and D2",
        "n_docs": "int, documents counted (n_m >= 2 tokens)",
        "n_docs_skipped": "object {reason: count}",
        "n_tokens": "int, tokens of the counted documents",
        "entry_sum": "float, sum of the unnormalised C; C stored = unnormalised / entry_sum",
        "weighting": "'tokens' (each document weighed by its tokens; entry_sum = their number) or 'documents' "
                     "(each once, the paper's eq. 1; entry_sum = n_docs); absent means 'documents'",
        "vocab_hash": "str, sha256 of the vocabulary words in word_id order",
        "corpus_manifest": "list of {path, bytes, rows, sha256} for every shard counted",
        "updates": "list of {created, shards, n_docs} for each `cooccur --update` applied",
        "heldout_fraction": "float, documents whose doc_id hash (blake2b, person 'jsmf-heldout') falls below "
                            "this fraction of [0, 1) are not counted (0: none)",
        "n_docs_heldout": "int, documents held out",
        "validation_fraction": "float, documents whose doc_id hash (the same) is at or above 1 - this fraction are "
                               "not counted either: refine scores them to decide when to stop (0: none)",
        "n_docs_validation": "int, documents kept for validation",
        "form": "'dense' (C, D1, D2) or 'compressed' (eigenvalues, eigenvectors, D1); absent means dense",
        "rank": "compressed: int R, the eigenpairs stored",
        "eig_residual": "compressed: max_j ||C v_j - lambda_j v_j|| / |lambda_1| of the stored pairs",
        "eig_tol": "compressed: the residual asked for",
        "n_passes": "compressed: passes over the corpus (products with C) the eigensolver took",
        "versions": "object {package: version}",
    },
}
"""Layout of ``<root>/cooc.zarr`` (a Zarr v3 group)."""


MODEL_LAYOUT: dict[str, Any] = {
    "zarr_format": 3,
    "path": "<root>/model.zarr/<name> (one group per fitted model; <root>/topics/<name>.txt beside it)",
    "arrays": {
        "anchors": {"dtype": "int64", "shape": ["K"], "meaning": "anchor word of each topic (S)"},
        "anchor_pivots": {"dtype": "float64", "shape": ["K"], "meaning": "residual norm at each anchor pick"},
        "B": {"dtype": "float64", "shape": ["N", "K"], "meaning": "p(word | topic), columns sum to 1"},
        "A": {"dtype": "float64", "shape": ["K", "K"], "meaning": "p(topic, topic), sums to 1, from C_SS"},
        "A_least_squares": {"dtype": "float64", "shape": ["K", "K"],
                            "meaning": "the Baseline's argmin ||C - BAB^T||_F (may be negative)"},
        "weights": {"dtype": "float64", "shape": ["N", "K"], "meaning": "p(topic | word)"},
        "objective": {"dtype": "float64", "shape": ["N"], "meaning": "per-word squared residual of recovery"},
        "p_word": {"dtype": "float64", "shape": ["N"], "meaning": "row sums of the rectified C (fitted on an "
                                                                  "anchor vocabulary: of cooc.zarr's C, divided by "
                                                                  "its sum)"},
        "anchor_words": {"dtype": "int64", "shape": ["n"],
                         "meaning": "models fitted on an anchor vocabulary (fit --anchor-words n): its words, "
                                    "sorted; Y, eigenvalues and correction/* are then their n x n block's rectified "
                                    "C, and every word's weights were recovered against these words' columns"},
        "Y": {"dtype": "float64", "shape": ["N", "K"],
              "meaning": "AP and ENN: the eigenvectors of the rectified C's low-rank factor; DC and none: the top-K "
                         "eigenvectors of the rectified C"},
        "eigenvalues": {"dtype": "float64", "shape": ["K"], "meaning": "the eigenvalues that go with Y"},
        "rectified_diagonal": {"dtype": "float64", "shape": ["N"],
                               "meaning": "DC models: the diagonal of the rectified C, which is otherwise cooc.zarr's C "
                                          "divided by attrs.rectified.scale"},
        "correction/rows, correction/cols, correction/values": {
            "dtype": "int64, int64, float64", "shape": ["nnz"],
            "meaning": "AP and ENN models: the upper triangle of the sparse part E of the rectified C "
                       "(ENN: its non-negativity correction; AP: what its last clip added, max(-L, 0)); "
                       "C_rect = Y diag(max(eigenvalues, 0)) Y^T + E + attrs.low_rank.shift"},
        "trace/<key>": {"dtype": "float64", "shape": ["iterations"],
                        "meaning": "AP trace: delta (absolute ||C_t - C_t-1||_F), relative_change (delta / "
                                   "||C_t||_F, what --tol compares), dist_psd, dist_normalized, dist_nonnegative, "
                                   "eig_residual, n_matmat, seconds; ENN trace: relative_change (of Y Y^T), "
                                   "correction_sum, correction_nnz, shift, eig_residual, n_matmat, seconds; "
                                   "refined models: bound_per_word (VB: the bound per token; CVB0: the training "
                                   "log likelihood per token), relative_change (of the word-topic counts), "
                                   "inner_iterations, seconds, alpha_sum, eta, overrelaxation (the step the "
                                   "next counts took along the sweep's update, 1: plain; one per sweep), "
                                   "validation_perplexity (entering each sweep, then of the final topics; NaN "
                                   "without validation documents)"},
        "alpha": {"dtype": "float64", "shape": ["K"],
                  "meaning": "refined and Gibbs models: the document-topic Dirichlet prior"},
        "lambda": {"dtype": "float64", "shape": ["N", "K"],
                   "meaning": "refined models: the expected word-topic counts plus eta (VB: the topics' variational "
                              "Dirichlet parameters); B = lambda / column sums"},
        "doc_topics/part-NNNNN.parquet": {"format": "parquet, the doc_topics schema",
                                          "meaning": "refined models: each training document's topic weights (VB: "
                                                     "normalised gamma; CVB0: N_d + alpha normalised); "
                                                     "doc_topics/_infer.json names the model and its topics"},
    },
    "attrs": {
        "schema_version": "int", "name": "str", "params": "object: every fit parameter",
        "n_iter": "int", "legality": "float: sum of A before normalisation",
        "final_eig_residual": "float", "n_words": "int", "tile_size": "int", "vocab_hash": "str",
        "cooccurrence": "object: n_docs, n_tokens, entry_sum, corpus_manifest of the cooc store",
        "heldout_fraction": "float: the documents held out of training (see cooc.zarr); evaluate scores "
                            "held-out perplexity only on fractions up to this",
        "low_rank": "AP and ENN models: {shift, correction_nnz, correction_sum, form} of the low-rank rectified C",
        "anchor_words": "models fitted on an anchor vocabulary: {n, chosen_by ('tf-idf'), block_mass "
                        "(the block's share of C's sum)}",
        "rectified": "DC and none (Baseline) models: {form, scale}: the rectified C is cooc.zarr's C / scale (DC: "
                     "with rectified_diagonal), read from the store while its provenance equals attrs.cooccurrence "
                     "(after cooccur --update or a rebuild, refit)",
        "source": "refined models: {name, rectifier} of the spectral model refined",
        "start": "refined models: where the run kept started: 'spectral' (source) or 'chain' (a Gibbs chain's topics)",
        "training": "refined models: {n_docs, n_tokens} trained on (with a refit, the validation documents too)",
        "bound_per_word": "refined models: the final bound (VB) or training log likelihood (CVB0) per token",
        "stopped": "refined models: what ended the sweeps: 'sweeps', 'tol', 'validation' (a candidate: or 'dropped')",
        "averaged_states": "refined models: its word-topic counts are the mean of the run's last this many states",
        "eta": "refined models: the final topics' topic-word prior (learned with eta='auto', chosen if a list)",
        "drawn_sweeps": "refined models: the sweeps that drew their counts (of the chosen run; its refit draws none)",
        "candidates": "refined models that chose among candidates, else null: [{method, start, eta, drawn_sweeps, "
                      "validation_perplexity, sweeps, stopped, returned_state, gain, gain_se, specificity}] of each "
                      "run: the validation perplexity and specificity of the state it returns (1: its start); its "
                      "validation log likelihood per token minus the best soft run's, and the paired error; the lowest "
                      "perplexity chose among the soft and among the drawn runs (not those dropped or returning their "
                      "start), a drawn one kept unless its gain was below -DRAWN_MARGIN_SE errors",
        "validation_fraction": "refined models: the validation documents' fraction (left out of the sweeps)",
        "refit": "refined models: {sweeps, n_docs, seconds} of the refit (soft sweeps on from the chosen state "
                 "on the training and validation documents), or null",
        "validation": "refined models: {n_docs, n_tokens, sample, start_perplexity, final_perplexity} of the "
                      "validation documents scored (a sample by id), by the exact fold-in with few passes",
        "heldout": "refined models: {n_tokens, start_perplexity, final_perplexity} of the held-out documents under "
                   "the start's and the refined topics (VB fold-in); sampled_fold_in: ~2,000 by the exact one (warns)",
        "warnings": "refined models: the warnings given (e.g. ended worse than its start on held-out documents)",
        "created": "str", "versions": "object",
    },
}
"""Layout of a fitted model group."""


def _type_name(t: pa.DataType) -> str:
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list<{_type_name(t.value_type)}>"
    return str(t)


def check_schema(actual: pa.Schema, expected: pa.Schema, source: str) -> None:
    """Raise if ``actual`` lacks a field of ``expected`` or has it with another type.

    Parameters
    ----------
    actual : pyarrow.Schema
        Schema read from the file.
    expected : pyarrow.Schema
        :data:`DOCUMENT_SCHEMA` or :data:`VOCAB_SCHEMA`.
    source : str
        File name used in the message.

    Raises
    ------
    CorpusSchemaError
        Naming the file and the first field that is missing or mistyped.
    """
    for field in expected:
        idx = actual.get_field_index(field.name)
        if idx < 0:
            raise CorpusSchemaError(
                f"{source}: missing column {field.name!r} (expected {_type_name(field.type)}); "
                f"columns present: {actual.names}"
            )
        got = actual.field(idx).type
        if not got.equals(field.type) and not _compatible(got, field.type):
            raise CorpusSchemaError(
                f"{source}: column {field.name!r} has type {_type_name(got)}, "
                f"expected {_type_name(field.type)}"
            )


def _compatible(got: pa.DataType, want: pa.DataType) -> bool:
    # Lists compare by value type (the item field's name and nullability are not part of the contract).
    if pa.types.is_list(got) and pa.types.is_list(want):
        return got.value_type.equals(want.value_type)
    if pa.types.is_large_string(got) and pa.types.is_string(want):
        return True
    return False


def _row_of(position: int, offsets: np.ndarray) -> int:
    return int(np.searchsorted(offsets, position, side="right") - 1)


def validate_documents(
    table: pa.Table, n_words: int | None, source: str, row_offset: int = 0
) -> None:
    """Check the values of a block of documents against :data:`DOCUMENT_SCHEMA`.

    Vectorised over the block; the first violation is reported.

    Parameters
    ----------
    table : pyarrow.Table
        Columns ``doc_id``, ``word_ids``, ``counts`` (already schema-checked).
    n_words : int or None
        Vocabulary size N; word ids must be below it (not checked if None).
    source : str
        File name used in messages.
    row_offset : int, default=0
        Row number of the block's first row within ``source``.

    Raises
    ------
    CorpusSchemaError
        Naming ``source``, the row, the doc_id and the field.
    """
    if table.num_rows == 0:
        return
    for name in ("doc_id", "word_ids", "counts"):
        col = table.column(name)
        if col.null_count:
            row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise CorpusSchemaError(f"{source}: row {row_offset + row}: field {name!r} is null")
    ids = table.column("word_ids").combine_chunks()
    cnt = table.column("counts").combine_chunks()
    doc_ids = table.column("doc_id")

    def where(row: int) -> str:
        return f"{source}: row {row_offset + row} (doc_id {doc_ids[row].as_py()!r})"

    id_len = ids.value_lengths().to_numpy(zero_copy_only=False)
    cnt_len = cnt.value_lengths().to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(id_len != cnt_len)
    if bad.size:
        r = int(bad[0])
        raise CorpusSchemaError(
            f"{where(r)}: field 'counts' has {cnt_len[r]} entries but 'word_ids' has {id_len[r]}; "
            "expected the same length"
        )
    offsets = np.concatenate([[0], np.cumsum(id_len)])
    values = ids.flatten().to_numpy(zero_copy_only=False)
    counts = cnt.flatten().to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(counts <= 0)
    if bad.size:
        r = _row_of(int(bad[0]), offsets)
        raise CorpusSchemaError(
            f"{where(r)}: field 'counts' has value {counts[bad[0]]}; expected every count > 0"
        )
    bad = np.flatnonzero(values < 0)
    if n_words is not None:
        bad = np.flatnonzero((values < 0) | (values >= n_words))
    if bad.size:
        r = _row_of(int(bad[0]), offsets)
        bound = f"[0, {n_words})" if n_words is not None else ">= 0"
        raise CorpusSchemaError(
            f"{where(r)}: field 'word_ids' has value {values[bad[0]]}; expected ids in {bound}"
        )
    if values.size > 1:
        step = np.diff(values.astype(np.int64))
        starts = np.zeros(values.size, dtype=bool)
        starts[offsets[:-1][id_len > 0]] = True
        bad = np.flatnonzero((step <= 0) & ~starts[1:])
        if bad.size:
            pos = int(bad[0]) + 1
            r = _row_of(pos, offsets)
            raise CorpusSchemaError(
                f"{where(r)}: field 'word_ids' is not strictly increasing "
                f"({values[pos - 1]} then {values[pos]}); expected sorted ids without repeats"
            )


def validate_vocabulary(table: pa.Table, source: str) -> None:
    """Check a vocabulary table: dense ``word_id`` in row order, unique words, df and tf >= 0.

    Raises
    ------
    CorpusSchemaError
        Naming ``source``, the row and the field.
    """
    check_schema(table.schema, VOCAB_SCHEMA, source)
    for name in VOCAB_SCHEMA.names:
        col = table.column(name)
        if col.null_count:
            row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise CorpusSchemaError(f"{source}: row {row}: field {name!r} is null")
    word_id = table.column("word_id").to_numpy()
    bad = np.flatnonzero(word_id != np.arange(word_id.size))
    if bad.size:
        r = int(bad[0])
        raise CorpusSchemaError(
            f"{source}: row {r}: field 'word_id' is {word_id[r]}; expected {r} (dense ids 0..N-1 in row order)"
        )
    words = table.column("word").to_pylist()
    seen: dict[str, int] = {}
    for r, w in enumerate(words):
        if w in seen:
            raise CorpusSchemaError(
                f"{source}: row {r}: field 'word' repeats {w!r} (first at row {seen[w]}); expected unique words"
            )
        seen[w] = r
    for name in ("df", "tf"):
        v = table.column(name).to_numpy()
        bad = np.flatnonzero(v < 0)
        if bad.size:
            r = int(bad[0])
            raise CorpusSchemaError(f"{source}: row {r}: field {name!r} is {v[r]}; expected >= 0")


def _schema_json(schema: pa.Schema, doc: str) -> dict[str, Any]:
    fields = []
    for f in schema:
        t = f.type
        entry: dict[str, Any] = {"name": f.name, "type": str(t), "nullable": f.nullable}
        if pa.types.is_list(t):
            entry["type"] = f"list<{t.value_type}>"
            entry["item_nullable"] = t.value_field.nullable
        fields.append(entry)
    return {"schema_version": SCHEMA_VERSION, "description": doc, "fields": fields}


def published_schemas() -> dict[str, str]:
    """The files of ``data_schemas/`` as they must read, by file name.

    Returns
    -------
    dict of str to str
        JSON text for ``document_shard.schema.json``, ``vocabulary.schema.json``,
        ``cooccurrence.zarr.json`` and ``model.zarr.json``.
    """
    docs = {
        "document_shard.schema.json": _schema_json(
            DOCUMENT_SCHEMA,
            "A corpus shard <root>/corpus/part-NNNNN.parquet: one row per document. doc_id is unique "
            "across the corpus; word_ids strictly increasing, each < N; counts each > 0, same length "
            "as word_ids. Row groups hold a configurable number of documents.",
        ),
        "vocabulary.schema.json": _schema_json(
            VOCAB_SCHEMA,
            "<root>/corpus/vocab.parquet: one row per word. word_id is dense 0..N-1 in row order "
            "(ranked by tf-idf at ingest); word unique; df and tf count documents and tokens in the "
            "stored corpus.",
        ),
        "labels.schema.json": _schema_json(
            LABELS_SCHEMA,
            "<root>/corpus/labels.parquet (optional; jsmf ingest --labels): display labels of words, e.g. movie "
            "titles for MovieLens item ids. word_id refers to vocab.parquet; words without a row show as "
            "themselves.",
        ),
        "doc_topics.schema.json": _schema_json(
            DOC_TOPICS_SCHEMA,
            "<root>/doc_topics/<model>/part-NNNNN.parquet (jsmf infer): one row per document of the corpus. "
            "topics holds the document's K topic weights (a fixed-size list of K in the files; they sum to 1), "
            "its posterior mean under the model (LDA's fold-in with the model's B and document prior). "
            "Beside the parts, _infer.json: {model, n_topics, topics}, topics[k] naming column k of topics "
            "('[anchor] three top words', with corpus labels where the corpus has them, separated by ' | ' "
            "when a label holds a space).",
        ),
        "new_doc_topics.schema.json": _schema_json(
            NEW_DOC_TOPICS_SCHEMA,
            "jsmf transform's output (a directory of part-NNNNN.parquet, one per block of input documents): one "
            "row per new document, tokenised by the run's own rules. n_tokens counts its tokens in the model's "
            "vocabulary, n_unknown those that are not (stop words included); topics as in doc_topics (for a "
            "document with no known token the model's prior mean: uniform for a spectral model). Beside the parts, _infer.json as for doc_topics.",
        ),
        "cooccurrence.zarr.json": {"schema_version": SCHEMA_VERSION, **COOCCURRENCE_LAYOUT},
        "model.zarr.json": {"schema_version": SCHEMA_VERSION, **MODEL_LAYOUT},
    }
    return {name: json.dumps(body, indent=2, sort_keys=False) + "\n" for name, body in docs.items()}
