"""``choose-k``: one C, a fit and a short refine per K, scored on the validation documents; the true K found."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jsmf_dask import cooccur
from jsmf_dask.cli import main
from jsmf_dask.exceptions import InvalidParameterError, StoreError
from jsmf_dask.io.model_store import list_models
from jsmf_dask.pipeline.choose_k import choose_k, model_names
from jsmf_dask.pipeline.synth import synth
from jsmf_dask.kernels.heldout import DocumentSplit
from jsmf_dask.io.parquet import corpus_dir, list_blocks, read_block


def _plain_lda_root(base, k: int):
    """A plain-LDA corpus (topics drawn from Dirichlet(0.05) over the words, no planted anchors), C built with 10%
    held out and 10% validation documents."""
    root = base / f"lda-k{k}"
    synth(root, n_docs=3000, n_words=1000, n_topics=k, doc_length=100, seed=k, topics_from="dirichlet", beta=0.05)
    cooccur(root, heldout=0.1, validation=0.1)
    return root


@pytest.mark.parametrize("k", [5, 10, 20])
def test_choose_k_recovers_the_true_number_of_topics(tmp_path, k):
    root = _plain_lda_root(tmp_path, k)
    candidates = sorted({k // 2, k - 1, k, k + 1, (3 * k) // 2, 2 * k})
    seen = []
    result = choose_k(root, topics=candidates, on_k=seen.append)
    assert result.recommended == k, result.lines()
    assert result.best_perplexity_k == k
    assert [r.n_topics for r in seen] == candidates and not any(r.resumed for r in seen)
    # every K scored on the same validation documents, and only on them
    n_valid = 0
    for block in list_blocks(corpus_dir(str(root))):
        ids = read_block(block, 1000).column("doc_id")
        held, valid = DocumentSplit(0.1, 0.1).masks(ids)
        assert not (held & valid).any()
        n_valid += int(valid.sum())
    assert result.validation["n_docs"] == n_valid
    assert {r["n_topics"] for r in result.rows} == set(candidates)
    written = json.loads((root / "report" / "choose_k.json").read_text())
    assert written["recommended"] == k and len(written["rows"]) == len(candidates)
    assert len(written["eigenvalues"]) == 2 * k + 1
    assert (root / "report" / "choose_k.png").read_bytes()[:4] == b"\x89PNG"
    assert (root / "report" / "choose_k.csv").read_text().count("\n") == len(candidates) + 1
    if k == 5:  # a rerun resumes: nothing fitted again, the same table
        again = []
        second = choose_k(root, topics=candidates, on_k=again.append)
        assert all(r.resumed for r in again)
        assert second.rows[0]["perplexity"] == result.rows[0]["perplexity"]
        assert second.recommended == k
        assert {name for c in candidates for name in model_names(c)} <= set(list_models(str(root)))


def test_choose_k_needs_validation_documents_and_valid_topics(tmp_path):
    root = tmp_path / "r"
    synth(root, n_docs=300, n_words=200, n_topics=3, doc_length=40, seed=1, topics_from="dirichlet")
    cooccur(root, heldout=0.1)
    with pytest.raises(StoreError, match="no validation documents.*--validation 0.05 --heldout 0.1"):
        choose_k(root, topics=[2, 3])
    cooccur(root, heldout=0.1, validation=0.1, overwrite=True)
    for bad in ([3], [1, 3], [2, 200], [2, 2], "2,3", [2, 3.0]):
        with pytest.raises(InvalidParameterError, match="'topics' parameter of choose_k"):
            choose_k(root, topics=bad)
    with pytest.raises(InvalidParameterError, match="'sweeps' parameter of choose_k"):
        choose_k(root, topics=[2, 3], sweeps=0)
    assert not (root / "report" / "choose_k.json").exists()
    assert not any(name.startswith("choose-k") for name in list_models(str(root)))


def test_choose_k_command_line(tmp_path, capsys):
    root = tmp_path / "r"
    synth(root, n_docs=600, n_words=300, n_topics=4, doc_length=60, seed=3, topics_from="dirichlet")
    cooccur(root, heldout=0.1, validation=0.1)
    assert main(["choose-k", str(root), "--topics", "2:6:2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "recommended K:" in out and "| 6 |" in out and "held out for evaluate took no part" in out
    with pytest.raises(SystemExit) as exit_:
        main(["choose-k", str(root), "--topics", "6:2"])
    assert exit_.value.code == 2
    assert "expected A:B" in capsys.readouterr().err


def test_topics_spec():
    from jsmf_dask.cli_parser import _topics_spec

    assert _topics_spec("5:100") == [5, 7, 10, 14, 19, 26, 37, 51, 72, 100]
    assert _topics_spec("4:10:3") == [4, 7, 10]
    assert _topics_spec("3,8,5") == [3, 8, 5]
    np.testing.assert_array_equal(_topics_spec("2:3"), [2, 3])
