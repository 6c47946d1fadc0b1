"""Held-out documents: a split by doc_id that survives appends, the token split, and perplexity against a truth."""

from __future__ import annotations

import shutil

import dask
import numpy as np
import pytest
import scipy.sparse as sps

from jsmf_dask import cooccur, evaluate, fit, ingest, open_cooccurrence, synth
from jsmf_dask.io.model_store import ensure_model_group, model_path
from jsmf_dask.io.zarr_store import write_array
from jsmf_dask.io.parquet import corpus_dir, list_blocks, read_block
from jsmf_dask.kernels.doc_split import doc_hashes, heldout_mask
from jsmf_dask.kernels.heldout import completion_log_likelihood, split_tokens
from jsmf_dask.pipeline.synth import read_truth
from tests.conftest import REUTERS_DOCWORD
from tests.pipeline.test_incremental import parts  # noqa: F401  (the two-day Reuters fixture)


def test_mask_holds_out_the_fraction_by_id_alone():
    ids = [f"doc-{i}" for i in range(20000)]
    held = heldout_mask(ids, 0.1)
    # binomial: sd = sqrt(20000 · 0.1 · 0.9) ≈ 42 documents; 5 sd
    assert abs(held.sum() - 2000) < 5 * 42
    # by id alone: any order, any batch
    perm = np.random.default_rng(0).permutation(20000)
    np.testing.assert_array_equal(heldout_mask([ids[i] for i in perm], 0.1), held[perm])
    np.testing.assert_array_equal(np.concatenate([heldout_mask(ids[:7], 0.1), heldout_mask(ids[7:], 0.1)]), held)
    # nested: a larger fraction holds out a superset
    assert (held <= heldout_mask(ids, 0.3)).all()
    assert not heldout_mask(ids, 0.0).any()


