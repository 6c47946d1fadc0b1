"""Held-out scores of a fitted :class:`~jsmf_dask.RectifiedAnchorWords` by document completion: ``evaluate``'s measure.

:meth:`~jsmf_dask.RectifiedAnchorWords.score` is the variational bound, as scikit-learn's LDA's is; it is cheap, but
it understates sharp topics (the benchmarks README, session 45: it ranked a spectral start and its CVB0 refinements in
the reverse order of the exact fold-in). :func:`completion_perplexity` is the number ``jsmf evaluate`` reports: each
document's tokens split in two halves by its id, ``θ`` inferred from one half by the exact fold-in (Gibbs sampling of
the document's topics under the model, :func:`~jsmf_dask.kernels.heldout.sampled_theta`, seeded by the id), the other
half scored. :func:`completion_score` is the same as a scorer for scikit-learn's model selection
(``GridSearchCV(RectifiedAnchorWords(), {"n_components": [10, 20, 50]}, scoring=completion_score)``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from jsmf_dask.kernels.doc_split import doc_hashes
from jsmf_dask.kernels.heldout import FOLD_INS, document_completion, split_tokens

__all__ = ["completion_perplexity", "completion_score"]


def _completion(estimator, X, doc_ids, fold_in: str) -> tuple[float, float]:
    """The scored tokens' log likelihood and their number. A pipeline is scored as ``Pipeline.score`` scores: ``X``
    through every step but the last, the last step scoring."""
    if hasattr(estimator, "steps"):
        estimator, X = estimator[-1], estimator[:-1].transform(X)
    if fold_in not in FOLD_INS:
        raise ValueError(f"fold_in must be one of {FOLD_INS}; got {fold_in!r}")
    X = sps.csr_array(estimator._checked_input(X, "completion_perplexity"))
    if X.data.size and not np.array_equal(X.data, np.round(X.data)):
        raise ValueError("completion_perplexity: X must hold whole word counts (each document's tokens are split in "
                         "two halves)")
    ids = [str(i) for i in range(X.shape[0])] if doc_ids is None else [str(d) for d in doc_ids]
    if len(ids) != X.shape[0]:
        raise ValueError(f"completion_perplexity: {len(ids)} doc_ids for {X.shape[0]} documents")
    hashes = doc_hashes(ids)
    observed, scored = split_tokens(X, hashes)
    if scored.sum() <= 0:
        raise ValueError("completion_perplexity: X holds no words to score")
    loglik, n_tokens, _ = document_completion(observed, scored, estimator.components_.T, estimator._document_prior(),
                                              fold_in=fold_in, hashes=hashes)
    return float(loglik.sum()), float(n_tokens.sum())


def completion_perplexity(estimator, X, *, doc_ids=None, fold_in: str = "sampled") -> float:
    """Held-out perplexity of the documents ``X`` by document completion under a fitted estimator.

    Each document's tokens are split in two halves by its id; ``θ`` is inferred from the first half under the
    model's topics and document prior (a refined model's learned ``α``, else the Dirichlet moment-matched to its
    ``A``), and the second half scored: ``exp(−Σ log p / n)`` over every scored token. With the documents' ids
    (``doc_ids``, as ingested) the number equals ``jsmf evaluate``'s for the same documents and model.

    Parameters
    ----------
    estimator : RectifiedAnchorWords, or a Pipeline ending with one
        Fitted.
    X : array-like or sparse matrix, shape (n_documents, n_features)
        Word counts (whole numbers) over the estimator's vocabulary.
    doc_ids : sequence of str, optional
        The documents' ids, which seed their split and their fold-in; default: their row numbers (``'0'``,
        ``'1'``, …).
    fold_in : {'sampled', 'vb'}, default='sampled'
        The exact fold-in (``evaluate``'s reference: 20 + 200 Gibbs passes per document) or the VB fold-in.

    Returns
    -------
    float
        Lower is better.
    """
    loglik, n_tokens = _completion(estimator, X, doc_ids, fold_in)
    return float(np.exp(-loglik / n_tokens))


def completion_score(estimator, X, y=None) -> float:
    """Log likelihood per scored token of ``X`` by document completion and the exact fold-in (higher is better):
    ``−log`` of :func:`completion_perplexity`, as a scikit-learn scorer (``scoring=completion_score``).

    Parameters
    ----------
    estimator : RectifiedAnchorWords, or a Pipeline ending with one
        Fitted.
    X : array-like or sparse matrix, shape (n_documents, n_features)
        Word counts (a pipeline: its first step's input), the documents named by their row numbers.
    y : None
        Ignored.

    Returns
    -------
    float
    """
    loglik, n_tokens = _completion(estimator, X, None, "sampled")
    return loglik / n_tokens
