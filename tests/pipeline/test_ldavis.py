"""``jsmf report --ldavis``: pyLDAvis's view of a model from B, the document–topic weights and the term
frequencies, checked against the stores it reads and loaded back from the HTML it writes."""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pyarrow as pa
import pytest

from jsmf_dask import cooccur, fit, synth
from jsmf_dask.cli import main
from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.model_store import open_model
from jsmf_dask.io.parquet import read_parquet, read_vocabulary
from jsmf_dask.pipeline.infer import infer, read_doc_topics
from jsmf_dask.pipeline.ldavis import PROBABILITY_FLOOR, export_ldavis, ldavis_inputs, ldavis_path
from jsmf_dask.pipeline.refine import refine

pytest.importorskip("pyLDAvis")  # in the test extras; optional for users (jsmf_dask[ldavis])


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    import dask

    root = tmp_path_factory.mktemp("ldavis")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        synth(root, n_docs=800, n_words=150, n_topics=4, doc_length=50, seed=2, row_group_size=400)
        cooccur(root)
        fit(root, n_topics=4, name="ap", min_anchor_df=5)
        refine(root, model="ap", sweeps=2)
    return root


def _embedded(html: str) -> dict:
    """The data object pyLDAvis embeds in its HTML (what its JavaScript draws)."""
    match = re.search(r'new LDAvis\("#" \+ "ldavis_\w+", (\{.*?\})\);\n', html, re.S)
    assert match, "no pyLDAvis data in the HTML"
    return json.loads(match.group(1))


def test_inputs_are_the_models_topics_its_documents_weights_and_the_term_frequencies(root):
    inputs = ldavis_inputs(str(root), "ap-refined")
    B = open_model(str(root), "ap-refined").arrays["B"]
    floored = np.maximum(B.T, PROBABILITY_FLOOR)
    np.testing.assert_allclose(inputs["topic_term_dists"], floored / floored.sum(axis=1, keepdims=True), rtol=1e-15)
    np.testing.assert_allclose(inputs["topic_term_dists"].sum(axis=1), 1.0, rtol=1e-12)
    parts = sorted((root / "model.zarr" / "ap-refined" / "doc_topics").glob("*.parquet"))  # corpus order
    table = pa.concat_tables([read_parquet(str(p)) for p in parts])
    lengths = np.asarray(table.column("n_tokens"))
    theta = np.array(table.column("topics").to_pylist())
    np.testing.assert_array_equal(inputs["doc_lengths"], lengths[lengths > 0])
    np.testing.assert_allclose(inputs["doc_topic_dists"], theta[lengths > 0], rtol=0, atol=0)
    vocab = read_vocabulary(str(root / "corpus"))
    assert inputs["vocab"] == vocab.column("word").to_pylist()
    np.testing.assert_array_equal(inputs["term_frequency"], np.asarray(vocab.column("tf")))


def test_html_loads_with_every_topic_and_the_models_top_words(root):
    url = export_ldavis(str(root), model="ap-refined")
    assert url == ldavis_path(str(root), "ap-refined")
    data = _embedded((root / "report" / "ldavis-ap-refined.html").read_text())
    assert sorted(data["mdsDat"]["topics"]) == [1, 2, 3, 4]  # one circle per topic, in the model's order
    B = open_model(str(root), "ap-refined").arrays["B"]
    words = read_vocabulary(str(root / "corpus")).column("word").to_pylist()
    listed = {(c, t) for c, t in zip(data["tinfo"]["Category"], data["tinfo"]["Term"], strict=True)}
    for k in range(4):
        top = words[int(np.argmax(B[:, k]))]
        assert (f"Topic{k + 1}", top) in listed  # the topic's most probable word is among its listed terms


def test_a_spectral_model_needs_infer_under_it_first(root):
    with pytest.raises(StoreError, match=r"no document–topic weights under model 'ap'; run `jsmf infer .* --model ap`"):
        ldavis_inputs(str(root), "ap")
    infer(str(root), model="ap", overwrite=True)
    table = read_doc_topics(str(root), "ap")
    inputs = ldavis_inputs(str(root), "ap")
    lengths = np.asarray(table.column("n_tokens"))
    np.testing.assert_allclose(inputs["doc_topic_dists"], np.array(table.column("topics").to_pylist())[lengths > 0])
    infer(str(root), model="ap-refined", overwrite=True)  # another model's weights: beside these, not over them
    np.testing.assert_array_equal(ldavis_inputs(str(root), "ap")["doc_topic_dists"], inputs["doc_topic_dists"])
    assert read_doc_topics(str(root), "ap-refined").num_rows == table.num_rows


def test_an_old_roots_single_doc_topics_moves_to_its_models_directory(root, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(root, old)
    shutil.rmtree(old / "doc_topics")
    infer(str(old), model="ap")
    (old / "doc_topics" / "ap").rename(old / "doc_topics.parquet")  # the layout of earlier versions
    (old / "doc_topics").rmdir()
    with pytest.warns(UserWarning, match=r"moved .*doc_topics.parquet \(the document weights under model 'ap'\)"):
        table = read_doc_topics(str(old), "ap")
    assert table.num_rows == 800 and not (old / "doc_topics.parquet").exists()
    assert (old / "doc_topics" / "ap" / "_infer.json").exists()


def test_cli_writes_the_view_beside_the_report_and_refuses_without_pyldavis(root, capsys, monkeypatch):
    argv = ["report", str(root), "--model", "ap-refined", "--ldavis", "--scheduler", "synchronous", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"pyLDAvis view of ap-refined: {ldavis_path(str(root), 'ap-refined')}" in out
    # a model without document weights: refused before any work, the report as it was, the fix named
    before = (root / "report" / "report.html").read_bytes()
    import shutil

    shutil.rmtree(root / "doc_topics" / "ap", ignore_errors=True)
    assert main(["report", str(root), "--model", "ap", "--ldavis", "--scheduler", "synchronous", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "no document–topic weights under model 'ap'" in err and f"jsmf infer {root} --model ap`" in err
    assert (root / "report" / "report.html").read_bytes() == before
    (root / "report" / "report.html").unlink()
    monkeypatch.setitem(sys.modules, "pyLDAvis", None)  # as if not installed
    assert main(["report", str(root), "--model", "ap-refined", "--ldavis", "--scheduler", "synchronous"]) == 1
    assert "needs pyLDAvis: pip install" in capsys.readouterr().err
    assert not (root / "report" / "report.html").exists()  # refused before any work


def test_the_view_renders_offline_in_headless_chromium(root, tmp_path):
    """The page carries d3, LDAvis's script and style itself: with every network request refused, a browser
    draws one circle per topic."""
    import os
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:  # `make test` installs it (`make browser`); CI must have it, a developer may not
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (make test installs Debian's chromium where it is missing)")
        pytest.skip("chromium is not installed here: `make browser` installs it")
    url = export_ldavis(str(root), model="ap-refined")
    html = (root / "report" / "ldavis-ap-refined.html").read_text()
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=", html)  # nothing fetched
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--proxy-server=127.0.0.1:9",  # the network: off
         "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=5000", "--dump-dom", f"file://{url}"],
        capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.count('<circle class="dot"') == 4, done.stdout[:2000]
