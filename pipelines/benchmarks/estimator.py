"""The scikit-learn estimator against scikit-learn's LDA and tomotopy on the same raw text, timed in one run.

The NIPS papers shipped in ``pipelines/data`` (raw text) go through one
``CountVectorizer`` (5,000 words, English stop words, min_df 5); 10% of the
papers (every tenth) are held out. On the other 90%:

* ``fit``: ``RectifiedAnchorWords(K).fit(X)`` (AP, then CVB0 refinement) and
  scikit-learn's batch ``LatentDirichletAllocation(K).fit(X)`` (its default
  10 passes, and 50); held-out perplexity of both by one scorer, document
  completion (:func:`jsmf_dask.kernels.heldout.completion_log_likelihood`:
  half of each held-out paper's tokens infer θ, the other half are scored),
  each model under its own document prior.
* ``transform`` throughput (documents per second) of the held-out papers'
  count matrix: ours in this process on one core, ours as a Dask array on a
  LocalCluster of 2 single-threaded workers, scikit-learn's ``transform`` (one
  core), tomotopy's ``infer`` (one worker) under a tomotopy model trained on
  the same documents (200 iterations: only its inference is timed here); and of
  raw text: ``jsmf transform`` of the whole tarball (reading, tokenising, folding
  in, writing Parquet) on threads and on the LocalCluster, against scikit-learn's
  ``CountVectorizer.transform`` + ``transform`` on one core.

Seconds are medians of ``--runs``. Usage::

    python -m pipelines.benchmarks.estimator --topics 20 --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tarfile
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sps
from threadpoolctl import threadpool_limits

REPO = Path(__file__).resolve().parents[2]
NIPS = REPO / "pipelines" / "data" / "nips12-raw" / "nipstxt.tar.xz"


def nips_texts() -> list[str]:
    with tarfile.open(NIPS) as tar:
        return [tar.extractfile(m).read().decode("latin-1") for m in tar.getmembers() if m.isfile()]


def heldout_perplexity(B: np.ndarray, alpha: np.ndarray, X_test) -> float:
    from jsmf_dask.kernels.doc_split import doc_hashes
    from jsmf_dask.kernels.heldout import completion_log_likelihood, split_tokens

    X = sps.csr_array(X_test, dtype=np.float64)
    observed, scored = split_tokens(X, doc_hashes([str(i) for i in range(X.shape[0])]))
    ll, n, _ = completion_log_likelihood(observed, scored, B, alpha)
    return float(np.exp(-ll / n))


def timed(fn, runs: int):
    seconds, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - t)
    return statistics.median(seconds), result


def raw_text(runs: int, k: int, vectorizer, lda) -> dict[str, float]:
    """New raw text end to end: ``jsmf transform`` of the NIPS tarball (ingest's reader and tokeniser, the fold-in,
    the Parquet output) under a model of a run root made from the same papers, on threads and on the
    LocalCluster; scikit-learn's ``CountVectorizer.transform`` + ``transform`` of the same texts on one core."""
    import shutil
    import tempfile

    from jsmf_dask import cooccur, fit, ingest, refine
    from jsmf_dask.cluster import connect
    from jsmf_dask.pipeline.transform import transform

    work = Path(tempfile.mkdtemp(prefix="jsmf-bench-"))
    root = work / "root"
    with connect("threads"):
        ingest(root, [str(NIPS)], vocab_size=5000, encoding="latin-1")
        cooccur(root, validation=0.05)
        fit(root, n_topics=k, iterations=50, name="ap")
        refine(root, model="ap", name="ap-cvb0", method="cvb0")
    n = len(nips_texts())
    rates = {}
    for engine in ("threads", "local"):
        def once(engine=engine):
            out = work / f"out-{engine}"
            shutil.rmtree(out, ignore_errors=True)
            with connect(engine):
                transform(root, [str(NIPS)], model="ap-cvb0", output=str(out))
        s, _ = timed(once, runs)
        rates[f"raw text: `jsmf transform` of the tarball ({engine}; tokenising and writing included)"] = n / s
    with threadpool_limits(limits=1):  # reading the tarball included, as in `jsmf transform`
        s, _ = timed(lambda: lda.transform(vectorizer.transform(nips_texts())), runs)
    rates["raw text: the tarball read, scikit-learn CountVectorizer.transform + LDA.transform, one core"] = n / s
    shutil.rmtree(work, ignore_errors=True)
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    import dask
    from sklearn.decomposition import LatentDirichletAllocation
    from sklearn.feature_extraction.text import CountVectorizer

    from jsmf_dask import RectifiedAnchorWords
    from jsmf_dask.kernels.variational import moment_alpha

    warnings.simplefilter("ignore")
    dask.config.set({"jsmf.progress": False})
    texts = nips_texts()
    train = [t for i, t in enumerate(texts) if i % 10]
    test = [t for i, t in enumerate(texts) if i % 10 == 0]
    vectorizer = CountVectorizer(max_features=5000, stop_words="english", min_df=5, token_pattern=r"(?u)\b[a-z]{3,}\b")
    X_train = vectorizer.fit_transform(train)
    X_test = vectorizer.transform(test)
    k, runs = args.topics, args.runs
    print(f"NIPS papers: {X_train.shape[0]} training, {X_test.shape[0]} held-out documents, "
          f"{X_train.shape[1]} words, {int(X_train.sum())} training tokens; K = {k}; medians of {runs}")
    rows = {}

    seconds, ours = timed(lambda: RectifiedAnchorWords(k).fit(X_train), runs)
    alpha = ours.doc_topic_prior_ if ours.doc_topic_prior_ is not None else moment_alpha(ours.topic_topic_)
    rows["RectifiedAnchorWords.fit (AP + CVB0)"] = (seconds, heldout_perplexity(ours.components_.T, alpha, X_test))
    spectral = RectifiedAnchorWords(k, refine=None).fit(X_train)
    seconds_s, _ = timed(lambda: RectifiedAnchorWords(k, refine=None).fit(X_train), runs)
    rows["RectifiedAnchorWords.fit (spectral only)"] = (
        seconds_s, heldout_perplexity(spectral.components_.T, moment_alpha(spectral.topic_topic_), X_test))
    for passes in (10, 50):
        seconds, lda = timed(lambda: LatentDirichletAllocation(k, learning_method="batch", max_iter=passes,
                                                               random_state=0).fit(X_train), runs)
        B = (lda.components_ / lda.components_.sum(axis=1, keepdims=True)).T
        rows[f"sklearn LDA.fit (batch VB, {passes} passes)"] = (
            seconds, heldout_perplexity(B, np.full(k, lda.doc_topic_prior_), X_test))
    print("\n| fit | seconds | held-out perplexity |\n|---|---|---|")
    for name, (s, p) in rows.items():
        print(f"| {name} | {s:.1f} | {p:.1f} |")

    # transform throughput on the held-out documents
    n = X_test.shape[0]
    throughput = {}
    with threadpool_limits(limits=1):
        s, _ = timed(lambda: ours.transform(X_test), runs)
        throughput["ours, one core (refined: VB fold-in under its α)"] = n / s
        s, _ = timed(lambda: spectral.transform(X_test), runs)
        throughput["ours, one core (spectral: fold-in under its moment-matched α)"] = n / s
        lda = LatentDirichletAllocation(k, learning_method="batch", random_state=0).fit(X_train)
        s, _ = timed(lambda: lda.transform(X_test), runs)
        throughput["sklearn LDA.transform, one core"] = n / s
    try:
        import tomotopy as tp

        model = tp.LDAModel(k=k, seed=0)
        words = vectorizer.get_feature_names_out()
        for row in X_train:
            model.add_doc([words[j] for j, c in zip(row.indices, row.data) for _ in range(int(c))])
        model.train(200, workers=1)
        docs = [model.make_doc([words[j] for j, c in zip(row.indices, row.data) for _ in range(int(c))])
                for row in X_test]
        s, _ = timed(lambda: model.infer(docs, workers=1), runs)
        throughput["tomotopy infer, one worker"] = n / s
    except ImportError:
        print("tomotopy not installed: its row is left out")
    from distributed import Client, LocalCluster
    import dask.array as da

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster):
        big = sps.vstack([X_test] * 10).tocsr()  # 10x the documents, so that task overheads do not dominate
        lazy = da.from_array(big, chunks=(big.shape[0] // 4, -1), asarray=False)
        s, _ = timed(lambda: ours.transform(lazy).compute(), runs)
        throughput["ours, Dask array on a LocalCluster (2 workers)"] = big.shape[0] / s
    throughput |= raw_text(runs, k, vectorizer, lda)
    print("\n| transform | documents per second |\n|---|---|")
    for name, rate in throughput.items():
        print(f"| {name} | {rate:,.0f} |")
    if args.out:
        args.out.write_text(json.dumps({"fit": rows, "transform": throughput}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
