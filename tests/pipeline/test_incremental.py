"""Incremental updates: `ingest --append` + `cooccur --update` equal a build from scratch (1e-12)."""

from __future__ import annotations

import numpy as np
import pytest

from jsmf_dask import cooccur, ingest, open_cooccurrence
from jsmf_dask.cli import main
from jsmf_dask.exceptions import CorpusSchemaError, InputError, StoreError
from jsmf_dask.io.parquet import read_vocabulary
from tests.conftest import REUTERS_DOCWORD, REUTERS_VOCAB, listing, read_uci, write_uci


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """The Reuters corpus split into two UCI files (documents 1–250 and 251–395) with the same vocabulary."""
    d = tmp_path_factory.mktemp("parts")
    docs = read_uci(REUTERS_DOCWORD)
    vocab = REUTERS_VOCAB.read_text().splitlines()
    # UCI names documents by position; the days' id files keep the names of the whole corpus
    (d / "ids.day1.txt").write_text("\n".join(f"r{i}" for i in range(250)) + "\n")
    (d / "ids.day2.txt").write_text("\n".join(f"r{i}" for i in range(250, len(docs))) + "\n")
    return {
        "day1": write_uci(d, docs[:250], vocab, name="day1"),
        "day2": write_uci(d, docs[250:], vocab, name="day2"),
        "ids1": str(d / "ids.day1.txt"),
        "ids2": str(d / "ids.day2.txt"),
        "n_docs": len(docs),
    }


