"""``synth``: a semi-synthetic corpus with known B and A, for testing recovery.

Writes ``<root>/corpus`` (the stored schema, so every other stage runs on it)
and ``<root>/truth.zarr`` with ``B`` (N×K, columns sum to 1, separable: one
anchor word per topic), ``A`` (K×K, the corpus's own ``mean θθᵀ``, which is
what ``C`` estimates), ``A_prior`` (the prior's ``E[θθᵀ]``, Dirichlet only),
``anchors`` and ``theta`` (M×K, each document's topic weights).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import zarr
from zarr.codecs import ZstdCodec

from jsmf_dask._validation import check_int, check_option
from jsmf_dask.exceptions import InvalidParameterError
from jsmf_dask.parameters import SYNTH_PRIORS, SYNTH_TOPICS_FROM
from jsmf_dask.io.fs import join, staged_output
from jsmf_dask.io.parquet import corpus_dir, row_group_size_for, shard_name, write_shard, write_vocabulary
from jsmf_dask.io.damage import reading
from jsmf_dask.io.zarr_store import read_group, zarr_store
from jsmf_dask.kernels.synthetic import (
    SyntheticCorpus,
    dirichlet_topic_topic,
    random_covariance,
    sample_corpus,
    separable_topics,
)

__all__ = ["SynthReport", "synth", "truth_path", "read_truth", "write_corpus"]


def truth_path(root: str) -> str:
    """``<root>/truth.zarr``."""
    return join(root, "truth.zarr")


@dataclass
class SynthReport:
    """What ``synth`` wrote."""

    n_docs: int
    n_words: int
    n_topics: int
    n_tokens: int
    prior: str

    def lines(self) -> list[str]:
        return [f"synthetic corpus: {self.n_docs} documents, {self.n_words} words, {self.n_tokens} tokens, "
                f"{self.n_topics} topics ({self.prior} prior); truth in truth.zarr"]


def synth(
    root: str,
    *,
    n_docs: int,
    n_words: int,
    n_topics: int,
    doc_length: float,
    seed: int = 0,
    prior: str = "dirichlet",
    alpha: float = 0.1,
    B: np.ndarray | None = None,
    topics_from: str = "separable",
    beta: float = 0.05,
    row_group_size: int | None = None,
    docs_per_shard: int = 50000,
    overwrite: bool = False,
) -> SynthReport:
    """Draw a corpus from a known topic model and write it with its truth.

    Parameters
    ----------
    root : str
    n_docs, n_words, n_topics : int
        M, N, K (``2 <= K < N``).
    doc_length : float
        Mean tokens per document (Poisson, at least 2).
    seed : int, default=0
    prior : {'dirichlet', 'correlated'}, default='dirichlet'
        Topic weights: Dirichlet(α), or a logistic normal with correlated topics.
    alpha : float, default=0.1
        Symmetric Dirichlet concentration (the mean topic weights for 'correlated').
    B : ndarray, shape (N, K), optional
        Topics to use instead of random separable ones (e.g. a model fitted on
        real data, for semi-synthetic experiments).
    topics_from : {'separable', 'dirichlet'}, default='separable'
        Random topics (without ``B``): ``separable`` plants an anchor word in
        every topic (word k of the topic carries 5% of its mass and appears in
        no other topic; the other words drawn from a Dirichlet(0.05)), which
        flatters anchor methods; ``dirichlet`` draws each topic from a
        symmetric Dirichlet(``beta``) over the whole vocabulary, as plain LDA
        does (no anchors planted; ``truth.zarr``'s ``anchors`` are −1).
    beta : float, default=0.05
        Concentration of ``topics_from='dirichlet'``.
    row_group_size, docs_per_shard : int, optional
        Row-group size (default: :func:`~jsmf_dask.io.parquet.row_group_size_for`) and shard size in documents.
    overwrite : bool, default=False

    Returns
    -------
    SynthReport
    """
    owner = "synth"
    for name, value, low in (("n_docs", n_docs, 1), ("n_words", n_words, 3), ("n_topics", n_topics, 2),
                             ("seed", seed, 0)):
        check_int(value, name, owner, low=low)
    check_option(prior, "prior", owner, SYNTH_PRIORS)
    check_option(topics_from, "topics_from", owner, SYNTH_TOPICS_FROM)
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not beta > 0:
        raise InvalidParameterError(f"The 'beta' parameter of synth must be a float > 0. Got {beta!r} instead.")
    if n_topics >= n_words:
        raise InvalidParameterError(f"The 'n_topics' parameter of synth must be below n_words={n_words}. Got {n_topics} instead.")
    if not doc_length >= 2:
        raise InvalidParameterError(f"The 'doc_length' parameter of synth must be a number >= 2. Got {doc_length!r} instead.")
    rng = np.random.default_rng(seed)
    if B is None and topics_from == "dirichlet":
        B = rng.dirichlet(np.full(n_words, float(beta)), size=n_topics).T
        anchors = np.full(n_topics, -1)
    elif B is None:
        # Anchors (words 0..K-1 of separable_topics) moved to random places in the vocabulary.
        perm = rng.permutation(n_words)
        B = np.empty((n_words, n_topics))
        B[perm] = separable_topics(n_words, n_topics, rng, concentration=0.05)
        anchors = perm[:n_topics]
    else:
        B = np.asarray(B, dtype=np.float64)
        anchors = np.full(n_topics, -1)
    alphas = np.full(n_topics, alpha)
    covariance = random_covariance(n_topics, rng) if prior == "correlated" else None
    corpus = sample_corpus(B, alphas, n_docs, doc_length, rng, prior=prior, covariance=covariance)
    root = os.fspath(root)
    write_corpus(root, corpus, n_words, docs_per_shard=docs_per_shard, row_group_size=row_group_size, overwrite=overwrite)
    with staged_output(truth_path(root), root=root, overwrite=overwrite) as tmp:
        group = zarr.open_group(zarr_store(tmp), mode="w", zarr_format=3)
        theta = corpus.theta
        arrays = {"B": B, "A": theta.T @ theta / theta.shape[0], "anchors": anchors.astype(np.int64)}
        if prior == "dirichlet":
            arrays["A_prior"] = dirichlet_topic_topic(alphas)
        for name, values in arrays.items():
            group.create_array(name, data=values)
        t = group.create_array("theta", shape=theta.shape, chunks=(min(50000, theta.shape[0]), n_topics),
                               dtype="float32", compressors=ZstdCodec(level=1))
        t[...] = theta.astype(np.float32)
        group.attrs.update({"n_docs": n_docs, "n_words": n_words, "n_topics": n_topics, "doc_length": doc_length,
                            "seed": seed, "prior": prior, "alpha": alpha,
                            "topics_from": "given" if anchors[0] == -1 and topics_from != "dirichlet" else topics_from,
                            "beta": beta if topics_from == "dirichlet" else None})
    return SynthReport(n_docs, n_words, n_topics, int(corpus.counts.sum()), prior)


def read_truth(root: str) -> dict[str, np.ndarray]:
    """The arrays of ``<root>/truth.zarr`` except ``theta`` (read that one lazily from the group)."""
    url = truth_path(root)
    with reading(url):
        group = read_group(url)
        return {name: group[name][...] for name in ("B", "A", "A_prior", "anchors") if name in group}


def write_corpus(
    root: str,
    corpus: SyntheticCorpus,
    n_words: int,
    *,
    words: list[str] | None = None,
    docs_per_shard: int = 50000,
    row_group_size: int | None = None,
    overwrite: bool = False,
) -> None:
    """Write ``corpus`` as ``<root>/corpus`` (shards + a vocabulary of ``n_words`` words ``w00000``…)."""
    if words is None:
        words = [f"w{i:05d}" for i in range(n_words)]
    df = np.bincount(corpus.word_ids, minlength=n_words)
    tf = np.bincount(corpus.word_ids, weights=corpus.counts, minlength=n_words)
    with staged_output(corpus_dir(root), root=root, overwrite=overwrite) as tmp:
        for shard, start in enumerate(range(0, corpus.n_docs, docs_per_shard)):
            stop = min(start + docs_per_shard, corpus.n_docs)
            a, b = int(corpus.offsets[start]), int(corpus.offsets[stop])
            off = (corpus.offsets[start : stop + 1] - a).astype(np.int32)
            table = pa.table(
                {
                    "doc_id": pa.array([f"d{i}" for i in range(start, stop)], pa.string()),
                    "word_ids": pa.ListArray.from_arrays(pa.array(off), pa.array(corpus.word_ids[a:b])),
                    "counts": pa.ListArray.from_arrays(pa.array(off), pa.array(corpus.counts[a:b])),
                }
            )
            write_shard(table, join(tmp, shard_name(shard)), n_words=n_words,
                        row_group_size=row_group_size or row_group_size_for(corpus.n_docs))
        write_vocabulary(
            pa.table(
                {
                    "word_id": np.arange(n_words, dtype=np.int32),
                    "word": pa.array(words, pa.string()),
                    "df": df.astype(np.int64),
                    "tf": tf.astype(np.int64),
                }
            ),
            tmp,
        )
