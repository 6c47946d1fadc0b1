"""The benchmarks' corpora of a machine's own text: man pages, docstrings and change logs, on files made here."""

from __future__ import annotations

import gzip
import json

from pipelines.benchmarks.machine_corpora import write_changelogs, write_docstrings, write_man_pages

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


CHANGELOG = """hello (2.10-3) unstable; urgency=medium

  * Fix the build with the new compiler.
    Closes: #1000001.
  * Update the watch file.

 -- Jane Doe <jane@example.org>  Mon, 02 Jan 2023 13:06:21 +0100

hello (2.10-2) unstable; urgency=low

  * Fix the build with the new compiler.
    Closes: #1000001.
  * Update the watch file.

 -- Jane Doe <jane@example.org>  Sun, 01 Jan 2023 10:00:00 +0100

hello (2.10-1) unstable; urgency=low

  * New upstream release.

 -- Jane Doe <jane@example.org>  Sat, 31 Dec 2022 09:00:00 +0100
"""


def test_changelogs_keep_each_entry_s_text_once_without_its_header_and_signature(tmp_path):
    for package in ("hello", "hello-doc"):  # binary packages of one source share its log
        (tmp_path / package).mkdir()
        with gzip.open(tmp_path / package / "changelog.Debian.gz", "wt") as f:
            f.write(CHANGELOG)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "changelog.Debian.gz").write_bytes(b"not gzip")
    out = tmp_path / "logs.jsonl"
    assert write_changelogs(out, tmp_path) == 2
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [d["text"] for d in docs] == [
        "* Fix the build with the new compiler. Closes: #1000001. * Update the watch file.",
        "* New upstream release.",
    ]
    assert [d["id"] for d in docs] == ["hello:0", "hello:1"]
