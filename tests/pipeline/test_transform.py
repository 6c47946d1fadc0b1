"""``jsmf transform``: topics of new documents, read as the corpus was, the run root left as it is."""

from __future__ import annotations

import hashlib
import json
import string
from pathlib import Path

import dask
import numpy as np
import pytest

from jsmf_dask import cooccur, fit, infer, ingest, refine
from jsmf_dask.cli import main
from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.parquet import read_parquet_dir
from jsmf_dask.kernels.synthetic import sample_corpus
from jsmf_dask.pipeline.infer import read_doc_topics
from jsmf_dask.pipeline.transform import transform

WORDS = ["".join(string.ascii_lowercase[(i // 26 ** p) % 26] for p in range(3)) + "x" for i in range(80)]


def _texts(n_docs: int, seed: int, prefix: str) -> list[dict]:
    """Documents of pseudo-words drawn from four plain-LDA topics, as JSONL records {id, text}."""
    rng = np.random.default_rng(0)
    B = rng.dirichlet(np.full(len(WORDS), 0.2), size=4).T
    corpus = sample_corpus(B, np.full(4, 0.3), n_docs, 40, np.random.default_rng(seed))
    records = []
    for d in range(n_docs):
        a, b = corpus.offsets[d], corpus.offsets[d + 1]
        tokens = [WORDS[w] for w, c in zip(corpus.word_ids[a:b], corpus.counts[a:b]) for _ in range(c)]
        records.append({"id": f"{prefix}{d}", "text": " ".join(tokens)})
    return records


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def text_root(tmp_path_factory):
    base = tmp_path_factory.mktemp("transform")
    root = base / "root"
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):  # as conftest's per-test fixture
        ingest(root, [str(_write(base / "train.jsonl", _texts(1200, 1, "t")))], id_column="id")
        cooccur(root, validation=0.05)
        fit(root, n_topics=4, min_anchor_df=0, iterations=50, name="k4")
        refine(root, model="k4", name="k4-cvb0")
    return root


def test_transform_equals_append_and_infer_and_leaves_the_root_as_it_is(text_root, tmp_path):
    new = _texts(60, 2, "n")
    new[3]["text"] += " unknownword anotherone the and"  # unknown words and stop words are counted, not errors
    new.append({"id": "empty", "text": "nothing here matches"})  # no word of the vocabulary
    inputs = [str(_write(tmp_path / "new.jsonl", new))]
    before = _tree_digest(text_root)
    for model in ("k4-cvb0", "k4"):
        report = transform(text_root, inputs, model=model, output=str(tmp_path / f"{model}.parquet"))
        assert _tree_digest(text_root) == before  # byte-identical: nothing written, nothing touched
        assert report.n_docs == 61 and report.n_empty == 1 and report.empty_doc_ids == ["empty"]
        assert report.n_unknown >= 2 + 3 and "no word of the vocabulary" in report.lines()[-1]
    table = read_parquet_dir(str(tmp_path / "k4-cvb0.parquet"))
    assert table.column_names == ["doc_id", "n_tokens", "n_unknown", "topics"]
    rows = {d: i for i, d in enumerate(table.column("doc_id").to_pylist())}
    weights = np.array(table.column("topics").to_pylist())
    alpha = __import__("jsmf_dask").open_model(str(text_root), "k4-cvb0").arrays["alpha"]
    np.testing.assert_allclose(weights[rows["empty"]], alpha / alpha.sum(), rtol=1e-12)  # the prior's mean
    from jsmf_dask.kernels.infer import model_prior

    spectral = read_parquet_dir(str(tmp_path / "k4.parquet"))
    prior = model_prior(__import__("jsmf_dask").open_model(str(text_root), "k4").arrays)  # moment-matched to A
    np.testing.assert_allclose(spectral.column("topics")[rows["empty"]].as_py(), prior / prior.sum(), rtol=1e-12)
    assert table.column("n_tokens")[rows["empty"]].as_py() == 0
    assert table.column("n_unknown")[rows["empty"]].as_py() == 3
    # the same documents appended to a copy of the corpus and inferred: the same weights
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(text_root, copy)
    ingest(copy, inputs, id_column="id", append=True)
    for model in ("k4-cvb0", "k4"):
        infer(copy, model=model, overwrite=True)
        stored = read_doc_topics(copy, model)
        appended = {d: w for d, w in zip(stored.column("doc_id").to_pylist(), stored.column("topics").to_pylist())
                    if d.startswith("n")}
        table = read_parquet_dir(str(tmp_path / f"{model}.parquet"))
        mine = dict(zip(table.column("doc_id").to_pylist(), table.column("topics").to_pylist()))
        assert len(appended) == 60
        for doc, w in appended.items():
            np.testing.assert_allclose(mine[doc], w, rtol=0, atol=1e-10)


def test_transform_from_the_command_line_and_its_errors(text_root, tmp_path, capsys):
    inputs = str(_write(tmp_path / "new.jsonl", _texts(20, 3, "c")))
    out = tmp_path / "out.parquet"
    assert main(["transform", str(text_root), inputs, "--model", "k4-cvb0", "--output", str(out), "--quiet"]) == 0
    assert len(read_parquet_dir(str(out))) == 20
    assert main(["transform", str(text_root), inputs, "--model", "k4-cvb0", "--output", str(out), "--quiet"]) == 1
    assert "exists" in capsys.readouterr().err
    assert main(["transform", str(text_root), inputs, "--model", "k9", "--output", str(tmp_path / "x")]) == 1
    assert "no such model" in capsys.readouterr().err
    assert main(["transform", str(text_root), inputs, "--output", str(tmp_path / "x")]) == 1
    assert "choose a model with --model; fitted models: ['k4', 'k4-cvb0']" in capsys.readouterr().err
    assert main(["transform", str(text_root), str(tmp_path / "missing.jsonl"), "--model", "k4",
                 "--output", str(tmp_path / "x")]) == 1
    assert "missing.jsonl: no such file or directory" in capsys.readouterr().err
    before = _tree_digest(text_root)
    with pytest.raises(StoreError, match="inside the run root"):
        transform(text_root, [inputs], model="k4", output=str(text_root / "topics-new"))
    with pytest.raises(StoreError, match="inside the run root"):
        transform(text_root, [inputs], model="k4", output=str(text_root))
    assert _tree_digest(text_root) == before and not (tmp_path / "x").exists()


@pytest.mark.parametrize("fmt", ["baskets", "ratings", "uci"])
def test_every_input_format_reads_as_the_corpus_did(fmt, tmp_path):
    """Baskets (with the corpus's own delimiter), ratings (its columns: two copies a star) and UCI bag of words:
    transform's weights equal those `infer` gives the same documents inside the corpus (1e-10)."""
    rng = np.random.default_rng(5)
    B = rng.dirichlet(np.full(30, 0.3), size=3).T
    corpus = sample_corpus(B, np.full(3, 0.3), 400, 12, rng)
    docs = [dict(zip(corpus.word_ids[a:b].tolist(), corpus.counts[a:b].tolist()))
            for a, b in zip(corpus.offsets[:-1], corpus.offsets[1:])]
    items = [f"item {i}" if fmt == "baskets" else f"i{i}" for i in range(30)]  # a space inside: one item
    if fmt == "baskets":
        path = tmp_path / "baskets.txt"
        path.write_text("".join("|".join(items[w] for w, c in d.items() for _ in range(c)) + "\n" for d in docs))
        options = {"format": "baskets", "delimiter": "|"}
    elif fmt == "ratings":
        path = tmp_path / "ratings.csv"
        path.write_text("who,what,stars,when\n" + "".join(
            f"u{d},{items[w]},{min(c, 5) / 2},0\n" for d, doc in enumerate(docs) for w, c in doc.items()))
        from jsmf_dask.io.sources import RatingsColumns

        options = {"format": "ratings", "ratings_columns": RatingsColumns("who", "what", "stars")}
    else:
        from ..conftest import write_uci

        path = write_uci(tmp_path, docs, items, name="bow")
        options = {}
    root = tmp_path / "root"
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        ingest(root, [str(path)], min_doc_tokens=2, min_doc_words=2, **options)
        cooccur(root)
        fit(root, n_topics=3, min_anchor_df=0, iterations=30, name="k3")
        refine(root, model="k3", name="k3-cvb0", sweeps=5)
        infer(root, model="k3-cvb0")
        report = transform(root, [str(path)], model="k3-cvb0", output=str(tmp_path / "out"))
    stored = read_doc_topics(root, "k3-cvb0")
    inside = dict(zip(stored.column("doc_id").to_pylist(), stored.column("topics").to_pylist()))
    table = read_parquet_dir(str(tmp_path / "out"))
    new = dict(zip(table.column("doc_id").to_pylist(), table.column("topics").to_pylist()))
    assert report.format == fmt and report.n_unknown == 0 and set(inside) <= set(new)
    for doc, weights in inside.items():
        np.testing.assert_allclose(new[doc], weights, rtol=0, atol=1e-10)
