"""Tiny corpora the collapsed kernels' tests share."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps


def random_corpus(rng, n_docs: int, n_words: int, max_len: int) -> tuple[list, sps.csr_array]:
    """Documents of 1 to ``max_len − 1`` uniformly drawn words: each as a list of (word, count), and all as CSR."""
    docs = []
    for _ in range(n_docs):
        words = rng.integers(0, n_words, size=int(rng.integers(1, max_len)))
        uniq, cnt = np.unique(words, return_counts=True)
        docs.append(list(zip(uniq.tolist(), cnt.tolist(), strict=True)))
    rows = [d for d, doc in enumerate(docs) for _ in doc]
    cols = [w for doc in docs for w, _ in doc]
    vals = [c for doc in docs for _, c in doc]
    return docs, sps.csr_array((np.array(vals, float), (rows, cols)), shape=(n_docs, n_words))


def lda_corpus(rng, n_docs: int, n_words: int, k: int, length: int, alpha: float = 0.1,
               beta: float = 0.05) -> tuple[sps.csr_array, np.ndarray]:
    """Documents of ``length`` tokens from a plain LDA model (topics from a Dirichlet(β)); the counts and B."""
    B = rng.dirichlet(np.full(n_words, beta), size=k).T
    theta = rng.dirichlet(np.full(k, alpha), size=n_docs)
    return sps.csr_array(np.array([rng.multinomial(length, B @ t) for t in theta], dtype=float)), B