def test_split_tokens_halves_each_document_the_same_way_in_any_block():
    rng = np.random.default_rng(1)
    X = sps.csr_array(rng.poisson(0.8, size=(30, 12)).astype(np.float64))
    hashes = doc_hashes([f"d{i}" for i in range(30)])
    obs, score = split_tokens(X, hashes)
    np.testing.assert_array_equal((obs + score).toarray(), X.toarray())
    np.testing.assert_array_equal(obs.sum(axis=1), X.sum(axis=1) // 2)
    a_obs, _ = split_tokens(X[:11], hashes[:11])
    b_obs, _ = split_tokens(X[11:], hashes[11:])
    np.testing.assert_array_equal(sps.vstack([a_obs, b_obs]).toarray(), obs.toarray())
    # the split is a random one, not "first half of the word ids"
    lowest = np.array([np.repeat(np.arange(12), X.toarray()[d].astype(int))[: int(X[[d]].sum()) // 2]
                       for d in range(30)], dtype=object)
    assert any(sorted(np.repeat(np.arange(12), obs.toarray()[d].astype(int))) != sorted(lowest[d])
               for d in range(30))


def test_completion_log_likelihood_by_hand():
    B = np.array([[0.7, 0.1], [0.2, 0.1], [0.1, 0.8]])
    alpha = np.array([0.5, 0.5])
    observed = sps.csr_array(np.array([[3.0, 1.0, 0.0]]))
    scored = sps.csr_array(np.array([[1.0, 0.0, 2.0]]))
    ll, n, floored = completion_log_likelihood(observed, scored, B, alpha, max_iter=1000, tol=1e-12)
    # θ by the fixed point γ = α + Σ_w n_w φ_w, φ_wk ∝ exp(ψ(γ_k)) B_wk, iterated by hand
    from scipy.special import digamma

    g = alpha + 2.0
    for _ in range(1000):
        e = np.exp(digamma(g) - digamma(g.sum()))
        phi = e * B[:2] / (e * B[:2]).sum(axis=1, keepdims=True)
        g = alpha + (np.array([3.0, 1.0])[:, None] * phi).sum(axis=0)
    theta = g / g.sum()
    expected = np.log(theta @ B[0]) + 2 * np.log(theta @ B[2])
    assert ll == pytest.approx(expected, rel=1e-9) and n == 3 and floored == 0


@pytest.fixture(scope="module")
def lda(tmp_path_factory):
    root = tmp_path_factory.mktemp("heldout")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        synth(root, n_docs=3000, n_words=300, n_topics=5, doc_length=80, seed=5, row_group_size=700)
        cooccur(root, heldout=0.2)
        fit(root, n_topics=5, name="ap")
    return root


def _store_model(root, name: str, B: np.ndarray, fraction: float) -> None:
    import zarr

    from jsmf_dask.io.schema import SCHEMA_VERSION
    from jsmf_dask.io.zarr_store import zarr_store

    ensure_model_group(root)
    url = model_path(str(root), name)
    zarr.open_group(zarr_store(url), mode="a", zarr_format=3)
    for key, values in {"anchors": np.zeros(0, dtype=np.int64), "B": B, "A": np.full((5, 5), 1 / 25),
                        "alpha": np.full(5, 0.1)}.items():
        write_array(url, key, values)
    zarr.open_group(zarr_store(url), mode="r+").attrs.update(
        {"schema_version": SCHEMA_VERSION, "name": name, "params": {"rectifier": "test"}, "heldout_fraction": fraction})


def test_the_true_topics_have_lower_perplexity_than_random_ones(lda):
    truth = read_truth(lda)["B"]
    random_B = np.random.default_rng(0).dirichlet(np.ones(300), size=5).T
    _store_model(lda, "truth", truth, 0.2)
    _store_model(lda, "random", random_B, 0.2)
    _store_model(lda, "seen", truth, 0.0)
    out = evaluate(lda, models=["truth", "random", "ap", "seen"])["models"]
    truth_p, random_p, ap_p = (out[n]["heldout"]["perplexity"] for n in ("truth", "random", "ap"))
    assert truth_p < ap_p < random_p, (truth_p, ap_p, random_p)
    assert truth_p < 0.9 * random_p
    # the held-out documents are the ones the store left out, with half their tokens scored
    held_docs = sum(int(heldout_mask(read_block(b, 300).column("doc_id"), 0.2).sum())
                    for b in list_blocks(corpus_dir(str(lda))))
    assert out["truth"]["heldout"]["n_docs"] == held_docs == open_cooccurrence(f"{lda}/cooc.zarr").attrs["n_docs_heldout"]
    # a model that saw held-out documents is not scored (implicit fraction) ...
    assert out["seen"]["heldout"]["perplexity"] is None and "saw some of the documents" in out["seen"]["heldout"]["notes"]
    # ... and refused when the fraction is asked for explicitly
    from jsmf_dask.exceptions import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="model 'seen' was trained with held-out fraction 0.0"):
        evaluate(lda, models=["truth", "seen"], heldout=0.2)


def test_heldout_scores_carry_their_standard_errors_and_paired_gaps(lda):
    """Against a slow reference in the test: each held-out document completed under each model one by one
    (the kernel's per-document scores, by the VB fold-in and by the sampled one under the document's hash), the
    ratio estimator's error and the paired error written out."""
    from jsmf_dask.kernels.heldout import document_completion

    truth = read_truth(lda)["B"]
    noisy = 0.8 * truth + 0.2 * np.random.default_rng(1).dirichlet(np.ones(300), size=5).T
    _store_model(lda, "exact", truth, 0.2)
    _store_model(lda, "blurred", noisy, 0.2)
    out = evaluate(lda, models=["exact", "blurred"])["models"]
    L, n = {"exact": [], "blurred": [], "exact sampled": [], "blurred sampled": []}, []
    for block in list_blocks(corpus_dir(str(lda))):
        table = read_block(block, 300)
        held = heldout_mask(table.column("doc_id"), 0.2)
        table = table.filter(held)
        rows, cols = [], []
        for d, (idx, cnt) in enumerate(zip(table.column("word_ids").to_pylist(), table.column("counts").to_pylist(),
                                          strict=True)):
            rows += [d] * len(idx)
            cols += list(zip(idx, cnt, strict=True))
        X = sps.csr_array(([c for _, c in cols], (rows, [w for w, _ in cols])), shape=(table.num_rows, 300))
        hashes = doc_hashes(table.column("doc_id"))
        observed, scored = split_tokens(X, hashes)
        for d in range(table.num_rows):  # one document at a time
            for name, B in (("exact", truth), ("blurred", noisy)):
                ll, tok, _ = document_completion(observed[[d]], scored[[d]], B, np.full(5, 0.1))
                L[name].append(ll[0])
                ll, _, _ = document_completion(observed[[d]], scored[[d]], B, np.full(5, 0.1), fold_in="sampled",
                                               hashes=hashes[[d]])
                L[f"{name} sampled"].append(ll[0])
            n.append(tok[0])
    n = np.array(n)
    L = {k: np.array(v) for k, v in L.items()}
    m = len(n)
    for name in ("exact", "blurred"):
        held = out[name]["heldout"]
        per_token = L[name].sum() / n.sum()
        assert held["perplexity"] == pytest.approx(np.exp(-per_token), rel=1e-10)
        se = np.sqrt(m / (m - 1) * ((L[name] - per_token * n) ** 2).sum()) / n.sum()
        assert held["perplexity_se"] == pytest.approx(np.exp(-per_token) * se, rel=1e-8)
        assert held["best_model"] == "exact"
    assert out["exact"]["heldout"]["loglik_gap_to_best"] == 0.0 and out["exact"]["heldout"]["loglik_gap_se"] == 0.0
    diff = L["exact"] - L["blurred"]
    gap = diff.sum() / n.sum()
    gap_se = np.sqrt(m / (m - 1) * ((diff - gap * n) ** 2).sum()) / n.sum()
    blurred = out["blurred"]["heldout"]
    assert blurred["loglik_gap_to_best"] == pytest.approx(gap, rel=1e-8)
    assert blurred["loglik_gap_se"] == pytest.approx(gap_se, rel=1e-8)
    # the same documents score both: the paired error is well below what two independent errors would give
    own = [out[k]["heldout"]["perplexity_se"] / out[k]["heldout"]["perplexity"] for k in ("exact", "blurred")]
    assert blurred["loglik_gap_se"] < 0.5 * np.hypot(*own)
    assert blurred["loglik_gap_to_best"] > 5 * blurred["loglik_gap_se"]  # a blurred truth is measurably worse
    for name in ("exact", "blurred"):  # the sampled fold-in's figures, from the same documents
        sampled = out[name]["heldout"]["sampled_fold_in"]
        per_token = L[f"{name} sampled"].sum() / n.sum()
        assert sampled["perplexity"] == pytest.approx(np.exp(-per_token), rel=1e-10)
        assert sampled["best_model"] == "exact"
    diff = L["exact sampled"] - L["blurred sampled"]
    assert out["blurred"]["heldout"]["sampled_fold_in"]["loglik_gap_to_best"] == pytest.approx(diff.sum() / n.sum(),
                                                                                               rel=1e-8)
    alone = evaluate(lda, models=["exact"], sampled_fold_in=False)["models"]["exact"]["heldout"]
    assert "sampled_fold_in" not in alone and alone["perplexity"] == out["exact"]["heldout"]["perplexity"]


def test_document_scores_read_each_block_once_for_every_fold_in(lda, monkeypatch):
    """Both fold-ins' scores from one read of the corpus, each equal to its own pass's to the bit."""
    import jsmf_dask.stages.evaluate as stage
    from jsmf_dask.kernels.doc_split import DocumentSplit

    truth = read_truth(lda)["B"]
    blocks = list_blocks(corpus_dir(str(lda)))
    models = {"truth": (truth, np.full(5, 0.1))}
    reads = []
    monkeypatch.setattr(stage, "read_block", lambda block, n: reads.append(block) or read_block(block, n))

    def scores(fold_ins):
        with dask.config.set({"scheduler": "synchronous"}):
            (got,) = dask.compute(stage.document_scores_tasks(blocks, 300, DocumentSplit(heldout=0.2), models,
                                                              which="heldout", fold_ins=fold_ins))
        return got

    both = scores(("vb", "sampled"))
    assert len(reads) == len(blocks) > 1
    for fold_in in ("vb", "sampled"):
        alone = scores((fold_in,))[fold_in]
        np.testing.assert_array_equal(both[fold_in].hashes, alone.hashes)
        np.testing.assert_array_equal(both[fold_in].log_likelihood["truth"], alone.log_likelihood["truth"])
    assert not np.array_equal(both["vb"].log_likelihood["truth"], both["sampled"].log_likelihood["truth"])
    for bad in ((), ("gibbs",), ("vb", "exact")):
        with pytest.raises(ValueError, match="fold_ins must be one or more of"):
            stage.document_scores_tasks(blocks, 300, DocumentSplit(heldout=0.2), models, fold_ins=bad)


def test_evaluate_command_scores_by_both_fold_ins_unless_told_not_to(lda, capsys):
    from jsmf_dask.cli import main

    args = ["evaluate", str(lda), "--model", "ap", "--scheduler", "synchronous", "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    held_out_lines = [line for line in out.splitlines() if line.startswith("ap ") and " ± " in line]
    assert "(the sampled fold-in):" in out and len(held_out_lines) == 2
    assert main([*args, "--no-sampled-fold-in"]) == 0
    out = capsys.readouterr().out
    held_out_lines = [line for line in out.splitlines() if line.startswith("ap ") and " ± " in line]
    assert "sampled fold-in" not in out and len(held_out_lines) == 1


def test_the_same_documents_are_held_out_after_an_append(parts, tmp_path):  # noqa: F811
    inc = tmp_path / "inc"
    ingest(inc, [str(parts["day1"])], doc_ids=parts["ids1"], vocab_size=600, row_group_size=60)
    cooccur(inc, heldout=0.25)
    first = open_cooccurrence(f"{inc}/cooc.zarr").attrs["n_docs_heldout"]
    ingest(inc, [str(parts["day2"])], doc_ids=parts["ids2"], append=True, row_group_size=60)
    cooccur(inc, update=True)
    store = open_cooccurrence(f"{inc}/cooc.zarr")
    assert store.attrs["heldout_fraction"] == 0.25
    by_id = {}
    for block in list_blocks(corpus_dir(str(inc))):
        ids = read_block(block, None).column("doc_id")
        by_id.update(zip(ids.to_pylist(), heldout_mask(ids, 0.25).tolist(), strict=True))
    day1 = [f"r{i}" for i in range(250) if f"r{i}" in by_id]
    assert sum(by_id[d] for d in day1) == first  # the first day's held-out documents did not move
    assert store.attrs["n_docs_heldout"] == sum(by_id.values())
    # equal to a build from scratch of the whole corpus with the same fraction
    ref = tmp_path / "ref"
    shutil.copytree(inc / "corpus", ref / "corpus")
    cooccur(ref, heldout=0.25)
    np.testing.assert_allclose(store.C[:], open_cooccurrence(f"{ref}/cooc.zarr").C[:], rtol=0, atol=1e-12)
    from jsmf_dask.exceptions import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="holds out a fraction 0.25 of the documents; an update keeps it"):
        cooccur(inc, update=True, heldout=0.1)


def test_reuters_c_without_its_heldout_documents_is_the_c_of_the_rest(tmp_path):
    from tests.conftest import dense_cooccurrence

    ingest(tmp_path, [str(REUTERS_DOCWORD)], vocab_size=400, row_group_size=100)
    cooccur(tmp_path, heldout=0.3)
    docs = []
    for block in list_blocks(corpus_dir(str(tmp_path))):
        t = read_block(block, None)
        held = heldout_mask(t.column("doc_id"), 0.3)
        for ids, counts, h in zip(t.column("word_ids").to_pylist(), t.column("counts").to_pylist(), held, strict=True):
            if not h:
                docs.append(dict(zip(ids, counts, strict=True)))
    C = open_cooccurrence(f"{tmp_path}/cooc.zarr").C[:]
    np.testing.assert_allclose(C, dense_cooccurrence(docs, C.shape[0], "tokens"), rtol=0, atol=1e-13)


def test_validation_documents_are_disjoint_from_held_out_ones_and_left_out_of_C(tmp_path):
    """C with held-out and validation documents left out is the dense C of the rest; the counts are recorded;
    the validation set is the other end of the same hash (disjoint, by id alone)."""
    from jsmf_dask.kernels.doc_split import DocumentSplit, validation_mask
    from tests.conftest import dense_cooccurrence

    ids = [f"doc-{i}" for i in range(20000)]
    valid = validation_mask(ids, 0.2)
    assert not (valid & heldout_mask(ids, 0.5)).any()
    assert abs(valid.sum() - 4000) < 5 * 57  # binomial sd sqrt(20000 · 0.2 · 0.8) ≈ 57
    ingest(tmp_path, [str(REUTERS_DOCWORD)], vocab_size=400, row_group_size=100)
    summary = cooccur(tmp_path, heldout=0.2, validation=0.15)
    split = DocumentSplit(0.2, 0.15)
    docs, n_held, n_valid = [], 0, 0
    for block in list_blocks(corpus_dir(str(tmp_path))):
        t = read_block(block, None)
        held, val = split.masks(t.column("doc_id"))
        n_held, n_valid = n_held + int(held.sum()), n_valid + int(val.sum())
        for ids_, counts, keep in zip(t.column("word_ids").to_pylist(), t.column("counts").to_pylist(),
                                      split.training(t.column("doc_id")), strict=True):
            if keep:
                docs.append(dict(zip(ids_, counts, strict=True)))
    store = open_cooccurrence(f"{tmp_path}/cooc.zarr")
    np.testing.assert_allclose(store.C[:], dense_cooccurrence(docs, store.C.shape[0], "tokens"), rtol=0, atol=1e-13)
    assert store.attrs["validation_fraction"] == 0.15 and store.attrs["n_docs_validation"] == n_valid > 0
    assert store.attrs["n_docs_heldout"] == n_held and summary.n_docs_validation == n_valid
    assert any("kept for validation" in line for line in summary.lines())
    # the compressed store leaves out the same documents
    from jsmf_dask.exceptions import InvalidParameterError
    compressed = cooccur(tmp_path, heldout=0.2, validation=0.15, rank=10, overwrite=True)
    assert compressed.n_docs == store.attrs["n_docs"] and compressed.n_docs_validation == n_valid
    with pytest.raises(InvalidParameterError, match="'validation' parameter of cooccur must be a float"):
        cooccur(tmp_path, validation=0.7, overwrite=True)
    with pytest.raises(InvalidParameterError, match="leave no training documents"):
        cooccur(tmp_path, heldout=0.5, validation=0.5, overwrite=True)
