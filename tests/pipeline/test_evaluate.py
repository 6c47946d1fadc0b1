"""evaluate, compare, report and infer on a small semi-synthetic root, checked against dense references."""

from __future__ import annotations

import base64
import csv as csvlib
import io
from html import unescape
import json
import math
import re
import os
import shutil
import subprocess

import numpy as np
import pyarrow.parquet as pq
import pytest

from jsmf_dask import RectifiedAnchorWords, compare, cooccur, evaluate, fit, infer, open_cooccurrence, open_model, report, synth
from jsmf_dask.kernels.metrics import match_topics
from jsmf_dask.pipeline.infer import read_doc_topics
from jsmf_dask.pipeline.synth import read_truth


@pytest.fixture(scope="module")
def fitted_root(tmp_path_factory):
    import dask

    root = tmp_path_factory.mktemp("evaluate")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        synth(root, n_docs=4000, n_words=250, n_topics=5, doc_length=60, seed=3, row_group_size=1000)
        cooccur(root, tile_size=100)
        fit(root, n_topics=5, rectifier="ap", iterations=30, min_anchor_df=0)
        with pytest.warns(UserWarning, match="never co-occur"):  # rare anchors without rectification
            fit(root, n_topics=5, rectifier="none", min_anchor_df=0)
    return root


def dense_metrics(C: np.ndarray, B: np.ndarray, A: np.ndarray, W: np.ndarray, anchors: np.ndarray) -> dict:
    """Recovery, approximation and specificity the slow, obvious way."""
    Cn = C / C.sum()
    rs = C.sum(axis=1, keepdims=True)
    # words in no document keep a zero row; so do rows that are zero to rounding (a row AP's clip emptied sums
    # to ±1e-19 in the low-rank form an AP model is stored in: 1e-12 of the largest sum is far above that)
    Cbar = C / np.where(rs > 1e-12 * rs.max(), rs, 1.0)
    rec = np.mean([np.linalg.norm(Cbar[i] - W[i] @ Cbar[anchors]) for i in range(C.shape[0])])
    apx = np.linalg.norm(Cn - B @ A @ B.T)
    p = Cn.sum(axis=1)
    spec = np.mean([np.sum(B[B[:, k] > 0, k] * np.log2(B[B[:, k] > 0, k] / np.maximum(p[B[:, k] > 0], 2.2e-16)))
                    for k in range(B.shape[1])])
    return {"recovery": rec, "approximation": apx, "specificity": spec}


def slow_topic_metrics(B: np.ndarray, A: np.ndarray, D1: np.ndarray, D2: np.ndarray, M: int, n: int = 20) -> dict:
    """Dissimilarity, coherence (paper §4, ordered pairs, ε = 0.01), NPMI (unordered pairs, probabilities over the
    M documents C counted; −1 for a pair in no common document) and dominancy, word by word."""
    k = B.shape[1]
    tops = [list(np.argsort(-B[:, t], kind="stable")[:n]) for t in range(k)]
    unique = [sum(all(w not in tops[o] for o in range(k) if o != t) for w in tops[t]) for t in range(k)]
    coherence_sum = npmi_sum = 0.0
    for top in tops:
        for x1 in top:
            for x2 in top:
                if x1 != x2:
                    coherence_sum += math.log((D2[x1, x2] + 0.01) / max(D1[x2], 1))
        pairs = [(x, y) for i, x in enumerate(top) for y in top[i + 1:]]
        npmi = []
        for x, y in pairs:
            pxy, px, py = D2[x, y] / M, max(D1[x], 1) / M, max(D1[y], 1) / M
            npmi.append(-1.0 if pxy == 0 else 0.0 if pxy == 1 else math.log(pxy / (px * py)) / -math.log(pxy))
        npmi_sum += sum(npmi) / len(pairs)
    rows = A.sum(axis=1)
    dominancy = sum(A[t, t] / rows[t] for t in range(k)) / k if (rows > 0).all() else float("nan")
    return {"dissimilarity": sum(unique) / k, "coherence": coherence_sum / k, "npmi": npmi_sum / k,
            "dominancy": dominancy}


