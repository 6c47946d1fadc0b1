"""``report --ldavis``: a model as pyLDAvis's interactive view → ``<root>/report/ldavis-<model>.html``.

pyLDAvis (Sievert & Shirley 2014; ``pip install pyLDAvis``, optional) draws
the topics from five inputs, all of which a run root holds: the topic–word
distributions (the model's ``B``, transposed), each document's topic weights
and length (a refined model's own ``doc_topics/``, or ``<root>/doc_topics/<model>/``
when ``jsmf infer`` wrote them), the vocabulary (with
``labels.parquet`` applied) and the words' corpus frequencies (``vocab.parquet``'s
``tf``). Words a topic gives probability 0 (anchor-word models have many) are
shown at ``PROBABILITY_FLOOR``, because pyLDAvis takes logarithms of them.
"""

from __future__ import annotations

import os

import numpy as np

from jsmf_dask._validation import check_name
from jsmf_dask.exceptions import JSMFError, StoreError
from jsmf_dask.io.fs import get_fs, join, join_under, write_file
from jsmf_dask.io.model_store import open_model
from jsmf_dask.io.parquet import corpus_dir, display_words, read_parquet_dir, read_vocabulary
from jsmf_dask.pipeline.infer import has_doc_topics, read_doc_topics
from jsmf_dask.render.page import script_json

__all__ = ["check_ldavis", "ldavis_inputs", "export_ldavis", "ldavis_path", "require_pyldavis", "PROBABILITY_FLOOR"]

PROBABILITY_FLOOR = 1e-12


def ldavis_path(root: str, model: str) -> str:
    """``<root>/report/ldavis-<model>.html``."""
    return join_under(root, "report", f"ldavis-{model}.html")


def require_pyldavis():
    """The pyLDAvis module, or a :class:`JSMFError` that says how to install it."""
    try:
        import pyLDAvis
    except ImportError as err:
        raise JSMFError("the pyLDAvis export needs pyLDAvis: pip install 'jsmf_dask[ldavis]' "
                        "(or pip install pyLDAvis)") from err
    return pyLDAvis


def _weights_of(root: str, model) -> str:
    """Where ``model``'s document–topic weights are: ``'own'`` (a refined model's ``doc_topics/``) or
    ``'inferred'`` (``<root>/doc_topics/<model>/``); else :class:`StoreError` with the command that writes
    them."""
    fs, path = get_fs(join(model.url, "doc_topics"))
    if fs.exists(path):
        return "own"
    if has_doc_topics(root, model.name):
        return "inferred"
    raise StoreError(f"{model.url}: no document–topic weights under model {model.name!r}; run "
                     f"`jsmf infer {root} --model {model.name}` first (a refined model carries its own)")


def check_ldavis(root: str, model: str) -> None:
    """Everything the view of ``model`` needs, checked before any work: pyLDAvis installed, the model, and its
    document–topic weights (:class:`JSMFError` / :class:`StoreError` naming what to do)."""
    check_name(model, "model", "report")
    require_pyldavis()
    _weights_of(os.fspath(root), open_model(os.fspath(root), model))


def _doc_topics(root: str, model):
    """The document–topic table (``doc_id``, ``n_tokens``, ``topics``) under ``model``."""
    if _weights_of(root, model) == "own":  # a refined model: its training documents' normalised γ
        return read_parquet_dir(join(model.url, "doc_topics"))
    return read_doc_topics(root, model.name)


