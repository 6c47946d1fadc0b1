"""Mutated input files: ``ingest`` either reads them or raises a :class:`~jsmf_dask.exceptions.JSMFError` (the CLI's
one-line error), and a failed ingest leaves nothing behind.

Valid UCI bag-of-words, ratings, text and basket files are mutated line by line (a line dropped, doubled, cut, a
field replaced by or a junk value inserted: empty, negative, fractional, huge, NaN, NUL, a BOM, a stray quote or
delimiter). Session 49 ran the same mutations 1,050 times in a script: one case (a ratings header naming the item
column twice) raised pyarrow's ``KeyError`` through the CLI; it is a case of ``test_bad_input.py`` now, and this
test keeps the rest of that search in the suite.
"""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jsmf_dask import ingest
from jsmf_dask.exceptions import JSMFError
from tests.conftest import examples, listing

JUNK = ["", " ", "-1", "0", "1.5", "nan", "inf", "1e308", "99999999999999999999", "\x00", "\ufeff", ",", '"', "\t",
        "a b c", "3 3", "+2", "0x10"]


def _uci(draw) -> tuple[list[str], dict[str, str]]:
    n_docs, n_words = draw(st.integers(1, 6)), draw(st.integers(2, 8))
    pairs = sorted(set(draw(st.lists(st.tuples(st.integers(1, n_docs), st.integers(1, n_words)), min_size=1,
                                     max_size=20))))
    body = [f"{d} {w} {draw(st.integers(1, 5))}" for d, w in pairs]
    vocab = "\n".join(f"w{i}" for i in range(n_words)) + "\n"
    return [str(n_docs), str(n_words), str(len(body)), *body], {"vocab.t.txt": vocab}


def _ratings(draw) -> tuple[list[str], dict[str, str]]:
    rows = draw(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 8), st.sampled_from(["1.0", "3.5", "5", "4"])),
                         min_size=1, max_size=25, unique_by=lambda r: r[:2]))
    return ["userId,movieId,rating,timestamp", *(f"{u},{i},{r},{n}" for n, (u, i, r) in enumerate(rows))], {}


def _text(draw) -> tuple[list[str], dict[str, str]]:
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta"]
    docs = draw(st.lists(st.lists(st.sampled_from(words), max_size=10), min_size=1, max_size=8))
    return ["id,text", *(f'd{i},"{" ".join(doc)}"' for i, doc in enumerate(docs))], {}


def _baskets(draw) -> tuple[list[str], dict[str, str]]:
    items = ["milk", "bread", "eggs", "tea", "jam"]
    return [",".join(b) for b in draw(st.lists(st.lists(st.sampled_from(items), max_size=5), min_size=1,
                                                max_size=10))], {}


FORMATS = {  # the valid file, its name and ingest's arguments
    "uci": (_uci, "docword.t.txt", {}),
    "ratings": (_ratings, "r.csv", {"format": "ratings"}),
    "text": (_text, "t.csv", {"format": "text", "id_column": "id"}),
    "baskets": (_baskets, "b.txt", {"format": "baskets", "delimiter": ","}),
}


@st.composite
def mutated(draw, fmt: str) -> tuple[list[str], dict[str, str]]:
    lines, extra = FORMATS[fmt][0](draw)
    for _ in range(draw(st.integers(1, 3))):
        if not lines:
            lines.append(draw(st.sampled_from(JUNK)))
            continue
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["drop", "insert", "replace field", "cut", "append", "double"]))
        if op == "drop":
            del lines[i]
        elif op == "insert":
            lines.insert(i, draw(st.sampled_from(JUNK)))
        elif op == "replace field":
            fields = lines[i].replace(",", " , ").split(" ")
            fields[draw(st.integers(0, len(fields) - 1))] = draw(st.sampled_from(JUNK))
            lines[i] = " ".join(fields).replace(" , ", ",")
        elif op == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif op == "append":
            lines[i] += draw(st.sampled_from(JUNK))
        else:
            lines.insert(i, lines[i])
    return lines, extra


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_input_is_read_or_refused_cleanly(tmp_path, fmt, data):
    lines, extra = data.draw(mutated(fmt))
    work = tmp_path / f"case-{os.urandom(4).hex()}"
    work.mkdir()
    try:
        name, kwargs = FORMATS[fmt][1], FORMATS[fmt][2]
        (work / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        for other, text in extra.items():
            (work / other).write_text(text, encoding="utf-8")
        root = work / "root"
        try:
            report = ingest(root, [str(work / name)], min_doc_tokens=1, min_doc_words=1, **kwargs)
        except JSMFError as err:
            assert str(err), "an error without a message"
            assert listing(root) == [], f"a failed ingest left {listing(root)}"
        else:
            assert report.n_docs >= 1 and (root / "corpus" / "vocab.parquet").exists()
    finally:
        shutil.rmtree(work, ignore_errors=True)
