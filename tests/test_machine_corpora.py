"""The benchmarks' corpora of a machine's own text: man pages and docstrings, on pages and files made here."""

from __future__ import annotations

import gzip
import json

from pipelines.benchmarks.machine_corpora import write_docstrings, write_man_pages

PAGE = r""".TH LS 1
.SH NAME
ls \- list directory contents
.SH DESCRIPTION
List information about the \fBFILE\fRs (the current directory by default), sorting entries
alphabetically if none of \-\-sort is specified. Mandatory arguments to long options are mandatory too.
.TP
\fB\-a\fR, \fB\-\-all\fR
do not ignore entries starting with .
"""


def test_man_pages_keep_the_text_of_each_page_once(tmp_path):
    man = tmp_path / "man"
    (man / "man1").mkdir(parents=True)
    (man / "man8").mkdir()
    with gzip.open(man / "man1" / "ls.1.gz", "wt") as f:
        f.write(PAGE)
    (man / "man1" / "dir.1.gz").symlink_to(man / "man1" / "ls.1.gz")  # the same page under another name
    (man / "man8" / "vdir.8").write_text(".so man1/ls.1\n")  # an include: no text of its own
    (man / "man8" / "tiny.8").write_text(".SH NAME\ntiny \\- too short\n")  # under 20 words
    out = tmp_path / "pages.jsonl"
    assert write_man_pages(out, man) == 1
    (doc,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert doc["id"] in ("man1/dir.1.gz", "man1/ls.1.gz")
    words = doc["text"].split()
    assert "NAME" in words and "list" in words and "FILE" in words and "all" in words
    assert not any(r in doc["text"] for r in (".TH", ".SH", ".TP", "\\f", "\\-"))  # no requests, no escapes


def test_docstrings_once_each_and_not_from_tests(tmp_path):
    pkg = tmp_path / "site" / "pkg"
    (pkg / "tests").mkdir(parents=True)
    long = "Compute the sum of the values along an axis, skipping missing ones, as a float."
    (pkg / "core.py").write_text(f'"""{long}"""\n\ndef f():\n    """{long}"""\n\n\nclass C:\n'
                                 '    """Short one."""\n')
    (pkg / "tests" / "test_core.py").write_text('"""A test module that says a great many words about nothing."""\n')
    (pkg / "broken.py").write_text("def (:\n")
    out = tmp_path / "docs.jsonl"
    assert write_docstrings(out, [tmp_path / "site"]) == 1
    (doc,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert doc["text"] == long and doc["id"].startswith("pkg/core.py:")