def ldavis_inputs(root: str, model: str) -> dict[str, object]:
    """The keyword arguments of ``pyLDAvis.prepare`` for ``model`` of ``root``.

    Returns
    -------
    dict
        ``topic_term_dists`` (K×N, rows sum to 1, floored at :data:`PROBABILITY_FLOOR`),
        ``doc_topic_dists`` (D×K), ``doc_lengths`` (D), ``vocab`` (N display
        words) and ``term_frequency`` (N), over the documents with at least one token.
    """
    root = os.fspath(root)
    fitted = open_model(root, model)
    corpus = corpus_dir(root)
    vocab = read_vocabulary(corpus)
    words = vocab.column("word").to_pylist()
    B = fitted.arrays["B"]
    if B.shape[0] != len(words):
        raise StoreError(f"{fitted.url}: B has {B.shape[0]} words but {corpus}/vocab.parquet has {len(words)}")
    table = _doc_topics(root, fitted)
    lengths = np.asarray(table.column("n_tokens"), dtype=np.int64)
    theta = np.asarray(table.column("topics").combine_chunks().flatten(), dtype=np.float64).reshape(-1, B.shape[1])
    keep = lengths > 0
    topics = np.maximum(B.T, PROBABILITY_FLOOR)
    return {
        "topic_term_dists": topics / topics.sum(axis=1, keepdims=True),
        "doc_topic_dists": theta[keep],
        "doc_lengths": lengths[keep],
        "vocab": display_words(corpus, words),
        "term_frequency": np.asarray(vocab.column("tf"), dtype=np.int64),
    }


def export_ldavis(root: str, *, model: str) -> str:
    """Write pyLDAvis's self-contained HTML view of ``model`` to :func:`ldavis_path`; return the path.

    Raises
    ------
    JSMFError
        If pyLDAvis is not installed (checked before anything is read).
    StoreError
        If the model has no document–topic weights (see :func:`ldavis_inputs`).
    """
    check_name(model, "model", "export_ldavis")
    pyLDAvis = require_pyldavis()
    inputs = ldavis_inputs(root, model)
    # topics in the model's order (topic k of the view is topic k of B); principal coordinates for the map
    vis = pyLDAvis.prepare(**inputs, sort_topics=False, n_jobs=1, mds="pcoa")
    root = os.fspath(root)
    url = ldavis_path(root, model)
    write_file(url, _page(pyLDAvis, vis), root=root)
    return url


#: Placeholders for pyLDAvis's script and style URLs, replaced by the files themselves (:func:`_page`).
_ASSETS = {"d3_url": "jsmf-asset:d3", "ldavis_url": "jsmf-asset:ldavis", "ldavis_css_url": "jsmf-asset:css"}


def _page(pyLDAvis, vis) -> str:
    """pyLDAvis's page, self-contained and with its data kept data.

    * **Offline**: pyLDAvis's page loads d3 and its own script and style
      from a CDN (blank without a network); here its simple template gets
      placeholders, replaced by the installed package's own copies
      (``pyLDAvis/js``), inlined.
    * **Data stays data**: pyLDAvis puts the view's JSON verbatim into a ``<script>``,
      where a word such as ``</script><img onerror=…>`` would end the script and become markup. The same
      JSON with ``<``, ``>`` and ``&`` written as ``\\u003c``, ``\\u003e``, ``\\u0026`` (the same strings to
      JavaScript, see :func:`jsmf_dask.render.page.script_json`) goes in instead.
    """
    from pyLDAvis import urls

    raw = vis.to_json()
    page = pyLDAvis.prepared_data_to_html(vis, template_type="simple", **_ASSETS)
    if raw not in page:
        raise JSMFError("pyLDAvis's page no longer embeds its data as expected; refusing to write it unchecked")
    page = page.replace(raw, script_json(raw))
    for key, local in (("d3_url", urls.D3_LOCAL), ("ldavis_url", urls.LDAVIS_LOCAL)):
        tag = f'<script type="text/javascript" src="{_ASSETS[key]}"></script>'
        with open(local, encoding="utf-8") as f:
            code = f.read().replace("</script", "<\\/script")
        if tag not in page:
            raise JSMFError(f"pyLDAvis's page no longer loads {key} as expected; refusing to write it unchecked")
        page = page.replace(tag, f'<script type="text/javascript">\n{code}\n</script>')
    tag = f'<link rel="stylesheet" type="text/css" href="{_ASSETS["ldavis_css_url"]}">'
    with open(urls.LDAVIS_CSS_LOCAL, encoding="utf-8") as f:
        style = f.read().replace("</style", "<\\/style")
    if tag not in page:
        raise JSMFError("pyLDAvis's page no longer loads its style as expected; refusing to write it unchecked")
    page = page.replace(tag, f"<style>\n{style}\n</style>")
    return f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>pyLDAvis</title></head><body>\n{page}\n</body></html>\n'

