"""``export``: a model's topics as tables other tools read (CSV, Parquet, JSON) → ``<root>/export/<model>-<format>``.

Three tables, in each format: ``topic_words`` (``topic``, ``rank``, ``word_id``, ``word``, ``probability``:
each topic's words by probability, the top ``top`` or all), ``topics`` (``topic``, ``label``, ``anchor_word_id``,
``anchor`` — null for a refined model —, ``prior``: the document–topic prior α where the model has one) and
``topic_topic`` (``A``, K × K, columns ``topic_0``…). Words are shown as the corpus shows them (item labels,
e.g. film titles with spaces and commas, stay one quoted field). JSON puts all three in ``model.json``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from jsmf_dask._validation import check_int, check_name, check_option
from jsmf_dask.io.fs import get_fs, join, join_under, staged_output
from jsmf_dask.io.model_store import chosen_model, open_model
from jsmf_dask.io.parquet import corpus_dir, display_words, read_vocabulary, write_parquet
from jsmf_dask.pipeline.fit_model import topic_labels

__all__ = ["EXPORT_FORMATS", "ExportReport", "export", "export_tables"]

EXPORT_FORMATS = ("csv", "parquet", "json")


@dataclass
class ExportReport:
    """What ``export`` wrote."""

    path: str
    model: str
    format: str
    n_topics: int
    n_rows: int

    def lines(self) -> list[str]:
        return [f"model {self.model} ({self.n_topics} topics, {self.n_rows} topic-word rows) as {self.format} "
                f"-> {self.path}"]


def export_tables(B: np.ndarray, A: np.ndarray, anchors: np.ndarray, alpha: np.ndarray | None, words: list[str],
                  top: int | None = None) -> dict[str, pa.Table]:
    """The three tables of a model (``B`` N × K, ``A`` K × K); ``top`` words per topic (None: all)."""
    n, k = B.shape
    m = n if top is None else min(top, n)
    order = np.argsort(-B, axis=0, kind="stable")[:m]  # (m, K)
    topic = np.repeat(np.arange(k), m)
    word_id = order.T.ravel()
    topic_words = pa.table({"topic": pa.array(topic, pa.int32()), "rank": pa.array(np.tile(np.arange(m), k), pa.int32()),
                            "word_id": pa.array(word_id, pa.int32()),
                            "word": pa.array([words[i] for i in word_id], pa.string()),
                            "probability": pa.array(B[word_id, topic])})
    anchored = len(anchors) == k
    topics = pa.table({"topic": pa.array(np.arange(k), pa.int32()),
                       "label": pa.array(topic_labels(B, anchors, words), pa.string()),
                       "anchor_word_id": pa.array([int(a) for a in anchors] if anchored else [None] * k, pa.int32()),
                       "anchor": pa.array([words[a] for a in anchors] if anchored else [None] * k, pa.string()),
                       "prior": pa.array(alpha if alpha is not None else [None] * k, pa.float64())})
    topic_topic = pa.table({f"topic_{j}": A[:, j] for j in range(k)})
    return {"topic_words": topic_words, "topics": topics, "topic_topic": topic_topic}


def export(root: str, *, model: str | None = None, format: str = "csv", top: int | None = None,
           overwrite: bool = False) -> ExportReport:
    """Write model ``model``'s tables (:func:`export_tables`) to ``<root>/export/<model>-<format>``.

    Parameters
    ----------
    root : str
    model : str, optional
        Required when the root holds several models.
    format : {'csv', 'parquet', 'json'}, default='csv'
    top : int, optional
        Words per topic (default: all N).
    overwrite : bool, default=False

    Returns
    -------
    ExportReport
    """
    root = os.fspath(root)
    check_name(model, "model", "export", allow_none=True)
    check_option(format, "format", "export", EXPORT_FORMATS)
    check_int(top, "top", "export", low=1, allow_none=True)
    model = chosen_model(root, model)
    fitted = open_model(root, model)
    corpus = corpus_dir(root)
    words = display_words(corpus, read_vocabulary(corpus).column("word").to_pylist())
    tables = export_tables(fitted.arrays["B"], fitted.arrays["A"], fitted.arrays.get("anchors", np.zeros(0, int)),
                           fitted.arrays.get("alpha"), words, top)
    out = join_under(root, "export", f"{model}-{format}")
    with staged_output(out, root=root, overwrite=overwrite) as tmp:
        fs = get_fs(tmp)[0]
        if format == "json":
            document = {"model": model, "n_topics": int(fitted.arrays["B"].shape[1])} | \
                {name: table.to_pylist() for name, table in tables.items()}
            with fs.open(get_fs(join(tmp, "model.json"))[1], "w") as f:
                json.dump(document, f, ensure_ascii=False)
        for name, table in tables.items() if format == "csv" else ():
            with fs.open(get_fs(join(tmp, f"{name}.csv"))[1], "wb") as f:
                pacsv.write_csv(table, f)
        for name, table in tables.items() if format == "parquet" else ():
            write_parquet(join(tmp, f"{name}.parquet"), table)
    return ExportReport(out, model, format, int(fitted.arrays["B"].shape[1]), tables["topic_words"].num_rows)