def test_evaluate_matches_dense_references(fitted_root):
    out = evaluate(fitted_root)
    assert json.loads((fitted_root / "report" / "metrics.json").read_text()) == out
    store = open_cooccurrence(f"{fitted_root}/cooc.zarr")
    C = store.C[:]
    D1, D2 = store.D1[:], store.D2[:]
    for name in ("k5-ap", "k5-none"):
        model = open_model(fitted_root, name)
        B, W, anchors = model.arrays["B"], model.arrays["weights"], model.arrays["anchors"]
        C_rect = model.rectified_C()
        A = model.arrays["A"]
        shared = slow_topic_metrics(B, A, D1, D2, store.attrs["n_docs"])
        for label, CC in (("original_C", C), ("rectified_C", C_rect)):
            got = out["models"][name][label]
            want = dense_metrics(CC, B, A, W, anchors) | shared
            for metric, value in want.items():
                if math.isnan(value):  # reported as null, with the reason
                    assert got[metric] is None and "never co-occur" in got["notes"][metric], (name, label, metric)
                else:
                    assert got[metric] == pytest.approx(value, rel=1e-9, abs=1e-12), (name, label, metric)
    # the rectified A is doubly non-negative, so its dominancy is a proper fraction
    assert 0 < out["models"]["k5-ap"]["rectified_C"]["dominancy"] <= 1


def test_report_is_self_contained_with_non_blank_figures(fitted_root):
    from matplotlib.image import imread

    path = report(fitted_root)
    html = (fitted_root / "report" / "report.html").read_text()
    assert path.endswith("report/report.html")
    sources = re.findall(r'src="([^"]*)"', html)
    assert len(sources) >= 3 and all(s.startswith("data:image/png;base64,") for s in sources)
    assert not re.search(r'(href|src)="(?!data:)', html)  # nothing outside the file
    for s in sources:
        assert base64.b64decode(s.split(",", 1)[1]).startswith(b"\x89PNG")
    pngs = sorted((fitted_root / "report").glob("*.png"))
    assert {p.name for p in pngs} == {"anchor-hull.png", "topic-topic.png", "ap-trace.png"}
    for png in pngs:
        pixels = imread(png)[..., :3]
        assert pixels.var() > 1e-3, png.name  # not a blank canvas
    assert "Figure 1" in html and "Figure 3" in html and "k5-ap" in html
    # each topic list once (a table), the default model is the AP one that has its Baseline, captions say so
    assert html.count("Topics of k5-ap<") == 1 and html.count("Topics of k5-none") == 1
    assert "The Baseline's (k5-none) least-squares A has" in unescape(html)


def test_report_without_a_baseline_says_what_it_shows(fitted_root, tmp_path):
    import shutil as sh

    root = tmp_path / "nobase"
    for part in ("corpus", "cooc.zarr"):
        sh.copytree(fitted_root / part, root / part)
    sh.copytree(fitted_root / "model.zarr" / "k5-ap", root / "model.zarr" / "k5-ap")
    sh.copy(fitted_root / "model.zarr" / "zarr.json", root / "model.zarr" / "zarr.json")
    report(root)
    html = unescape((root / "report" / "report.html").read_text())
    caption = html.split("Figure 3")[1].split("</p>")[0]
    assert "The Baseline's" not in caption
    assert "The least-squares A of k5-ap's B (no Baseline model of K = 5 under this root)" in caption


def test_heatmap_ticks_are_whole_topics():
    from jsmf_dask.render import figures

    captured = {}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    real_close = plt.close
    plt.close = lambda fig: captured.__setitem__("fig", fig)
    try:
        figures.topic_topic_heatmaps({"A": np.eye(7) / 7})
        ax = captured["fig"].axes[0]
        assert list(ax.get_xticks()) == list(range(7)) and list(ax.get_yticks()) == list(range(7))
        # K = 20 and 50: at most 12 labels a side, so they do not run together
        figures.topic_topic_heatmaps({"A": np.eye(20) / 20})
        assert list(captured["fig"].axes[0].get_xticks()) == list(range(0, 20, 2))
        figures.topic_topic_heatmaps({"A": np.eye(50) / 50})
        assert list(captured["fig"].axes[0].get_yticks()) == list(range(0, 50, 5))
    finally:
        plt.close = real_close


def test_report_renders_in_headless_chromium(fitted_root, tmp_path):
    from matplotlib.image import imread

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:  # `make test` installs it (`make browser`); CI must have it, a developer may not
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (make test installs Debian's chromium where it is missing)")
        pytest.skip("chromium is not installed here: `make browser` installs it")
    report(fitted_root)
    shot = tmp_path / "shot.png"
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,2400",
         (fitted_root / "report" / "report.html").as_uri()],
        check=True, capture_output=True, timeout=120,
    )
    pixels = imread(shot)[..., :3]
    assert pixels.shape[0] >= 2000 and pixels.var() > 1e-3


