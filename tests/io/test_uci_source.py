"""The UCI reader's two readings: integers parsed straight away, and the text reading that names a bad line."""

from __future__ import annotations

import pytest

from jsmf_dask.exceptions import InputError
from jsmf_dask.io.sources.uci import UCIPartition
from tests.conftest import read_uci, write_uci, REUTERS_DOCWORD


def _tables(part: UCIPartition, *, typed: bool):
    from jsmf_dask.io.sources._common import ReadSummary, open_input

    with open_input(part.url) as f:
        n_docs, _, nnz = (int(f.readline()) for _ in range(3))
        return list(part._body(f, n_docs, nnz, ReadSummary(), typed=typed))


def test_the_typed_reading_yields_what_the_text_reading_does():
    vocab = (REUTERS_DOCWORD.parent / "vocab.reuters395.txt").read_text().splitlines()
    part = UCIPartition(str(REUTERS_DOCWORD), len(vocab), "vocab", block_size=100, batch_bytes=4096)
    typed, text = _tables(part, typed=True), _tables(part, typed=False)
    assert len(typed) == len(text) == 4  # 395 documents in blocks of 100, read in many small batches
    for a, b in zip(typed, text, strict=True):
        assert a.equals(b)


@pytest.mark.parametrize("bad", ["x", "1.5", "9" * 30])
def test_a_field_that_is_no_integer_is_named_by_its_line_in_any_batch(tmp_path, bad):
    docs = read_uci(REUTERS_DOCWORD)[:40]
    vocab = [f"w{i}" for i in range(max(w for d in docs for w in d) + 1)]
    lines = [f"{i + 1} {w + 1} {c}" for i, d in enumerate(docs) for w, c in sorted(d.items())]
    lines[len(lines) - 5] = lines[len(lines) - 5].rsplit(" ", 1)[0] + f" {bad}"  # the count of a late line
    path = write_uci(tmp_path, docs, vocab, lines=lines)
    part = UCIPartition(str(path), len(vocab), "vocab", batch_bytes=512)  # that line in a late batch
    with pytest.raises(InputError, match=rf"line {3 + len(lines) - 4}: field count is '{bad}'; expected an integer"):
        list(part.read())


def _body_lines(docs):
    return [f"{i + 1} {w + 1} {c}" for i, d in enumerate(docs) for w, c in sorted(d.items())]


@pytest.mark.parametrize("batch_bytes", [256, 4096, 1 << 20])
def test_words_out_of_order_within_a_document_read_as_in_order(tmp_path, batch_bytes):
    # a file in (docID, wordID) order takes the reader's fast path; the same lines with each document's words
    # reversed take the sort: the tables must be the same, whatever the batches
    docs = read_uci(REUTERS_DOCWORD)[:60]
    vocab = [f"w{i}" for i in range(max(w for d in docs for w in d) + 1)]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ordered = write_uci(tmp_path / "a", docs, vocab)
    shuffled_lines = [f"{i + 1} {w + 1} {c}" for i, d in enumerate(docs) for w, c in sorted(d.items(), reverse=True)]
    shuffled = write_uci(tmp_path / "b", docs, vocab, lines=shuffled_lines)
    read = [list(UCIPartition(str(p), len(vocab), "vocab", block_size=25, batch_bytes=batch_bytes).read())
            for p in (ordered, shuffled)]
    assert len(read[0]) == len(read[1]) == 3
    for a, b in zip(*read, strict=True):
        assert a.equals(b)


@pytest.mark.parametrize("where", [0.1, 0.5, 0.97])
@pytest.mark.parametrize("fault", ["repeat", "docID back", "wordID range", "count"])
def test_a_bad_line_in_any_batch_is_named_by_its_number(tmp_path, where, fault):
    # the line numbers come from the batch's and the carried document's first lines, not from stored arrays:
    # the fault lands in early, middle and late batches of 512 bytes, often in a document split between two
    docs = read_uci(REUTERS_DOCWORD)[:40]
    vocab = [f"w{i}" for i in range(max(w for d in docs for w in d) + 1)]
    lines = _body_lines(docs)
    i = int(where * len(lines))
    while lines[i].split()[0] != lines[i - 1].split()[0]:  # a line whose document has a line before it
        i += 1
    doc, word, _ = lines[i].split()
    prev_doc, prev_word, _ = lines[i - 1].split()
    if fault == "repeat":  # the line before it again: line i + 4 repeats line i + 3
        lines[i] = f"{prev_doc} {prev_word} 7"
        expected = rf"line {i + 4}: docID {doc} wordID {prev_word} repeats line {i + 3}"
    elif fault == "docID back":
        assert int(doc) > 1
        lines[i] = f"{int(doc) - 1} {word} 1"
        expected = rf"line {i + 4}: docID {int(doc) - 1} after docID {doc}"
    elif fault == "wordID range":
        lines[i] = f"{doc} {len(vocab) + 1} 1"
        expected = rf"line {i + 4}: wordID is {len(vocab) + 1}; expected in 1\.\.{len(vocab)}"
    else:
        lines[i] = f"{doc} {word} 0"
        expected = rf"line {i + 4}: count is 0; expected > 0"
    path = write_uci(tmp_path, docs, vocab, lines=lines)
    part = UCIPartition(str(path), len(vocab), "vocab", batch_bytes=512)
    with pytest.raises(InputError, match=expected):
        list(part.read())
