"""The published schemas equal the code's, and validation catches each rule."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from jsmf_dask.exceptions import CorpusSchemaError
from jsmf_dask.io.schema import (
    DOCUMENT_SCHEMA,
    VOCAB_SCHEMA,
    check_schema,
    published_schemas,
    validate_documents,
    validate_vocabulary,
)

SCHEMAS = Path(__file__).parents[2] / "data_schemas"


@pytest.mark.parametrize("name", sorted(published_schemas()))
def test_data_schemas_files_match_code(name):
    assert (SCHEMAS / name).read_text() == published_schemas()[name], (
        f"data_schemas/{name} is stale; regenerate it from jsmf_dask.io.schema.published_schemas()"
    )


def docs(ids, words, counts):
    return pa.table(
        {"doc_id": pa.array(ids, pa.string()), "word_ids": pa.array(words, pa.list_(pa.int32())),
         "counts": pa.array(counts, pa.list_(pa.int32()))}
    )


def test_valid_documents_pass_including_empty_lists():
    table = docs(["a", "b", "c"], [[0, 3], [], [1]], [[1, 2], [], [5]])
    assert validate_documents(table, 4, "f") is None  # word ids below N = 4, an empty document allowed
    with pytest.raises(CorpusSchemaError, match=r"row 10 \(doc_id 'a'\): field 'word_ids' has value 3"):
        validate_documents(table, 3, "f", 10)  # the same table against N = 3: its word id 3 is out of range


@pytest.mark.parametrize(
    "table, match",
    [
        (docs(["a", "b"], [[0, 1], [2, 2]], [[1, 1], [1, 1]]), r"f: row 11 \(doc_id 'b'\): .*not strictly increasing \(2 then 2\)"),
        (docs(["a", "b"], [[0, 1], [3, 4]], [[1, 1], [1, 1]]), r"row 11 \(doc_id 'b'\): field 'word_ids' has value 4"),
        (docs(["a", "b"], [[0, -1], [3]], [[1, 1], [1]]), r"row 10 \(doc_id 'a'\): field 'word_ids' has value -1"),
        (docs(["a", "b"], [[0, 1], [3]], [[1, -2], [1]]), r"row 10 .*field 'counts' has value -2"),
        (docs(["a", None], [[0, 1], [3]], [[1, 1], [1]]), r"f: row 11: field 'doc_id' is null"),
        (docs(["a", "b"], [[0, 1], None], [[1, 1], [1]]), r"f: row 11: field 'word_ids' is null"),
    ],
)
def test_document_violations_name_row_and_field(table, match):
    with pytest.raises(CorpusSchemaError, match=match):
        validate_documents(table, 4, "f", row_offset=10)


def test_schema_check_accepts_large_string_and_rejects_int64_ids():
    ok = pa.schema([("doc_id", pa.large_string()), ("word_ids", pa.list_(pa.int32())), ("counts", pa.list_(pa.int32()))])
    check_schema(ok, DOCUMENT_SCHEMA, "f")
    bad = pa.schema([("doc_id", pa.string()), ("word_ids", pa.list_(pa.int64())), ("counts", pa.list_(pa.int32()))])
    with pytest.raises(CorpusSchemaError, match=r"f: column 'word_ids' has type list<int64>, expected list<int32>"):
        check_schema(bad, DOCUMENT_SCHEMA, "f")


def vocab(ids, words):
    return pa.table({"word_id": pa.array(ids, pa.int32()), "word": words,
                     "df": pa.array([1] * len(ids), pa.int64()), "tf": pa.array([1] * len(ids), pa.int64())},
                    schema=VOCAB_SCHEMA)


def test_vocabulary_rules():
    validate_vocabulary(vocab([0, 1], ["a", "b"]), "v")
    with pytest.raises(CorpusSchemaError, match=r"v: row 1: field 'word_id' is 2; expected 1"):
        validate_vocabulary(vocab([0, 2], ["a", "b"]), "v")
    with pytest.raises(CorpusSchemaError, match=r"v: row 1: field 'word' repeats 'a' \(first at row 0\)"):
        validate_vocabulary(vocab([0, 1], ["a", "a"]), "v")
