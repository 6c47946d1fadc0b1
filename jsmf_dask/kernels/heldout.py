"""Document completion (the field's perplexity) of held-out documents, as pure numpy.

* :func:`split_tokens`: each held-out document's tokens are put in a random
  order seeded by its id's hash; the first half is observed, the rest scored.
* :func:`document_completion`, :func:`completion_log_likelihood`: ``θ``
  inferred on the observed half under fixed topics ``B`` and the model's
  document prior ``α``, then ``Σ log Σ_k θ_k B_wk`` over the scored tokens.
  ``θ`` is the mean of the posterior of the observed half, by one of two
  fold-ins: ``'vb'``, the VB E-step's (mean field: quick, the default);
  ``'sampled'`` (:func:`sampled_theta`), the exact posterior's, estimated by
  Gibbs sampling (with fewer passes, refine's validation score). The mean
  field understates a model's predictive probability, and by more for sharper
  topics (the benchmarks README, sessions 37 and 45), so comparisons with
  other samplers' models are made by both.

Which documents are held out is :mod:`jsmf_dask.kernels.doc_split`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from jsmf_dask.kernels._completion_loop import sampled_theta_loop
from jsmf_dask.kernels.collapsed import draw_seeds
from jsmf_dask.kernels.doc_split import splitmix64
from jsmf_dask.kernels.variational import e_step

__all__ = ["split_tokens", "document_completion", "validation_completion", "completion_log_likelihood",
           "sampled_theta", "FOLD_INS", "FOLD_IN_BURN_IN", "FOLD_IN_DRAWS", "VALIDATION_CHAINS", "VALIDATION_BURN_IN",
           "VALIDATION_DRAWS", "PROBABILITY_FLOOR"]

PROBABILITY_FLOOR = 1e-12  # a scored word no topic can produce (it never occurred in training) scores this

#: How ``θ`` of a document's observed half is inferred (:func:`document_completion`).
FOLD_INS = ("vb", "sampled")

#: The sampled fold-in's passes (:func:`sampled_theta`): discarded, then averaged. Measured (session 37, the
#: benchmarks README; 100-word documents, 21 observed tokens, K 20): the estimate's noise raises a perplexity by
#: about c / draws of it (the log of a noisy mean), c about 0.6 for a broad model and 0.3 for Gibbs's sharper
#: one; at 200 draws the two are within 0.2% and 0.1% of 500 draws', a tenth of the gaps the fold-ins disagree by.
FOLD_IN_BURN_IN = 20
FOLD_IN_DRAWS = 200

#: The sampled fold-in's chains and passes when it scores refine's validation documents, every sweep (the stop,
#: the choice among candidates and of the drawn sweeps). Measured (session 46, the benchmarks README; about 2,000
#: held-out documents; the passes above as the reference): at 300k documents of 205 tokens and K 100, seven models,
#: 1.8 s a model against 8 s, each 0.1–0.9% above the reference, the start and CVB0's states in its order (the VB
#: fold-in ranks them in reverse); on 100-word NIPS pieces (42 tokens) at K 20 and 50, within −0.02% and +0.2%. One
#: chain of 5 + 20 passes was 1.6–3.8% above it there, more for sharper models (a short chain stays near the mode
#: it starts in): refine's stop ended the sampled runs twice as early, and held-out perplexity rose 0.6%.
VALIDATION_CHAINS = 4
VALIDATION_BURN_IN = 3
VALIDATION_DRAWS = 5


def split_tokens(X: sps.csr_array, hashes: np.ndarray) -> tuple[sps.csr_array, sps.csr_array]:
    """Split each document's tokens into an observed half (``⌊n/2⌋`` tokens) and a scored half.

    The order of a document's tokens is drawn from its hash alone, so the
    split is the same whichever block the document is read in.
    """
    X = sps.csr_array(X)
    X.sort_indices()
    n_docs, n_words = X.shape
    counts = X.data.astype(np.int64)
    tok_word = np.repeat(X.indices.astype(np.int64), counts)
    tok_doc = np.repeat(np.repeat(np.arange(n_docs), np.diff(X.indptr)), counts)
    lengths = np.bincount(tok_doc, minlength=n_docs)
    start = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    position = np.arange(tok_doc.size) - start[tok_doc]
    with np.errstate(over="ignore"):
        key = splitmix64(hashes[tok_doc] + splitmix64(position.astype(np.uint64) + np.uint64(1)))
    order = np.lexsort((key, tok_doc))
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size) - start[tok_doc[order]]
    observed = rank < (lengths // 2)[tok_doc]

    def matrix(sel: np.ndarray) -> sps.csr_array:
        m = sps.coo_array((np.ones(int(sel.sum())), (tok_doc[sel], tok_word[sel])), shape=(n_docs, n_words))
        return sps.csr_array(m)

    return matrix(observed), matrix(~observed)


def sampled_theta(observed, B: np.ndarray, alpha: np.ndarray, hashes: np.ndarray, *,
                  burn_in: int = FOLD_IN_BURN_IN, draws: int = FOLD_IN_DRAWS, chains: int = 1) -> np.ndarray:
    """Each document's posterior mean of ``θ`` given its tokens, under fixed topics ``B`` and prior ``α``, by
    Gibbs sampling.

    The posterior of a document's topic assignments ``z`` given its words is
    ``p(z | w) ∝ Π_i B_{w_i z_i} · Γ(α₀) / Γ(n + α₀) · Π_k Γ(n_k + α_k) / Γ(α_k)``,
    and ``E[θ | w] = E[(n_k + α_k) / (n + α₀) | w]``. Each token is drawn in
    turn from ``B_wk (n_k^¬i + α_k)``; after ``burn_in`` passes, ``draws``
    passes each add every token's conditional probabilities (a
    Rao–Blackwellised estimate of ``E[n_k]``, of lower variance than the draws'
    counts). Unlike the VB E-step's mean field, it keeps how a document's tokens
    gather in few topics. With ``chains`` above one, the mean of that many
    independent chains' estimates (chain ``c`` seeded from the hash and ``c``):
    on a short document the posterior has several modes, and a short chain
    stays near the one it starts in. A document's estimate depends on its id's
    hash alone (:func:`~jsmf_dask.kernels.collapsed.draw_seeds`), not on its block.

    Parameters
    ----------
    observed : sparse matrix, shape (D, N)
        Whole token counts.
    B : ndarray, shape (N, K)
        Topics (columns sum to 1).
    alpha : ndarray, shape (K,)
    hashes : ndarray of uint64, shape (D,)
        The documents' id hashes.
    burn_in, draws : int
        Each chain's passes: discarded, then averaged.
    chains : int, default=1

    Returns
    -------
    ndarray, shape (D, K)
        Rows sum to 1; a document with no token (or none any topic produces) gets ``α / α₀``.
    """
    if draws < 1 or burn_in < 0 or chains < 1:
        raise ValueError(f"sampled_theta: draws and chains must be at least 1 and burn_in at least 0, got {draws}, "
                         f"{chains}, {burn_in}")
    X = sps.csr_array(observed)
    if X.nnz and not np.array_equal(X.data, np.round(X.data)):
        raise ValueError("sampled_theta: observed must hold whole counts (a token is drawn at a time)")
    inputs = (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64),
              np.ascontiguousarray(B, dtype=np.float64), np.asarray(alpha, dtype=np.float64))
    theta, chain = np.zeros((X.shape[0], B.shape[1])), np.empty((X.shape[0], B.shape[1]))
    for c in range(chains):
        sampled_theta_loop(*inputs, draw_seeds(hashes, c), int(burn_in), int(draws), chain)
        theta += chain
    return theta / chains


def document_completion(observed, scored, B: np.ndarray, alpha: np.ndarray, *, fold_in: str = "vb",
                        hashes: np.ndarray | None = None, burn_in: int = FOLD_IN_BURN_IN, draws: int = FOLD_IN_DRAWS,
                        chains: int = 1, max_iter: int = 200, tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray, int]:
    """Each document's log likelihood of its scored tokens given ``θ`` inferred from its observed ones.

    Parameters
    ----------
    observed, scored : sparse matrix, shape (D, N)
        Token counts of each document's two halves (:func:`split_tokens`).
    B : ndarray, shape (N, K)
        Topics (columns sum to 1).
    alpha : ndarray, shape (K,)
        The document–topic prior used to infer ``θ``.
    fold_in : {'vb', 'sampled'}, default='vb'
        ``θ`` the posterior mean by the VB E-step (``max_iter``, ``tol``) or by
        :func:`sampled_theta` (which needs ``hashes``, the documents' id hashes;
        ``burn_in``, ``draws`` and ``chains`` its passes).

    Returns
    -------
    log_likelihood : ndarray, shape (D,)
        ``Σ_w scored_dw log max(θ_d · B_w, PROBABILITY_FLOOR)`` per document.
    n_tokens : ndarray, shape (D,)
        Scored tokens per document.
    n_floored : int
        Scored tokens whose probability was below the floor (words no topic produces).
    """
    if fold_in == "sampled":
        if hashes is None:
            raise ValueError("document_completion: the sampled fold-in needs the documents' hashes")
        theta = sampled_theta(observed, B, alpha, hashes, burn_in=burn_in, draws=draws, chains=chains)
    elif fold_in == "vb":
        gamma = e_step(observed, B, alpha, max_iter=max_iter, tol=tol).gamma
        theta = gamma / gamma.sum(axis=1, keepdims=True)
    else:
        raise ValueError(f"document_completion: fold_in must be one of {FOLD_INS}, got {fold_in!r}")
    S = sps.coo_array(scored)
    p = np.einsum("ij,ij->i", theta[S.row], B[S.col])
    floored = p < PROBABILITY_FLOOR
    n_docs = scored.shape[0]
    ll = np.bincount(S.row, weights=S.data * np.log(np.maximum(p, PROBABILITY_FLOOR)), minlength=n_docs)
    n_tok = np.bincount(S.row, weights=S.data, minlength=n_docs)
    return ll, n_tok, int(S.data[floored].sum())


def validation_completion(observed, scored, hashes: np.ndarray, B: np.ndarray,
                          alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Refine's validation score: :func:`document_completion`'s log likelihood and scored tokens per document by the
    sampled fold-in with :data:`VALIDATION_CHAINS` chains of :data:`VALIDATION_BURN_IN` and :data:`VALIDATION_DRAWS`
    passes (``observed`` None or of no rows: empty arrays)."""
    if observed is None or observed.shape[0] == 0:
        return np.zeros(0), np.zeros(0)
    ll, n_tokens, _ = document_completion(observed, scored, B, alpha, fold_in="sampled", hashes=hashes,
                                          burn_in=VALIDATION_BURN_IN, draws=VALIDATION_DRAWS, chains=VALIDATION_CHAINS)
    return ll, n_tokens


def completion_log_likelihood(observed, scored, B: np.ndarray, alpha: np.ndarray, *,
                              max_iter: int = 200, tol: float = 1e-6) -> tuple[float, int, int]:
    """Log likelihood of the scored tokens given ``θ`` inferred from the observed ones, summed over documents.

    Returns
    -------
    log_likelihood : float
        ``Σ_d Σ_w scored_dw log max(θ_d · B_w, PROBABILITY_FLOOR)`` (:func:`document_completion`'s sum).
    n_tokens : int
        Scored tokens.
    n_floored : int
        Scored tokens whose probability was below the floor (words no topic produces).
    """
    ll, n_tok, n_floored = document_completion(observed, scored, B, alpha, max_iter=max_iter, tol=tol)
    return float(ll.sum()), int(round(n_tok.sum())), n_floored