@pytest.mark.parametrize("weighting", ["tokens", "documents"])
def test_append_and_update_equal_a_build_from_scratch(parts, tmp_path, weighting):
    """Either weighting: the update keeps the store's (not given: kept; a store of before it had none: 'documents')."""
    inc = tmp_path / "inc"
    ingest(inc, [str(parts["day1"])], doc_ids=parts["ids1"], vocab_size=600, row_group_size=60)
    first_words = read_vocabulary(f"{inc}/corpus").column("word").to_pylist()
    cooccur(inc, tile_size=256, weighting=weighting)
    before = open_cooccurrence(f"{inc}/cooc.zarr").attrs["n_docs"]
    report = ingest(inc, [str(parts["day2"])], doc_ids=parts["ids2"], append=True, row_group_size=60)
    assert report.n_docs > 0 and read_vocabulary(f"{inc}/corpus").column("word").to_pylist() == first_words
    summary = cooccur(inc, update=True)
    store = open_cooccurrence(f"{inc}/cooc.zarr")
    assert summary.n_blocks == -(-report.n_docs // 60) and store.attrs["n_docs"] == before + report.n_docs
    assert len(store.attrs["updates"]) == 1
    # the reference: the same two-part corpus built in one go
    ref_root = tmp_path / "ref"
    import shutil

    shutil.copytree(inc / "corpus", ref_root / "corpus")
    cooccur(ref_root, tile_size=256, weighting=weighting)
    ref = open_cooccurrence(f"{ref_root}/cooc.zarr")
    assert store.attrs["weighting"] == summary.weighting == weighting
    np.testing.assert_allclose(store.C[:], ref.C[:], rtol=0, atol=1e-12 * ref.C[:].max())
    assert abs(store.C[:].sum() - 1) < 1e-12
    np.testing.assert_array_equal(store.D1[:], ref.D1[:])
    np.testing.assert_array_equal(store.D2[:], ref.D2[:])
    np.testing.assert_array_equal(store.group["doc_hashes"][:], ref.group["doc_hashes"][:])
    assert store.attrs["entry_sum"] == pytest.approx(ref.attrs["entry_sum"], rel=1e-15)


def test_update_refusals_leave_everything_unchanged(parts, tmp_path):
    root = tmp_path / "run"
    ingest(root, [str(parts["day1"])], doc_ids=parts["ids1"], vocab_size=500, row_group_size=100)
    cooccur(root)
    before = listing(root)
    with pytest.raises(StoreError, match="every shard is already counted"):
        cooccur(root, update=True)
    # the same documents again: refused at append, by doc_id
    with pytest.raises(InputError, match=r"doc_id '.*' of the appended input is already in the corpus"):
        ingest(root, [str(parts["day1"])], doc_ids=parts["ids1"], append=True)
    assert listing(root) == before
    with pytest.raises(ValueError, match="vocab_size applies to a new corpus"):
        ingest(root, [str(parts["day2"])], append=True, vocab_size=10)
    # a corpus whose vocabulary changed under C: the update is refused
    other = tmp_path / "other"
    ingest(other, [str(parts["day2"])], vocab_size=400)
    import shutil

    shutil.rmtree(root / "corpus")
    shutil.copytree(other / "corpus", root / "corpus")
    snapshot = listing(root)
    with pytest.raises(StoreError, match="its words differ from those .* was built with"):
        cooccur(root, update=True)
    assert listing(root) == snapshot


def test_an_update_keeps_the_store_s_weighting_and_refuses_another(parts, tmp_path):
    """A store written before the attribute existed weighed each document once: an update keeps that; asking an
    update for another weighting is refused, with nothing written."""
    import json

    from jsmf_dask.exceptions import InvalidParameterError

    root = tmp_path / "run"
    ingest(root, [str(parts["day1"])], doc_ids=parts["ids1"], vocab_size=500, row_group_size=100)
    cooccur(root, weighting="documents")
    meta = root / "cooc.zarr" / "zarr.json"
    doc = json.loads(meta.read_text())
    del doc["attributes"]["weighting"]  # as a store of before session 51
    meta.write_text(json.dumps(doc))
    ingest(root, [str(parts["day2"])], doc_ids=parts["ids2"], append=True)
    snapshot = listing(root)
    with pytest.raises(InvalidParameterError, match=r"weighs each document by 'documents'; an update keeps it \(got "
                                                    r"weighting='tokens'\)"):
        cooccur(root, update=True, weighting="tokens")
    assert listing(root) == snapshot
    assert cooccur(root, update=True).weighting == "documents"
    assert open_cooccurrence(f"{root}/cooc.zarr").attrs["weighting"] == "documents"


def test_update_refuses_documents_already_counted(parts, tmp_path):
    import pyarrow.parquet as pq

    from jsmf_dask.io.parquet import read_parquet

    root = tmp_path / "run"
    ingest(root, [str(parts["day1"])], vocab_size=500, row_group_size=100)
    cooccur(root)
    # a shard slipped into the corpus by hand, repeating a counted document
    shard = read_parquet(str(root / "corpus" / "part-00000.parquet")).slice(0, 3)
    pq.write_table(shard, root / "corpus" / "part-00099.parquet")
    snapshot = listing(root)
    with pytest.raises(CorpusSchemaError, match=r"part-00099\.parquet: row 0: field 'doc_id' '.*' is already counted"):
        cooccur(root, update=True)
    assert listing(root) == snapshot


def test_cli_append_and_update(parts, tmp_path, capsys):
    root = str(tmp_path / "run")
    local = ["--scheduler", "synchronous", "--quiet"]
    assert main(["ingest", root, str(parts["day1"]), "--doc-ids", parts["ids1"], "--vocab-size", "500", *local]) == 0
    assert main(["cooccur", root, *local]) == 0
    assert main(["ingest", root, str(parts["day2"]), "--doc-ids", parts["ids2"], "--append", *local]) == 0
    assert main(["cooccur", root, "--update", *local]) == 0
    n_docs = open_cooccurrence(f"{root}/cooc.zarr").attrs["n_docs"]
    assert f"from {n_docs} documents" in capsys.readouterr().out and n_docs > 250
    assert main(["cooccur", root, "--update", "--overwrite", *local]) == 1
    assert "pass one of them" in capsys.readouterr().err


def test_a_baseline_fitted_before_an_update_is_not_read_against_the_new_c(parts, tmp_path):
    """The Baseline keeps its rectified C as a reference to cooc.zarr: after `cooccur --update` that C is not
    the one it was fitted on, so reading it is refused with the reason, and evaluate notes it."""
    from jsmf_dask import evaluate, fit, open_model
    from jsmf_dask.io.model_store import stored_rectified

    root = tmp_path / "run"
    ingest(root, [str(parts["day1"])], doc_ids=parts["ids1"], vocab_size=800, row_group_size=100)
    cooccur(root)
    fit(root, n_topics=6, rectifier="none", name="base", min_anchor_df=0)
    C = open_cooccurrence(f"{root}/cooc.zarr").C[:]
    np.testing.assert_allclose(open_model(root, "base").rectified_C(), C / C.sum(), rtol=1e-12)
    ingest(root, [str(parts["day2"])], doc_ids=parts["ids2"], append=True)
    cooccur(root, update=True)
    with pytest.raises(StoreError, match=r"model 'base' keeps its rectified C as a reference to .*cooc\.zarr, "
                                         r"which has changed since it was fitted .* refit the model"):
        stored_rectified(open_model(root, "base"))
    entry = evaluate(root, models=["base"])["models"]["base"]
    assert "rectified_C" not in entry and "has changed since it was fitted" in entry["notes"]["rectified_C"]
    assert entry["original_C"]["approximation"] > 0  # still measured against today's C


def test_refit_warm_starts_from_the_previous_model(parts, tmp_path):
    from jsmf_dask import fit

    root = tmp_path / "run"
    ingest(root, [str(parts["day1"])], doc_ids=parts["ids1"], vocab_size=800, row_group_size=100)
    # each document once: weighed by their tokens, two words tie as the 8th anchor to within the two AP runs'
    # difference (each to an eigen-residual of 1e-6), and cold and warm pick one each
    cooccur(root, weighting="documents")
    fit(root, n_topics=8, iterations=30, name="yesterday")
    ingest(root, [str(parts["day2"])], doc_ids=parts["ids2"], append=True)
    cooccur(root, update=True)
    cold = fit(root, n_topics=8, iterations=30, name="cold")
    warm = fit(root, n_topics=8, iterations=30, name="warm", warm_start="yesterday")
    assert warm.attrs["params"]["warm_start"] == "yesterday"
    # the first eigensolve starts from yesterday's eigenvectors: fewer operator applications
    assert warm.trace["n_matmat"][0] < cold.trace["n_matmat"][0]
    np.testing.assert_array_equal(warm.anchors, cold.anchors)
    np.testing.assert_allclose(warm.B, cold.B, rtol=0, atol=1e-6)  # both AP runs to eigen-residual 1e-6
    with pytest.raises(ValueError, match="warm_start='cold' has no eigenvectors of shape"):
        fit(root, n_topics=5, iterations=5, name="k5", warm_start="cold")


@pytest.mark.slow
def test_two_concurrent_updates_apply_every_document_once(parts, tmp_path):
    """Two `cooccur --update` at once after one `ingest --append`: whichever commits, C equals a rebuild; the other
    either finds nothing left to count, applies the same update, or fails with a clear error — never counts twice."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    inc = tmp_path / "inc"
    ingest(inc, [str(parts["day1"])], doc_ids=parts["ids1"], vocab_size=600, row_group_size=60)
    cooccur(inc, tile_size=256)
    ingest(inc, [str(parts["day2"])], doc_ids=parts["ids2"], append=True, row_group_size=60)
    env = dict(os.environ)
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    jsmf = str(Path(sys.executable).parent / "jsmf")
    procs = [subprocess.Popen([jsmf, "cooccur", str(inc), "--update", "--scheduler", "threads", "--quiet"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stderr.close()
    assert any(rc == 0 for rc, _ in outcomes), outcomes
    for rc, err in outcomes:
        assert rc in (0, 1) and "Traceback" not in err, err
        if rc == 1:
            assert err.startswith("jsmf: error:") and len(err.strip().splitlines()) == 1, err
    ref_root = tmp_path / "ref"
    shutil.copytree(inc / "corpus", ref_root / "corpus")
    cooccur(ref_root, tile_size=256)
    store, ref = open_cooccurrence(f"{inc}/cooc.zarr"), open_cooccurrence(f"{ref_root}/cooc.zarr")
    np.testing.assert_allclose(store.C[:], ref.C[:], rtol=0, atol=1e-12 * ref.C[:].max())
    np.testing.assert_array_equal(store.D2[:], ref.D2[:])
    assert store.attrs["n_docs"] == ref.attrs["n_docs"]
    assert not [p for p in os.listdir(inc) if p.startswith(".cooc.zarr")], outcomes  # no temporaries left


@pytest.mark.slow
def test_concurrent_appends_lose_and_repeat_nothing(parts, tmp_path):
    """Two `ingest --append` at once: of the same file, its documents end up in the corpus once; of two different
    files, every command that succeeded has its documents in the corpus (a loser fails with one clear line)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from jsmf_dask.io.parquet import corpus_dir, list_blocks, read_block

    docs = read_uci(REUTERS_DOCWORD)
    vocab = REUTERS_VOCAB.read_text().splitlines()
    d = tmp_path / "days"
    d.mkdir()
    days = {"a": write_uci(d, docs[250:320], vocab, name="a"), "b": write_uci(d, docs[320:], vocab, name="b")}
    (d / "ids.a.txt").write_text("\n".join(f"r{i}" for i in range(250, 320)) + "\n")
    (d / "ids.b.txt").write_text("\n".join(f"r{i}" for i in range(320, len(docs))) + "\n")
    env = dict(os.environ)
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    jsmf = str(Path(sys.executable).parent / "jsmf")

    def ids(root):
        return [i for b in list_blocks(corpus_dir(str(root))) for i in read_block(b, 600).column("doc_id").to_pylist()]

    for case, pair in (("same", ("a", "a")), ("different", ("a", "b"))):
        root = tmp_path / case
        ingest(root, [str(parts["day1"])], doc_ids=parts["ids1"], vocab_size=600, row_group_size=60)
        procs = [subprocess.Popen([jsmf, "ingest", str(root), str(days[x]), "--append", "--doc-ids",
                                   str(d / f"ids.{x}.txt"), "--scheduler", "threads", "--quiet"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for x in pair]
        outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
        for p in procs:
            p.stderr.close()
        stored = ids(root)
        assert len(stored) == len(set(stored)), case  # no document twice
        assert any(rc == 0 for rc, _ in outcomes), outcomes
        for (rc, err), x in zip(outcomes, pair, strict=True):
            assert rc in (0, 1) and "Traceback" not in err, err
            if rc == 0:  # a command that said it appended did append
                first, last = (250, 320) if x == "a" else (320, len(docs))
                assert {f"r{i}" for i in range(first, last)} <= set(stored), (case, x)
            else:
                assert err.startswith("jsmf: error:") and len(err.strip().splitlines()) == 1, err
        assert not [p for p in os.listdir(root) if p.startswith(".corpus")], outcomes
