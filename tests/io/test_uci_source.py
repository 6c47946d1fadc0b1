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
