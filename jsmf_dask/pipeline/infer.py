"""``infer``: each document's topic composition under a model → ``<root>/doc_topics/<model>/`` (a directory of parts).

For each document, LDA's fold-in under the model's B and document prior
(:func:`~jsmf_dask.kernels.infer.document_topics`), as one Dask task per row
group of the corpus; the parts are committed together by renaming the
staged directory. Each model's weights have their own directory, so a second
model's ``infer`` leaves the first's in place. A root written before this
layout has one ``<root>/doc_topics.parquet``: it is moved to its model's
directory (with a warning) the first time weights are looked for.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass


from jsmf_dask import _progress
from jsmf_dask._validation import check_name
from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.fs import check_committed, get_fs, join, join_under, make_dir, staged_output, write_file
from jsmf_dask.io.model_store import chosen_model, list_models, open_model
from jsmf_dask.kernels.infer import model_prior
from jsmf_dask.io.parquet import corpus_dir, corpus_tokens, display_words, list_blocks, read_parquet_dir, read_vocabulary
from jsmf_dask.pipeline.fit_model import topic_labels
from jsmf_dask.stages.infer import doc_topic_tasks
from jsmf_dask.cluster import Work, choose_engine

__all__ = ["InferReport", "infer", "doc_topics_path", "read_doc_topics", "has_doc_topics", "topic_info"]

#: Beside the parts: which model the weights are under and what its topics are
#: (``{"model": name, "n_topics": K, "topics": [label, ...]}``, labels from :func:`topic_info`).
INFER_INFO = "_infer.json"
#: Where a root written before per-model weights kept its one model's (:func:`_migrate_legacy`).
LEGACY_DOC_TOPICS = "doc_topics.parquet"


def doc_topics_path(root: str, model: str) -> str:
    """``<root>/doc_topics/<model>``."""
    return join_under(root, "doc_topics", model)


def _migrate_legacy(root: str) -> None:
    """Move an old root's ``doc_topics.parquet`` to ``doc_topics/<its model>`` (said in a warning)."""
    legacy = join(root, LEGACY_DOC_TOPICS)
    fs, path = get_fs(legacy)
    if not fs.exists(path):
        return
    info = join(legacy, INFER_INFO)
    fs_info, info_path = get_fs(info)
    if not fs_info.exists(info_path):
        warnings.warn(f"{legacy}: document weights of an unknown model (no {INFER_INFO}), written by an older "
                      "version; left in place and not read: rerun `jsmf infer` for the model you want",
                      UserWarning, stacklevel=3)
        return
    with fs_info.open(info_path, "rb") as f:
        model = json.loads(f.read())["model"]
    target = doc_topics_path(root, model)
    fs_t, target_path = get_fs(target)
    if fs_t.exists(target_path):
        return
    make_dir(join(root, "doc_topics"))
    fs.mv(path, target_path, recursive=True)
    warnings.warn(f"moved {legacy} (the document weights under model {model!r}) to {target}: each model's "
                  "weights now have their own directory", UserWarning, stacklevel=3)


def has_doc_topics(root: str, model: str) -> bool:
    """Whether ``jsmf infer`` wrote document weights under ``model`` in ``root``."""
    _migrate_legacy(root)
    fs, path = get_fs(doc_topics_path(root, model))
    return fs.exists(path)


@dataclass
class InferReport:
    """What ``infer`` wrote."""

    path: str
    model: str
    n_docs: int
    n_topics: int

    def lines(self) -> list[str]:
        return [f"topic compositions of {self.n_docs} documents under model {self.model} "
                f"({self.n_topics} topics) -> {self.path}"]


def infer(root: str, *, model: str | None = None, overwrite: bool = False) -> InferReport:
    """Write every document's topic weights under ``model`` to ``<root>/doc_topics/<model>/``.

    Parameters
    ----------
    root : str
    model : str, optional
        Model name; required when the root holds more than one.
    overwrite : bool, default=False
        Replace this model's earlier weights (other models' are never touched).

    Returns
    -------
    InferReport
    """
    check_name(model, "model", "infer", allow_none=True)
    root = os.fspath(root)
    if not list_models(root):
        raise StoreError(f"{root}: no fitted models under model.zarr; run `jsmf fit` first")
    model = chosen_model(root, model)
    fitted = open_model(root, model)
    B = fitted.arrays["B"]
    corpus = corpus_dir(root)
    words = read_vocabulary(corpus).column("word").to_pylist()
    n_words = len(words)
    if B.shape[0] != n_words:
        raise StoreError(f"{fitted.url}: B has {B.shape[0]} words but {corpus}/vocab.parquet has {n_words}")
    blocks = list_blocks(corpus)
    choose_engine(Work(tokens=corpus_tokens(corpus)))
    _migrate_legacy(root)
    with staged_output(doc_topics_path(root, model), root=root, overwrite=overwrite) as tmp:
        fs, path = get_fs(tmp)
        fs.makedirs(path, exist_ok=True)
        with _progress.data_in_graph():  # the model's B
            counts = _progress.compute(*doc_topic_tasks(blocks, n_words, B, tmp, model_prior(fitted.arrays)))
        write_file(join(tmp, INFER_INFO), topic_info(model, B, fitted.arrays.get("anchors", ()),
                                                     display_words(corpus, words)), root=root)
    return InferReport(doc_topics_path(root, model), model, int(sum(counts)), B.shape[1])


def topic_info(model: str, B, anchors, words: list[str]) -> str:
    """The JSON written beside a ``doc_topics`` directory (:data:`INFER_INFO`): the model and a label per
    topic (:func:`~jsmf_dask.pipeline.fit_model.topic_labels`), so that column k of ``topics`` has a name."""
    return json.dumps({"model": model, "n_topics": int(B.shape[1]), "topics": topic_labels(B, anchors, words)},
                      ensure_ascii=False)


def read_doc_topics(root: str, model: str):
    """``<root>/doc_topics/<model>`` as one Arrow table, in corpus order."""
    _migrate_legacy(root)
    url = doc_topics_path(root, model)
    fs, path = get_fs(url)
    if not fs.exists(path):
        raise StoreError(f"{url}: missing; run `jsmf infer {root} --model {model}` first")
    check_committed(url)
    return read_parquet_dir(url)