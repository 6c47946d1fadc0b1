"""Refine's chain start: the documents its chain samples, the same state whatever the row groups, and
``refine(start=...)``."""

from __future__ import annotations

import dask
import numpy as np
import pytest

from jsmf_dask import cooccur, fit, open_model, refine, synth
from jsmf_dask.exceptions import InvalidParameterError
from jsmf_dask.io.parquet import corpus_dir, list_blocks, read_block
from jsmf_dask.kernels.doc_split import DocumentSplit, doc_hashes, sample_mask
from jsmf_dask.stages.chain import chain_task
from jsmf_dask.stages.refine import SweepParams

SPLIT = DocumentSplit(heldout=0.1, validation=0.05)


def _root(path, row_group_size):
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        synth(path, n_docs=3000, n_words=200, n_topics=4, doc_length=40, seed=7, row_group_size=row_group_size)
    return path


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    """The same 3,000 documents in six row groups and in one."""
    return _root(tmp_path_factory.mktemp("six"), 500), _root(tmp_path_factory.mktemp("one"), 3000)


def _params(validation_sample=0.5):
    return SweepParams(200, "sampled", np.full(4, 0.1), 0.05, SPLIT, 3, 1e-3, validation_sample=validation_sample)


def test_the_chain_samples_training_documents_by_id_in_the_order_of_their_hashes(roots, monkeypatch):
    """The chain's documents are those the sweeps train on (neither held out nor scored validation documents: the
    unscored ones train) within the sample by id, in the order of their hashes, each with all its tokens."""
    import jsmf_dask.stages.chain as stage

    seen = []
    real = stage.collapsed_chain
    monkeypatch.setattr(stage, "collapsed_chain", lambda X, *a, **k: seen.append(X.copy()) or real(X, *a, **k))
    with dask.config.set(scheduler="synchronous"):
        (word_topic, doc_topic, n_tokens), = dask.compute(stage.chain_task(
            list_blocks(corpus_dir(str(roots[0]))), _params(), 4, fraction=0.3, alpha=0.1, eta=0.01, iterations=3))
    rows, hashes = [], []
    for block in list_blocks(corpus_dir(str(roots[0]))):
        table = read_block(block, 200)
        h = doc_hashes(table.column("doc_id"))
        held, valid = SPLIT.masks(hashes=h)
        keep = ~held & ~(valid & sample_mask(h, 0.5)) & sample_mask(h, 0.3)
        for ids, counts, k in zip(table.column("word_ids").to_pylist(), table.column("counts").to_pylist(), keep,
                                  strict=True):
            if k:
                row = np.zeros(200)
                np.add.at(row, ids, counts)
                rows.append(row)
        hashes.append(h[keep])
    expected = np.array(rows)[np.argsort(np.concatenate(hashes), kind="stable")]
    (X,) = seen
    np.testing.assert_array_equal(X.toarray(), expected)
    assert 0.2 < X.shape[0] / 3000 < 0.35 and n_tokens == expected.sum() == word_topic.sum() == doc_topic.sum()
    assert doc_topic.shape == (X.shape[0], 4)


def test_the_chain_ends_in_the_same_state_whatever_the_row_groups(roots):
    states = []
    for root in roots:
        with dask.config.set(scheduler="threads"):
            (state,) = dask.compute(chain_task(list_blocks(corpus_dir(str(root))), _params(), 4, fraction=0.3,
                                               alpha=0.1, eta=0.01, iterations=5))
        states.append(state)
    assert len(list_blocks(corpus_dir(str(roots[0])))) == 6 and len(list_blocks(corpus_dir(str(roots[1])))) == 1
    for a, b in zip(*states, strict=True):
        np.testing.assert_array_equal(a, b)


def test_refine_from_a_chain_records_its_start_and_is_checked_against_the_spectral_model(roots):
    """``start='chain'``: every run from the chain's topics (recorded; its topics in the spectral model's order,
    so each is near the spectral topic it matches), a model unlike the spectral start's; a start that is not one
    of the choices is an error before anything is written."""
    root = roots[0]
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        cooccur(root, heldout=0.1, validation=0.05)
        fit(root, n_topics=4, name="ap")
        spectral = refine(root, model="ap", method="cvb0", sweeps=4, name="from-ap")
        chained = refine(root, model="ap", method="cvb0", start="chain", sweeps=4, name="from-chain")
        with pytest.raises(InvalidParameterError, match="'start' parameter of refine must be a str among"):
            refine(root, model="ap", start="random", sweeps=2, name="bad")
    assert chained.attrs["start"] == "chain" and chained.attrs["params"]["start"] == "chain"
    assert spectral.attrs["start"] == "spectral" and spectral.attrs["candidates"] is None
    assert not np.allclose(chained.B, spectral.B)
    B0 = open_model(root, "ap").arrays["B"]
    # matched in order: each refined topic is nearest (L1) to the spectral topic of its own index
    distances = np.abs(chained.B[:, :, None] - B0[:, None, :]).sum(axis=0)
    np.testing.assert_array_equal(distances.argmin(axis=1), np.arange(4))
    assert not (root / "model.zarr" / "bad").exists()


def test_the_warning_names_what_the_run_started_from():
    """The spectral model by its quoted name; a chain's topics as such (a run from them without held-out documents
    is compared with its own start on the validation documents); nothing within the stop's resolution."""
    from jsmf_dask.pipeline.refine_start import worse_than_start
    from jsmf_dask.pipeline.refine_sweeps import IMPROVEMENT

    assert "above 100.0 of the topics of 'ap' it started from" in worse_than_start(
        100.0, 110.0, repr("ap"), "cvb0", "held-out", "try x")
    chained = worse_than_start(100.0, 110.0, "a chain", "sampled", "validation", "try x")
    assert chained == ("refine (sampled) ended with validation perplexity 110.0, above 100.0 of the topics of a chain "
                       "it started from: the refined model is worse on unseen documents; try x")
    assert worse_than_start(100.0, 100.0 * (1 + IMPROVEMENT), "a chain", "sampled", "validation", "try x") is None
