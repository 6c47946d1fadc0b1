"""Benchmark of spectral + refine against Gibbs sampling and other LDA peers, all on the same corpus.

A corpus is drawn by ``jsmf synth`` (known B; Dirichlet α = 0.1), written as a
UCI docword file and run through ``ingest → cooccur → fit → refine`` (``--rectifier``:
AP or ENN for the spectral start) on a
fresh LocalCluster per stage (wall time, peak RSS per worker sampled), with the
B error (mean L1 over topics after optimal matching) of the spectral model and
after every refine sweep. In the same run and on the same documents:

* tomotopy's collapsed Gibbs sampler, every core: ``--gibbs-iterations`` for its
  B error, and (``--gibbs-timing-iterations``) a shorter run timed and scaled
  linearly when the full run is too long to time;
* scikit-learn's ``LatentDirichletAllocation`` (batch variational Bayes, its
  default ``max_iter``) and gensim's ``LdaMulticore`` (online VB,
  ``--gensim-passes``), each when installed (``pip install 'jsmf_dask[bench]'``).

Our pipeline is repeated ``--runs`` times (medians reported); the peers run once.

``--nips K1,K2`` instead runs the shipped NIPS papers (5,000 words, 10% of the
papers held out): the Baseline, AP, AP + refine, ENN, ENN + refine and Gibbs sampling (1000
iterations) at each K, timed, with the six metrics and held-out perplexity.

Usage::

    python -m pipelines.benchmarks.refine --docs 20000 --words 5000 --topics 20
    python -m pipelines.benchmarks.refine --nips 20,50
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from pipelines.benchmarks.fit import gibbs, matched_l1, staged, write_docword


def corpus_matrix(root: Path):
    """The stored corpus as one CSR matrix (documents × words), in corpus order."""
    import pyarrow.parquet as pq

    from jsmf_dask.stages.infer import block_counts
    from scipy import sparse

    n_words = pq.read_metadata(root / "corpus" / "vocab.parquet").num_rows
    parts = [block_counts(pq.ParquetFile(s).read(), n_words) for s in sorted((root / "corpus").glob("part-*.parquet"))]
    return sparse.vstack(parts).tocsr()


def sklearn_lda(X, k: int, seed: int) -> tuple[float, np.ndarray] | str:
    try:
        from sklearn.decomposition import LatentDirichletAllocation
    except ImportError:
        return "scikit-learn not installed"
    model = LatentDirichletAllocation(n_components=k, learning_method="batch", doc_topic_prior=0.1,
                                      topic_word_prior=0.01, n_jobs=os.cpu_count(), random_state=seed)
    t0 = time.perf_counter()
    model.fit(X)
    seconds = time.perf_counter() - t0
    return seconds, (model.components_ / model.components_.sum(axis=1, keepdims=True)).T


def gensim_lda(X, k: int, seed: int, passes: int) -> tuple[float, np.ndarray] | str:
    try:
        from gensim.matutils import Sparse2Corpus
        from gensim.models import LdaMulticore
    except ImportError:
        return "gensim not installed"
    corpus = Sparse2Corpus(X, documents_columns=False)
    t0 = time.perf_counter()
    model = LdaMulticore(corpus, num_topics=k, id2word={i: str(i) for i in range(X.shape[1])}, passes=passes,
                         workers=max(1, (os.cpu_count() or 2) - 1), alpha=0.1, eta=0.01, random_state=seed)
    seconds = time.perf_counter() - t0
    return seconds, model.get_topics().T


def our_pipeline(docword: Path, run: str, truth: np.ndarray, args) -> dict:
    """ingest → cooccur → fit → refine, each on a fresh LocalCluster; errors mapped to the truth's word ids."""
    from jsmf_dask import cooccur, fit, ingest
    from jsmf_dask.io.parquet import read_vocabulary
    from jsmf_dask.pipeline.refine import refine

    rows: list[dict] = []
    staged("ingest", args.workers, lambda: ingest(run, [str(docword)], stopwords=None, overwrite=True), rows)
    staged("cooccur", args.workers, lambda: cooccur(run, overwrite=True), rows)
    spectral = staged(f"fit ({args.rectifier})", args.workers,
                      lambda: fit(run, n_topics=args.topics, rectifier=args.rectifier, tol=args.fit_tol, overwrite=True),
                      rows)
    ids = [int(w[1:]) for w in read_vocabulary(f"{run}/corpus").column("word").to_pylist()]

    def error(B: np.ndarray) -> float:
        full = np.zeros_like(truth)
        full[ids] = B
        return matched_l1(full, truth)

    sweeps: list[dict] = []
    given = {k: v for k, v in (("method", args.method), ("tol", args.tol),
                               ("alpha", args.alpha if args.alpha in (None, "auto") else float(args.alpha)))
             if v is not None}  # the others: the library's defaults
    staged("refine", args.workers, lambda: refine(
        run, model=spectral.name, sweeps=args.sweeps, overwrite=True, **given,
        on_sweep=lambda r: sweeps.append({"phase": r.phase, "sweep": r.sweep, "seconds": r.seconds,
                                          "B_l1": error(r.topics), "inner_iterations": r.inner_iterations})), rows)
    return {"rows": rows, "spectral_B_l1": error(spectral.B), "sweeps": sweeps}


