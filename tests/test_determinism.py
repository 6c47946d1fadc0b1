"""The same fit gives the same model in fresh processes, near-ties included; a corpus of too low a rank
is a clear error.

Fresh processes matter: a start vector drawn by ARPACK itself, hash-ordered iteration or rounding that
depends on where an array lands in memory change from one process to the next, not within one.
"""

from __future__ import annotations

import subprocess
import sys

import dask
import numpy as np
import pytest

from jsmf_dask import cooccur, fit, ingest, open_model, synth
from jsmf_dask.cli import main
from jsmf_dask.exceptions import RankDeficientError
from jsmf_dask.io.parquet import read_vocabulary
from tests.conftest import listing


def _baskets(path, rng, halves: bool) -> None:
    """3,000 baskets of 3–9 items: from one of two disjoint halves of 14 items (two topics whose words are
    exact ties within each), or from all 14 uniformly (no topic structure: rank 1 after rectification)."""
    items = [f"a{i}" for i in range(7)] + [f"b{i}" for i in range(7)]
    lines = []
    for _ in range(3000):
        pool = (items[:7], items[7:])[rng.integers(2)] if halves else items
        lines.append(",".join(rng.choice(pool, size=int(rng.integers(3, 7 if halves else 10)), replace=False)))
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp("determinism")
    rng = np.random.default_rng(0)
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        for name, halves in (("ties", True), ("flat", False)):
            _baskets(base / f"{name}.txt", rng, halves)
            ingest(base / name, [str(base / f"{name}.txt")], format="baskets")
            cooccur(base / name)
        synth(base / "lda", n_docs=2000, n_words=120, n_topics=5, doc_length=60, seed=2, topics_from="dirichlet")
        cooccur(base / "lda")
    return base


def test_five_fresh_processes_give_bitwise_identical_models(roots):
    code = (
        "import sys, dask\n"
        "from jsmf_dask import fit\n"
        "i, base = sys.argv[1], sys.argv[2]\n"
        "with dask.config.set({'scheduler': 'threads', 'jsmf.progress': False}):\n"
        "    fit(f'{base}/ties', n_topics=2, name=f'run{i}', min_anchor_df=0)\n"
        "    fit(f'{base}/lda', n_topics=5, name=f'run{i}', min_anchor_df=0, iterations=30)\n"
    )
    for i in range(5):
        subprocess.run([sys.executable, "-c", code, str(i), str(roots)], check=True, capture_output=True)
    for corpus in ("ties", "lda"):
        models = [open_model(roots / corpus, f"run{i}") for i in range(5)]
        for m in models[1:]:
            for key in ("B", "A", "anchors", "A_least_squares"):
                np.testing.assert_array_equal(m.arrays[key], models[0].arrays[key], err_msg=f"{corpus} {key}")
    # the ties are decided by index: within each half every word's row is the same to rounding
    ties = open_model(roots / "ties", "run0")
    words = read_vocabulary(str(roots / "ties" / "corpus")).column("word").to_pylist()
    assert sorted(words[i][0] for i in ties.arrays["anchors"]) == ["a", "b"]


def test_a_corpus_of_too_low_a_rank_is_a_clear_error(roots, capsys):
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}), \
            pytest.raises(RankDeficientError) as err:
        fit(roots / "flat", n_topics=3, name="flat", min_anchor_df=0)
    assert (err.value.rank, err.value.n_topics) == (1, 3)  # no topic structure: rank 1 after rectification
    before = listing(roots / "flat")
    capsys.readouterr()
    assert main(["fit", str(roots / "flat"), "--topics", "3", "--scheduler", "synchronous", "--quiet"]) == 1
    err_text = capsys.readouterr().err
    assert err_text.count("\n") == 1 and "Traceback" not in err_text
    assert err_text.startswith("jsmf: error: the co-occurrence matrix has numerical rank 1") and \
        "supports at most 1 topics" in err_text
    assert listing(roots / "flat") == before  # nothing written
