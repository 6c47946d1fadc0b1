"""Real text corpora from the machine itself, unseen by every choice the project made: its man pages, the
docstrings of its Python packages and its packages' change logs, as JSONL (``id``, ``text``) that ``jsmf ingest``
reads.

* ``manpages``: every page of ``/usr/share/man/man1`` … ``man8`` (a link or ``.so`` include counted once), roff
  requests dropped but the text of the few that carry it (``.SH``, ``.B``, ``.I``, ``.TP`` …), escapes
  removed; pages of fewer than 20 words left out. On the machine of session 39: 20,268 pages, 82% of them one
  command line tool's reference pages (a heavily templated corpus).
* ``docstrings``: the docstring of every module, class and function of the standard library and of the
  packages beside this one (its site-packages), test directories left out, each text once; fewer than 10 words
  left out. Session 39: 58,051 docstrings, 45 tokens on average after ``ingest``'s curation (short documents).
* ``changelogs``: every entry of the Debian change logs under ``/usr/share/doc`` (``changelog.Debian.gz``), the
  text between an entry's header line (``package (version) …; urgency=…``) and its signature line (`` -- name
  date``), each text once (binary packages of one source share a log). Session 51: 10,366 entries, 24 words the
  median, 9,417 documents and 68 tokens on average after curation; each package's own vocabulary (drivers,
  compilers, CVEs) makes a heavy tail of rare words.

Usage::

    python -m pipelines.benchmarks.machine_corpora manpages out/manpages.jsonl
    python -m pipelines.benchmarks.quality --corpora manpages,docstrings --topics 20,50 --runs 1 --peers gibbs
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import re
import sys
import sysconfig
from pathlib import Path

__all__ = ["CORPORA", "write_man_pages", "write_docstrings", "write_changelogs"]

_CHANGELOG_HEADER = re.compile(r"^\S.*\(.*\).*;\s*urgency=")
_KEPT_REQUEST = re.compile(r"^[.'](SH|SS|B|I|BR|IR|RB|RI|BI|IB|IP|TP|Nm|Nd|Sh|Fl|Ar|Pa|Xr)\s+(.*)")
_ESCAPE = re.compile(r"\\f(\[[^\]]*\]|\(..|.)|\\\*(\[[^\]]*\]|\(..|.)|\\\((..)|\\\[[^\]]*\]|\\[&|^~0:%cdeu/,!\-]"
                     r"|\\s[+-]?\d+|\\[nm]\(?..|\\.")


def _page_text(raw: str) -> str:
    lines = []
    for line in raw.splitlines():
        if line.startswith((".", "'")):
            kept = _KEPT_REQUEST.match(line)
            if kept:
                lines.append(kept.group(2))
            continue
        lines.append(line)
    return _ESCAPE.sub(" ", "\n".join(lines)).replace('"', " ")


def write_man_pages(path: Path, man_dir: Path = Path("/usr/share/man")) -> int:
    """Write the man pages under ``man_dir`` to ``path``; returns how many."""
    seen, n = set(), 0
    with open(path, "w", encoding="utf-8") as out:
        for section in range(1, 9):
            for page in sorted((man_dir / f"man{section}").glob("*")):
                real = page.resolve()
                if real in seen or not real.is_file():
                    continue
                seen.add(real)
                opener = gzip.open if real.suffix == ".gz" else open
                with opener(real, "rt", errors="replace") as f:
                    raw = f.read()
                text = "" if raw.startswith(".so ") else _page_text(raw)
                if len(text.split()) >= 20:
                    out.write(json.dumps({"id": f"man{section}/{page.name}", "text": text}) + "\n")
                    n += 1
    return n


def write_docstrings(path: Path, roots: list[Path] | None = None) -> int:
    """Write the docstrings of the Python files under ``roots`` (default: the standard library and this
    interpreter's site-packages) to ``path``; returns how many."""
    paths = sysconfig.get_paths()
    roots = roots or [Path(paths["purelib"]), Path(paths["stdlib"])]
    seen, n = set(), 0
    with open(path, "w", encoding="utf-8") as out:
        for root in roots:
            for source in sorted(root.rglob("*.py")):
                if "/test" in str(source.relative_to(root.parent)):
                    continue
                try:
                    tree = ast.parse(source.read_text(errors="replace"))
                except (SyntaxError, ValueError, RecursionError):
                    continue
                for node in ast.walk(tree):
                    if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                        continue
                    doc = ast.get_docstring(node)
                    if not doc or len(doc.split()) < 10:
                        continue
                    digest = hashlib.sha1(doc.encode()).hexdigest()
                    if digest in seen:
                        continue
                    seen.add(digest)
                    name = getattr(node, "name", "<module>")
                    out.write(json.dumps({"id": f"{source.relative_to(root)}:{name}:{n}", "text": doc}) + "\n")
                    n += 1
    return n


def write_changelogs(path: Path, doc_dir: Path = Path("/usr/share/doc")) -> int:
    """Write the entries of the Debian change logs under ``doc_dir`` to ``path``; returns how many."""
    seen, n = set(), 0
    with open(path, "w", encoding="utf-8") as out:
        for log in sorted(doc_dir.glob("*/changelog.Debian.gz")):
            try:
                with gzip.open(log, "rt", errors="replace") as f:
                    lines = f.read().splitlines()
            except (OSError, EOFError):  # a log cut short or not gzip
                continue
            body: list[str] = []
            for line in lines:
                if _CHANGELOG_HEADER.match(line):
                    body = []
                elif line.startswith(" -- "):
                    text = " ".join(part.strip() for part in body if part.strip())
                    digest = hashlib.sha1(text.encode()).hexdigest()
                    if text and digest not in seen:
                        seen.add(digest)
                        out.write(json.dumps({"id": f"{log.parent.name}:{n}", "text": text}) + "\n")
                        n += 1
                    body = []
                else:
                    body.append(line)
    return n


#: name → the function that writes it.
CORPORA = {"manpages": write_man_pages, "docstrings": write_docstrings, "changelogs": write_changelogs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", choices=sorted(CORPORA))
    p.add_argument("out", type=Path)
    args = p.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print(f"{CORPORA[args.corpus](args.out)} documents written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
