"""Tokenisation of raw text into word counts (how the text sources read a document)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from functools import lru_cache

__all__ = ["tokenize", "count_tokens", "strip_email"]

# Runs of letters (any script); digits, underscores, punctuation, DEL (0x7F)
# and the replacement character all separate tokens.
_LETTERS = r"[^\W\d_]"


@lru_cache(maxsize=16)
def _words_of_at_least(min_length: int) -> re.Pattern:
    """Whole runs of at least ``min_length`` letters (a shorter run fails at each of its positions, so no part
    of a run is ever matched: the same tokens as filtering the runs by length, in half the time)."""
    return re.compile(f"{_LETTERS}{{{max(1, min_length)},}}")


def tokenize(text: str, *, min_length: int = 3) -> list[str]:
    """Split ``text`` into lower-case alphabetic tokens of at least ``min_length`` letters.

    Parameters
    ----------
    text : str
        Raw text.
    min_length : int, default=3
        Shorter tokens are dropped.

    Returns
    -------
    list of str

    Examples
    --------
    >>> tokenize("The cat's 2 hats, e.g. AND-gates")
    ['the', 'cat', 'hats', 'and', 'gates']
    """
    return _words_of_at_least(min_length).findall(text.lower())


_HEADER_LINE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*:")
_ATTRIBUTION = re.compile(r"(writes|wrote|said)\s*:\s*$", re.IGNORECASE)
_QUOTED = re.compile(r"^\s*[>|]")
_SIGNATURE = re.compile(r"^--+\s*$")


def strip_email(text: str) -> str:
    r"""An e-mail or newsgroup post without its header block, quoted replies and signature.

    The header block is the leading run of ``Name: value`` lines (with their
    indented continuations) up to the first blank line; quoted lines start
    with ``>`` or ``|``, with the attribution line before them (``… writes:``);
    the signature is everything after the last line of dashes (``--``).

    Examples
    --------
    >>> strip_email("From: a@b\nSubject: x\n\nBody text\n> quoted\n-- \nSig")
    'Body text'
    """
    lines = text.splitlines()
    if lines and _HEADER_LINE.match(lines[0]):
        end = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
        lines = lines[end + 1:]
    cut = max((i for i, line in enumerate(lines) if _SIGNATURE.match(line)), default=None)
    if cut is not None:
        lines = lines[:cut]
    kept = [line for line in lines if not _QUOTED.match(line) and not _ATTRIBUTION.search(line)]
    return "\n".join(kept).strip()


def count_tokens(
    text: str, *, min_length: int = 3, stopwords: Collection[str] = ()
) -> Counter[str]:
    """Token counts of ``text`` (see :func:`tokenize`), without ``stopwords``."""
    counts = Counter(tokenize(text, min_length=min_length))
    for w in stopwords:
        counts.pop(w, None)
    return counts
