"""The Gibbs-sampling reference: its B and A are the sampler's, averaged over states of the chain when asked."""

from __future__ import annotations

import numpy as np
import pytest

from jsmf_dask.exceptions import InvalidParameterError

from jsmf_dask import cooccur
from jsmf_dask.io.model_store import open_model
from jsmf_dask.pipeline.synth import synth


def test_gibbs_averages_b_and_a_over_the_states_it_was_asked_for(tmp_path, monkeypatch):
    pytest.importorskip("tomotopy")
    import jsmf_dask.pipeline.gibbs as gibbs

    synth(tmp_path, n_docs=300, n_words=60, n_topics=3, doc_length=30, seed=1)
    cooccur(tmp_path)
    states = []
    state_topics = gibbs._state_topics
    monkeypatch.setattr(gibbs, "_state_topics", lambda *a: states.append(state_topics(*a)) or states[-1])
    fitted = gibbs.fit_gibbs(tmp_path, n_topics=3, iterations=20, samples=3, thin=5, workers=1)
    stored = open_model(tmp_path, fitted.name)
    assert len(states) == 3 and stored.attrs["params"] | {"samples": 3, "thin": 5} == stored.attrs["params"]
    assert np.abs(states[0][0] - states[2][0]).max() > 1e-6  # the chain moved between the states
    np.testing.assert_allclose(stored.arrays["B"], sum(B for B, _ in states) / 3, rtol=0, atol=1e-12)
    np.testing.assert_allclose(stored.arrays["A"], sum(A for _, A in states) / 3, rtol=0, atol=1e-12)
    np.testing.assert_allclose(stored.arrays["B"].sum(axis=0), 1.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("bad", [{"samples": 0}, {"thin": 0}, {"samples": 2.5}])
def test_gibbs_refuses_a_bad_number_of_states_before_reading_anything(tmp_path, bad):
    from jsmf_dask.pipeline.gibbs import fit_gibbs

    pytest.importorskip("tomotopy")
    key = next(iter(bad))
    with pytest.raises(InvalidParameterError, match=rf"The '{key}' parameter of fit_gibbs must be an int"):
        fit_gibbs(tmp_path, n_topics=3, **bad)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_gibbs_trains_on_every_document_not_held_out(tmp_path):
    """The refined models it is compared with learn from the validation documents too (refine's refit): so does
    the reference; the held-out ones stay unseen."""
    pytest.importorskip("tomotopy")
    from jsmf_dask.io.parquet import corpus_dir, list_blocks, read_block
    from jsmf_dask.kernels.doc_split import heldout_mask
    from jsmf_dask.pipeline.gibbs import fit_gibbs

    synth(tmp_path, n_docs=400, n_words=60, n_topics=3, doc_length=30, seed=2)
    cooccur(tmp_path, heldout=0.1, validation=0.2)
    fitted = fit_gibbs(tmp_path, n_topics=3, iterations=2, workers=1)
    docs = tokens = 0
    for block in list_blocks(corpus_dir(str(tmp_path))):
        table = read_block(block, 60)
        kept = ~heldout_mask(table.column("doc_id"), 0.1)
        lengths = np.array([sum(c) for c in table.column("counts").to_pylist()])[kept]
        docs, tokens = docs + int((lengths >= 2).sum()), tokens + int(lengths[lengths >= 2].sum())
    assert fitted.attrs["training"] == {"n_docs": docs, "n_tokens": tokens}
    assert docs > 0.85 * 400  # the 20% kept for validation train


def test_gibbs_stores_the_document_prior_its_sampler_learned(tmp_path, monkeypatch):
    """tomotopy learns an asymmetric α from the one it starts at (every 10 iterations): the model keeps the α its
    topics were sampled under, so held-out documents are folded in under it, not under the start's 0.1."""
    pytest.importorskip("tomotopy")
    import jsmf_dask.pipeline.gibbs as gibbs

    synth(tmp_path, n_docs=300, n_words=60, n_topics=3, doc_length=30, seed=3)
    cooccur(tmp_path)
    samplers = []
    state_topics = gibbs._state_topics
    monkeypatch.setattr(gibbs, "_state_topics", lambda model, *a: samplers.append(model) or state_topics(model, *a))
    fitted = gibbs.fit_gibbs(tmp_path, n_topics=3, iterations=30, alpha=0.1, workers=1)
    stored = open_model(tmp_path, fitted.name).arrays["alpha"]
    np.testing.assert_array_equal(stored, np.asarray(samplers[-1].alpha, dtype=np.float64))
    assert np.abs(stored - 0.1).max() > 1e-3 and fitted.attrs["params"]["alpha"] == 0.1  # learned, from 0.1