def test_compare_runs_every_method_and_writes_table_and_figure(tmp_path):
    from matplotlib.image import imread

    synth(tmp_path, n_docs=1500, n_words=120, n_topics=3, doc_length=50, seed=5)
    cooccur(tmp_path, tile_size=64, heldout=0.2)
    methods = ("none", "dc", "ap", "ap+vb", "gibbs")
    result = compare(tmp_path, topics=[3, 4], methods=list(methods), iterations=20, gibbs_iterations=50)
    assert [(r["method"], r["n_topics"]) for r in result.rows] == [(m, k) for k in (3, 4) for m in methods]
    csv = (tmp_path / "report" / "compare.csv").read_text().splitlines()
    assert len(csv) == 11 and csv[0].startswith("method,n_topics,model,recovery")
    md = (tmp_path / "report" / "compare.md").read_text()
    assert md.count("| gibbs |") == 2 and md.count("| ap+vb |") == 2 and "perplexity" in md
    by = {(r["method"], r["n_topics"]): r for r in result.rows}
    for k in (3, 4):  # ap+vb refines the ap model of the same K; every model trained without the held-out docs
        assert by[("ap+vb", k)]["model"] == f"k{k}-ap-vb"
        assert all(by[(m, k)]["perplexity"] > 1 and by[(m, k)]["perplexity_sampled"] > 1 for m in methods)
        assert by[("ap+vb", k)]["perplexity"] < by[("none", k)]["perplexity"]
        assert by[("ap+vb", k)]["perplexity_sampled"] < by[("none", k)]["perplexity_sampled"]
    gibbs = [r for r in result.rows if r["method"] == "gibbs"]
    C = open_cooccurrence(f"{tmp_path}/cooc.zarr").C[:]
    for r in gibbs:  # no anchors (no recovery), but scored like any model: ‖C/ΣC − BABᵀ‖ by hand
        g = open_model(tmp_path, r["model"])
        B, A = g.arrays["B"], g.arrays["A"]
        assert r["recovery"] is None
        assert r["approximation"] == pytest.approx(np.linalg.norm(C / C.sum() - B @ A @ B.T), rel=1e-9)
    assert imread(tmp_path / "report" / "compare.png")[..., :3].var() > 1e-3
    assert "| npmi |" in md and all(-1 <= r["npmi"] <= 1 for r in result.rows)
    # a later sweep adds to the table: new (method, K) rows join, a method measured again replaces its rows;
    # the earlier table may be one written before NPMI was a column
    table = tmp_path / "report" / "compare.csv"
    rows = list(csvlib.DictReader(table.read_text().splitlines()))
    old = io.StringIO()
    writer = csvlib.DictWriter(old, fieldnames=[c for c in rows[0] if c != "npmi"], extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    table.write_text(old.getvalue())
    again = compare(tmp_path, topics=[5, 3], methods=["ap"], iterations=10)
    keys = [(r["method"], r["n_topics"]) for r in again.rows]
    assert keys == [(m, k) for k in (3, 4) for m in ("ap", "dc", "none", "ap+vb", "gibbs")] + [("ap", 5)]
    fresh = {(r["method"], r["n_topics"]): r for r in again.rows}
    kept = {key: value for key, value in by[("gibbs", 4)].items() if key != "npmi"}
    assert fresh[("gibbs", 4)] == pytest.approx(kept)  # as it was (read back from the earlier CSV)
    written = {(r["method"], r["n_topics"]): r for r in csvlib.DictReader(table.read_text().splitlines())}
    assert written[("gibbs", "4")]["npmi"] == "" and float(written[("ap", "3")]["npmi"]) == fresh[("ap", 3)]["npmi"]
    assert open_model(tmp_path, "k3-ap").attrs["params"]["iterations"] == 10  # ap at K = 3 was refitted
    assert fresh[("ap", 3)]["recovery"] == pytest.approx(evaluate(tmp_path, models=["k3-ap"])["models"]["k3-ap"]
                                                         ["original_C"]["recovery"])
    assert (tmp_path / "report" / "compare.md").read_text().count("| gibbs |") == 2


def test_compare_reports_the_gibbs_chain_of_median_perplexity(tmp_path):
    """Several chains (seeds 0, 1, 2): the row is the chain whose held-out perplexity is the median of the three,
    computed here from evaluate's own figures for every chain."""
    from jsmf_dask.exceptions import InvalidParameterError

    pytest.importorskip("tomotopy")
    synth(tmp_path, n_docs=600, n_words=80, n_topics=3, doc_length=30, seed=6)
    cooccur(tmp_path, heldout=0.2)
    result = compare(tmp_path, topics=[3], methods=["gibbs"], gibbs_iterations=5, gibbs_chains=3)
    chains = ["k3-gibbs", "k3-gibbs-c2", "k3-gibbs-c3"]
    assert [open_model(tmp_path, c).attrs["params"]["seed"] for c in chains] == [0, 1, 2]
    ppl = {c: m["heldout"]["perplexity"] for c, m in evaluate(tmp_path, models=chains)["models"].items()}
    assert len(set(ppl.values())) == 3  # five sweeps: the chains differ
    (row,) = result.rows
    assert row["model"] == sorted(chains, key=ppl.get)[1] and row["perplexity"] == pytest.approx(ppl[row["model"]])
    with pytest.raises(InvalidParameterError, match="'gibbs_chains' parameter of compare"):
        compare(tmp_path, topics=[3], methods=["gibbs"], gibbs_chains=0)


def test_compare_names_the_missing_extra(tmp_path, monkeypatch):
    import builtins

    from jsmf_dask.pipeline.gibbs import MissingExtraError

    real_import = builtins.__import__

    def no_tomotopy(name, *args, **kwargs):
        if name == "tomotopy":
            raise ImportError("No module named 'tomotopy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tomotopy)
    with pytest.raises(MissingExtraError, match=r"pip install 'jsmf_dask\[gibbs\]'"):
        compare(tmp_path, topics=[3], methods=["ap", "gibbs"])
    assert not (tmp_path / "model.zarr").exists()


def test_infer_recovers_document_mixtures(fitted_root):
    rep = infer(fitted_root, model="k5-ap")
    table = read_doc_topics(fitted_root, "k5-ap")
    assert rep.n_docs == table.num_rows == 4000
    assert table.column("doc_id").to_pylist()[:3] == ["d0", "d1", "d2"]
    theta = np.asarray(table.column("topics").to_pylist())
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, atol=1e-9)
    truth = read_truth(fitted_root)
    import zarr

    true_theta = zarr.open_group(str(fitted_root / "truth.zarr"), mode="r")["theta"][:].astype(float)
    B = open_model(fitted_root, "k5-ap").arrays["B"]
    theta = theta[:, match_topics(B, truth["B"])]  # fitted topics in the order of the true ones
    err = np.abs(theta - true_theta).sum(axis=1).mean()
    uniform = np.abs(1 / 5 - true_theta).sum(axis=1).mean()
    corpus_level = np.abs(true_theta.mean(axis=0) - true_theta).sum(axis=1).mean()
    # measured: err 0.142 (least squares, before the fold-in: 0.166), uniform 1.313, corpus-level weights 1.313
    # (60 tokens a document, Dirichlet(0.1))
    assert err < 0.25 * min(uniform, corpus_level)
    assert math.isfinite(err)


def test_transform_returns_the_topic_of_a_pure_document(fitted_root):
    model = RectifiedAnchorWords(n_components=5, max_iter=30, min_anchor_df=0).fit_root(fitted_root, name="k5-est")
    docs = model.components_ * 500
    theta = model.transform(docs)
    assert (theta.argmax(axis=1) == np.arange(5)).all()
    assert theta.max(axis=1).min() > 0.99
    with pytest.raises(ValueError, match="X has 7 features, but RectifiedAnchorWords is expecting 250 features"):
        model.transform(np.ones((2, 7)))


def test_doc_topics_parquet_schema(fitted_root):
    infer(fitted_root, model="k5-ap", overwrite=True)
    files = sorted((fitted_root / "doc_topics" / "k5-ap").glob("part-*.parquet"))
    assert len(files) == 4  # one part per row group
    schema = pq.read_schema(files[0])
    assert schema.names == ["doc_id", "n_tokens", "topics"] and schema.field("topics").type.list_size == 5


def test_a_store_without_d2_counts_the_same_co_document_frequencies_from_the_corpus(tmp_path):
    """The fallback of ``--no-codoc`` stores counts exactly the documents C counted: neither held-out nor
    validation ones (it used to leave out only the held-out ones)."""
    from jsmf_dask.io.parquet import corpus_dir, list_blocks
    from jsmf_dask.pipeline.evaluate import top_word_codocs

    synth(tmp_path, n_docs=600, n_words=80, n_topics=3, doc_length=30, seed=4)
    blocks = list_blocks(corpus_dir(str(tmp_path)))
    cooccur(tmp_path, heldout=0.2, validation=0.2, tile_size=32)
    top = np.argsort(open_cooccurrence(f"{tmp_path}/cooc.zarr").group["D1"][:])[::-1][:8].reshape(2, 4)
    with_d2 = top_word_codocs(open_cooccurrence(f"{tmp_path}/cooc.zarr"), blocks, top)
    cooccur(tmp_path, heldout=0.2, validation=0.2, tile_size=32, codoc=False, overwrite=True)
    store = open_cooccurrence(f"{tmp_path}/cooc.zarr")
    assert "D2" not in store.group
    np.testing.assert_array_equal(top_word_codocs(store, blocks, top), with_d2)
    assert with_d2[0, 0, 0] == store.group["D1"][top[0, 0]] > 0  # on the diagonal: the word's document frequency
