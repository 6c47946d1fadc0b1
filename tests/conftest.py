"""Shared fixtures: data shipped in the repository, a hand-checkable corpus, a local scheduler."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import dask
import numpy as np
import pytest
from hypothesis import settings

# CI (``.ci/run`` sets CI=true) draws the same examples every run, so a submission's result does not depend
# on luck; locally every run explores new ones (HYPOTHESIS_PROFILE=ci reproduces CI's).
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "explore"))


def examples(n: int) -> int:
    """A property test's number of examples: ``n``, or ``HYPOTHESIS_EXAMPLES`` when set (``HYPOTHESIS_EXAMPLES=200
    pytest tests/kernels`` explores more)."""
    return int(os.environ.get("HYPOTHESIS_EXAMPLES") or n)

import jsmf_dask  # noqa: F401  (registers the jsmf dask.config defaults before any test sets jsmf.* keys)

DATA = Path(__file__).parent / "data"
REUTERS_DOCWORD = DATA / "reuters395" / "docword.reuters395.txt.gz"
REUTERS_VOCAB = DATA / "reuters395" / "vocab.reuters395.txt"


@pytest.fixture(autouse=True)
def local_scheduler():
    """Graphs run in-process unless a test starts a cluster; no progress bars."""
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        yield


def write_uci(directory: Path, docs: list[dict[int, int]], vocab: list[str], *, name: str = "t",
              header: tuple[int, int, int] | None = None, lines: list[str] | None = None) -> Path:
    """Write ``docword.<name>.txt`` (1-based ids) and ``vocab.<name>.txt``; return the docword path.

    ``header`` overrides (D, W, NNZ); ``lines`` replaces the body verbatim.
    """
    body = lines if lines is not None else [
        f"{d + 1} {w + 1} {c}" for d, doc in enumerate(docs) for w, c in sorted(doc.items())
    ]
    D, W, NNZ = header if header is not None else (len(docs), len(vocab), len(body))
    path = directory / f"docword.{name}.txt"
    path.write_text("\n".join([str(D), str(W), str(NNZ), *body]) + "\n")
    (directory / f"vocab.{name}.txt").write_text("\n".join(vocab) + "\n")
    return path


def read_uci(path: Path) -> list[dict[int, int]]:
    """Documents of a UCI docword file as 0-based ``{word: count}`` dicts, by docID."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        D = int(f.readline()); f.readline(); f.readline()
        docs: list[dict[int, int]] = [dict() for _ in range(D)]
        for line in f:
            d, w, c = map(int, line.split())
            docs[d - 1][w - 1] = c
    return docs


def dense_cooccurrence(docs: list[dict[int, int]], n_words: int, weighting: str = "documents") -> np.ndarray:
    """Slow dense reference: C = Σ_m w_m (h hᵀ − diag h)/(n(n−1)) over n >= 2, divided by its sum; w_m = 1
    (``weighting='documents'``, the paper's eq. 1) or n (``'tokens'``)."""
    C = np.zeros((n_words, n_words))
    for doc in docs:
        h = np.zeros(n_words)
        for w, c in doc.items():
            h[w] += c
        n = h.sum()
        if n >= 2:
            C += (n if weighting == "tokens" else 1.0) * (np.outer(h, h) - np.diag(h)) / (n * (n - 1))
    return C / C.sum()


def listing(root: Path) -> list[str]:
    """Every path below ``root`` (hidden ones included), for nothing-half-written checks."""
    if not root.exists():
        return []
    found = []
    for here, dirs, files in os.walk(root):
        found.extend(os.path.relpath(os.path.join(here, name), root) for name in dirs + files)
    return sorted(found)


class FakeClient:
    """A client stand-in for the planning functions: a scheduler that answers ``identity`` with ``workers``
    (``{address: {"nthreads": ..., "memory_limit": ...}}``), ``failures`` times with a connection error first."""

    def __init__(self, workers: dict, failures: int = 0):
        self.workers, self.failures, self.queries = workers, failures, 0
        self.scheduler = self
        self.address = "tcp://127.0.0.1:1"

    def identity(self, n_workers: int = 0) -> dict:
        self.queries += 1
        if self.queries <= self.failures:
            raise OSError("connection reset by peer")
        return {"workers": self.workers if n_workers == -1 else {}}

    def sync(self, func, *args, **kwargs):
        return func(*args, **kwargs)


@pytest.fixture(scope="session")
def reuters_cbar(tmp_path_factory):
    """C̄ and 10 anchors of the Reuters corpus (1,500 words), from the stages, for solver tests."""
    from jsmf_dask import cooccur, ingest, open_cooccurrence
    from jsmf_dask.kernels.factorize import find_anchors

    root = tmp_path_factory.mktemp("reuters-cbar")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        ingest(root, [str(REUTERS_DOCWORD)], vocab_size=1500)
        cooccur(root)
    C = open_cooccurrence(f"{root}/cooc.zarr").C[:]
    anchors, _ = find_anchors(C, 10)
    p = C.sum(axis=1)
    return C / np.where(p > 0, p, 1)[:, None], anchors