NIPS = Path(__file__).parents[1] / "data" / "nips12-raw" / "nipstxt.tar.xz"


def nips(topics: list[int], out: Path, workers: int, gibbs_iterations: int) -> int:
    """Every method on the shipped NIPS papers, on the same held-out split; prints one table."""
    import dask

    from jsmf_dask import cooccur, evaluate, fit, ingest, refine
    from jsmf_dask.cluster import connect
    from jsmf_dask.pipeline.evaluate import METRICS
    from jsmf_dask.pipeline.gibbs import fit_gibbs

    root = str(out / "nips")
    seconds: dict[str, float] = {}
    with dask.config.set({"jsmf.progress": False}), connect(n_workers=workers, dashboard=False):
        ingest(root, [str(NIPS)], vocab_size=5000, row_group_size=500, encoding="latin-1", overwrite=True)
        cooccur(root, heldout=0.1, overwrite=True)
        for k in topics:
            for name, action in ((f"k{k}-none", lambda: fit(root, n_topics=k, rectifier="none", overwrite=True)),
                                 (f"k{k}-ap", lambda: fit(root, n_topics=k, overwrite=True)),
                                 (f"k{k}-ap-vb", lambda: refine(root, model=f"k{k}-ap", method="vb", sweeps=8,
                                                                alpha=0.1, eta=0.01, overwrite=True)),
                                 (f"k{k}-ap-refined", lambda: refine(root, model=f"k{k}-ap", overwrite=True)),
                                 (f"k{k}-enn", lambda: fit(root, n_topics=k, rectifier="enn", overwrite=True)),
                                 (f"k{k}-enn-refined", lambda: refine(root, model=f"k{k}-enn", overwrite=True)),
                                 (f"k{k}-gibbs", lambda: fit_gibbs(root, n_topics=k, iterations=gibbs_iterations,
                                                                   overwrite=True))):
                t0 = time.perf_counter()
                action()
                seconds[name] = time.perf_counter() - t0
                print(f"{name}: {seconds[name]:.1f} s", file=sys.stderr, flush=True)
        metrics = evaluate(root)["models"]
    print(f"\nNIPS papers (N = 5,000, 10% held out), {workers} workers; seconds: the model's own stage "
          "(refine: its sweeps only, after its source)\n")
    print("| model | " + " | ".join(METRICS) + " | perplexity | seconds |\n|" + "---|" * (len(METRICS) + 3))
    for name, entry in metrics.items():
        vals = [entry["original_C"].get(m) for m in METRICS] + [entry["heldout"]["perplexity"]]
        print(f"| {name} | " + " | ".join("n/a" if v is None else f"{v:.4g}" for v in vals)
              + f" | {seconds.get(name, float('nan')):.1f} |")
    (out / "refine-results-nips.json").write_text(json.dumps({"metrics": metrics, "seconds": seconds}, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--words", type=int, default=5000)
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--length", type=float, default=200)
    p.add_argument("--sweeps", type=int, default=8, help="refine sweeps (each one's error is reported)")
    p.add_argument("--tol", type=float, default=None, help="refine's early stop (default: the library's)")
    p.add_argument("--rectifier", default="ap", choices=("ap", "enn"),
                   help="the spectral start: fit --rectifier (default ap)")
    p.add_argument("--fit-tol", type=float, default=None,
                   help="the rectifier's relative-change stop (fit --tol; default: the library's)")
    p.add_argument("--alpha", default=None, help="refine's alpha (default: the library's)")
    p.add_argument("--method", default=None, choices=("auto", "cvb0", "sampled", "vb"),
                   help="refine's method (default: the library's)")
    p.add_argument("--topics-from", default="separable", choices=("separable", "dirichlet"),
                   help="the synthetic truth: planted anchors (separable) or plain LDA topics (dirichlet)")
    p.add_argument("--runs", type=int, default=3, help="repeats of our pipeline (medians reported)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--gibbs-iterations", type=int, default=1000)
    p.add_argument("--gibbs-timing-iterations", type=int, default=None,
                   help="time this many Gibbs iterations and scale to --gibbs-iterations (its error is then "
                   "not measured)")
    p.add_argument("--gensim-passes", type=int, default=5)
    p.add_argument("--peers", default="gibbs,sklearn,gensim", help="comma-separated; '' for none")
    p.add_argument("--out", default="bench-runs")
    p.add_argument("--nips", default=None, metavar="K1,K2", help="run the NIPS comparison at these K instead")
    args = p.parse_args(argv)
    if args.nips:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        return nips([int(k) for k in args.nips.split(",")], Path(args.out), args.workers, args.gibbs_iterations)
    if args.alpha not in (None, "auto"):
        args.alpha = float(args.alpha)

    from jsmf_dask import synth
    from jsmf_dask.pipeline.synth import read_truth

    base = Path(args.out) / f"refine-M{args.docs}-N{args.words}-K{args.topics}-{args.topics_from}"
    truth_root = base / "truth"
    if not (truth_root / "truth.zarr").exists():
        synth(truth_root, n_docs=args.docs, n_words=args.words, n_topics=args.topics, doc_length=args.length,
              seed=1, alpha=0.1, topics_from=args.topics_from, overwrite=True)
    docword = base / "docword.synth.txt"
    if not docword.exists():
        write_docword(truth_root, docword)
    truth = read_truth(truth_root)["B"]
    runs = [our_pipeline(docword, str(base / "run"), truth, args) for _ in range(args.runs)]

    stages = [r["stage"] for r in runs[0]["rows"]]
    med = {s: statistics.median(next(x["wall_s"] for x in r["rows"] if x["stage"] == s) for r in runs)
           for s in stages}
    peak = {s: max(next(x["peak_worker_mb"] for x in r["rows"] if x["stage"] == s) for r in runs) for s in stages}
    n_sweeps = min(len(r["sweeps"]) for r in runs)
    sweep_err = [statistics.median(r["sweeps"][i]["B_l1"] for r in runs) for i in range(n_sweeps)]
    sweep_s = [statistics.median(r["sweeps"][i]["seconds"] for r in runs) for i in range(n_sweeps)]
    before_refine = sum(med[s] for s in stages if s != "refine")
    end_to_end = before_refine + med["refine"]
    report = {"args": vars(args), "runs": runs, "median_stage_s": med, "peak_worker_mb": peak,
              "spectral_B_l1": statistics.median(r["spectral_B_l1"] for r in runs),
              "sweep_B_l1": sweep_err, "sweep_s": sweep_s, "end_to_end_s": end_to_end, "peers": {}}

    peers = [x for x in args.peers.split(",") if x]
    X = corpus_matrix(truth_root) if {"sklearn", "gensim"} & set(peers) else None
    if "gibbs" in peers:
        try:
            import tomotopy  # noqa: F401
        except ImportError:
            report["peers"]["gibbs"] = "tomotopy not installed"
        else:
            if args.gibbs_timing_iterations:
                g_s, g_B = gibbs(truth_root, args.topics, args.gibbs_timing_iterations, None, os.cpu_count() or 1, 0.1)
                # seconds scaled to --gibbs-iterations; the error is that of the shorter run (an upper bound)
                report["peers"]["gibbs"] = {"seconds": g_s * args.gibbs_iterations / args.gibbs_timing_iterations,
                                            "timed_iterations": args.gibbs_timing_iterations,
                                            "B_l1": matched_l1(g_B, truth)}
            else:
                g_s, g_B = gibbs(truth_root, args.topics, args.gibbs_iterations, None, os.cpu_count() or 1, 0.1)
                report["peers"]["gibbs"] = {"seconds": g_s, "timed_iterations": args.gibbs_iterations,
                                            "B_l1": matched_l1(g_B, truth)}
            print(f"gibbs: {report['peers']['gibbs']}", file=sys.stderr, flush=True)
    for name, fn in (("sklearn", lambda: sklearn_lda(X, args.topics, 1)),
                     ("gensim", lambda: gensim_lda(X, args.topics, 1, args.gensim_passes))):
        if name in peers:
            out = fn()
            report["peers"][name] = out if isinstance(out, str) else {"seconds": out[0], "B_l1": matched_l1(out[1], truth)}
            print(f"{name}: {report['peers'][name]}", file=sys.stderr, flush=True)

    print(f"\nM={args.docs} N={args.words} K={args.topics} L={args.length}; fit --rectifier {args.rectifier} "
          f"--tol {args.fit_tol}; our pipeline: "
          f"medians of {args.runs} runs, {args.workers} worker processes\n")
    print("| stage | wall s | peak RSS / worker MB |\n|---|---|---|")
    for s in stages:
        print(f"| {s} | {med[s]:.1f} | {peak[s]:.0f} |")
    print("\n| method | B L1 | seconds (end to end for ours) |\n|---|---|---|")
    print(f"| spectral ({args.rectifier}) | {report['spectral_B_l1']:.4f} | {before_refine:.1f} |")
    cumulative = before_refine
    for i, (e, s) in enumerate(zip(sweep_err, sweep_s, strict=True), 1):
        cumulative += s
        print(f"| + refine, {i} sweep(s) | {e:.4f} | {cumulative:.1f} |")
    for name, peer in report["peers"].items():
        if isinstance(peer, str):
            print(f"| {name} | {peer} | |")
        else:
            err = f"{peer['B_l1']:.4f}"
            label = name
            if name == "gibbs":
                label = f"gibbs ({peer['timed_iterations']} it"
                label += f", seconds x{args.gibbs_iterations // peer['timed_iterations']})" \
                    if peer["timed_iterations"] != args.gibbs_iterations else ")"
            print(f"| {label} | {err} | {peer['seconds']:.1f} |")
    g = report["peers"].get("gibbs")
    if isinstance(g, dict):
        print(f"\nGibbs / ours end to end (ingest → refine): {g['seconds'] / end_to_end:.1f}x")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"refine-results-M{args.docs}-N{args.words}-K{args.topics}-{args.rectifier}.json").write_text(
        json.dumps(report, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
