"""``jsmf export`` and ``topics/<name>.json``: the model as tables, labels with spaces and commas kept whole."""

from __future__ import annotations

import csv
import json

import dask
import numpy as np
import pytest

from jsmf_dask import cooccur, fit, ingest, open_model, refine
from jsmf_dask.cli import main
from jsmf_dask.exceptions import InvalidParameterError, StoreError
from jsmf_dask.io.parquet import read_parquet
from jsmf_dask.kernels.synthetic import sample_corpus
from jsmf_dask.pipeline.export import export

from ..conftest import write_uci


@pytest.fixture(scope="module")
def labelled_root(tmp_path_factory):
    """A bag-of-words corpus whose words carry film-like labels with spaces, commas and quotes."""
    base = tmp_path_factory.mktemp("export")
    rng = np.random.default_rng(2)
    B = rng.dirichlet(np.full(50, 0.2), size=3).T
    corpus = sample_corpus(B, np.full(3, 0.3), 600, 40, rng)
    docs = [dict(zip(corpus.word_ids[a:b].tolist(), corpus.counts[a:b].tolist()))
            for a, b in zip(corpus.offsets[:-1], corpus.offsets[1:])]
    vocab = [f"item{i}" for i in range(50)]
    docword = write_uci(base, docs, vocab, name="films")
    labels = base / "labels.csv"
    with labels.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["item", "title"])
        for i in range(50):
            w.writerow([f"item{i}", f'Film {i}, The "Sequel" ({1990 + i})'])
    root = base / "root"
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):  # as conftest's per-test fixture
        ingest(root, [str(docword)], labels=str(labels))
        cooccur(root)
        fit(root, n_topics=3, min_anchor_df=0, iterations=30, name="k3")
        refine(root, model="k3", name="k3-cvb0")
    return root


def test_export_tables_in_every_format_agree_with_the_model(labelled_root):
    model = open_model(str(labelled_root), "k3")
    B, A = model.arrays["B"], model.arrays["A"]
    csv_report = export(labelled_root, model="k3", format="csv")
    with open(f"{csv_report.path}/topic_words.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    from jsmf_dask.io.parquet import read_vocabulary

    items = read_vocabulary(str(labelled_root / "corpus")).column("word").to_pylist()  # item<i>, in ingest's order
    n = len(items)
    assert len(rows) == 3 * n == csv_report.n_rows
    for row in rows:
        i = int(items[int(row["word_id"])][len("item"):])
        assert row["word"] == f'Film {i}, The "Sequel" ({1990 + i})'  # one field: spaces, comma and quotes kept
        assert float(row["probability"]) == pytest.approx(B[int(row["word_id"]), int(row["topic"])], rel=1e-15)
    first = [r for r in rows if r["topic"] == "0"]
    assert [int(r["rank"]) for r in first] == list(range(n))
    assert [float(r["probability"]) for r in first] == sorted(B[:, 0], reverse=True)
    parquet = export(labelled_root, model="k3", format="parquet", top=5)
    words = read_parquet(f"{parquet.path}/topic_words.parquet")
    assert words.num_rows == 15 and set(words.column("rank").to_pylist()) == set(range(5))
    topic_topic = read_parquet(f"{parquet.path}/topic_topic.parquet")
    np.testing.assert_array_equal(np.column_stack([c.to_numpy() for c in topic_topic.columns]), A)
    topics = read_parquet(f"{parquet.path}/topics.parquet").to_pylist()
    assert [t["anchor_word_id"] for t in topics] == model.arrays["anchors"].tolist()
    assert all(t["prior"] is None for t in topics)  # a spectral model has no document prior
    refined = json.loads(open(f"{export(labelled_root, model='k3-cvb0', format='json').path}/model.json").read())
    alpha = open_model(str(labelled_root), "k3-cvb0").arrays["alpha"]
    assert [t["prior"] for t in refined["topics"]] == pytest.approx(alpha.tolist(), rel=1e-15)
    assert all(t["anchor"] is None for t in refined["topics"]) and len(refined["topic_words"]) == 3 * B.shape[0]
    with pytest.raises(StoreError, match="exists"):
        export(labelled_root, model="k3", format="csv")
    with pytest.raises(InvalidParameterError, match="'top' parameter of export must be an int"):
        export(labelled_root, model="k3", top=0)


def test_topics_json_beside_the_text(labelled_root):
    text = (labelled_root / "topics" / "k3-cvb0.txt").read_text()
    data = json.loads((labelled_root / "topics" / "k3-cvb0.json").read_text())
    assert data["model"] == "k3-cvb0" and data["n_topics"] == 3
    for k, topic in enumerate(data["topics"]):
        assert len(topic["words"]) == 20 and topic["probabilities"] == sorted(topic["probabilities"], reverse=True)
        assert " | ".join(topic["words"][:3]) in text.splitlines()[k]  # the text's first words, each label whole


def test_export_command_line(labelled_root, capsys):
    assert main(["export", str(labelled_root), "--model", "k3", "--format", "parquet", "--overwrite"]) == 0
    assert "k3-parquet" in capsys.readouterr().out
    assert main(["export", str(labelled_root), "--model", "nope"]) == 1
    assert "no such model" in capsys.readouterr().err
    assert main(["export", str(labelled_root)]) == 1
    assert "choose a model with --model" in capsys.readouterr().err
