"""Benchmark of the whole pipeline (ingest → cooccur → fit) against Gibbs sampling, with known truth.

A corpus is drawn by ``jsmf synth`` (known B), written as a UCI docword file,
and run through ``ingest``, ``cooccur`` and ``fit`` (AP) on a fresh LocalCluster
per stage, timing each stage and sampling every worker's RSS. In the same run:

* the dgemm rate (an N×N by N×K product with the BLAS threads AP uses), so one
  AP iteration's time can be put over its bound 2N²K flops / rate;
* tomotopy's LDA Gibbs sampler (optional: ``pip install tomotopy``) on the
  same documents with all cores: ``--gibbs-iterations`` timed and scaled
  linearly to ``--gibbs-target`` iterations; its B error from a run of
  ``--gibbs-target`` iterations on the first ``--gibbs-error-docs`` documents;
* the B error (mean L1 over topics after optimal matching) of both against the truth.

Usage::

    python -m pipelines.benchmarks.fit --docs 300000 --words 15000 --topics 100 --length 205
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

from jsmf_dask.kernels.metrics import match_topics
from jsmf_dask.io.parquet import read_parquet
from pipelines.benchmarks.memory import PeakMemory


def matched_l1(B: np.ndarray, truth: np.ndarray) -> float:
    """Mean L1 over topics between ``truth`` and ``B``'s columns after optimal matching."""
    return float(np.abs(B[:, match_topics(B, truth)] - truth).sum(axis=0).mean())


def write_docword(root: Path, path: Path) -> None:
    """The synthetic corpus under ``root/corpus`` as a UCI docword file (1-based ids)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    shards = sorted((root / "corpus").glob("part-*.parquet"))
    n_words = pq.read_metadata(root / "corpus" / "vocab.parquet").num_rows
    tables = [read_parquet(str(s)) for s in shards]
    n_docs = sum(t.num_rows for t in tables)
    nnz = sum(len(t.column("word_ids").combine_chunks().flatten()) for t in tables)
    with open(path, "wb") as f:
        f.write(f"{n_docs}\n{n_words}\n{nnz}\n".encode())
        start = 0
        for t in tables:
            ids = t.column("word_ids").combine_chunks()
            doc = np.repeat(np.arange(start, start + t.num_rows) + 1, np.diff(ids.offsets.to_numpy()))
            body = pa.table({"d": doc, "w": ids.flatten().to_numpy() + 1,
                             "c": t.column("counts").combine_chunks().flatten().to_numpy()})
            pacsv.write_csv(body, f, pacsv.WriteOptions(include_header=False, delimiter=" "))
            start += t.num_rows
    (path.parent / path.name.replace("docword.", "vocab.")).write_text(
        "\n".join(f"w{i:05d}" for i in range(n_words)) + "\n")


def staged(label: str, workers: int, func, rows: list, *, memory_limit: str | None = None):
    """Run ``func()`` on a fresh LocalCluster of ``workers`` processes (``memory_limit`` each); append its row
    (wall time, peak RSS per worker, sampled) to ``rows``; return what ``func`` returns."""
    import dask

    from jsmf_dask.cluster import connect

    with dask.config.set({"jsmf.progress": False}), \
            connect(n_workers=workers, memory_limit=memory_limit, dashboard=False) as client:
        pids = list(client.run(os.getpid).values())
        with PeakMemory(pids) as sampler:
            t0 = time.perf_counter()
            out = func()
            wall = time.perf_counter() - t0
    rows.append({"stage": label, "wall_s": wall, "workers": workers,
                 "peak_worker_mb": sampler.largest / 2**20})
    print(f"{label}: {wall:.1f} s, peak worker {rows[-1]['peak_worker_mb']:.0f} MB", file=sys.stderr, flush=True)
    return out


def ap_iteration_over_dgemm(root: str, k: int, repeats: int = 3, cycles: int = 12) -> dict:
    """Seconds per warm AP cycle (median over cycles 3…) and the dgemm bound 2N²K/rate, all cores for BLAS."""
    from threadpoolctl import threadpool_limits

    from jsmf_dask import open_cooccurrence
    from jsmf_dask.kernels.ap import DenseAP, alternating_projection

    C = open_cooccurrence(f"{root}/cooc.zarr").C[:]
    n = C.shape[0]
    with threadpool_limits(limits=os.cpu_count() or 1, user_api="blas"):
        V = np.random.default_rng(0).standard_normal((n, k))
        rates = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            C @ V
            rates.append(2.0 * n * n * k / (time.perf_counter() - t0))
        rate = statistics.median(rates)
        _, _, trace, _ = alternating_projection(DenseAP(C), n, k, iterations=cycles)
        per_iter = statistics.median(trace.seconds[3:])
    bound = 2.0 * n * n * k / rate
    return {"dgemm_gflops": rate / 1e9, "ap_iteration_s": per_iter, "dgemm_bound_s": bound,
            "ratio": per_iter / bound, "cycle_seconds": trace.seconds}


def gibbs(root: Path, k: int, iterations: int, docs: int | None, workers: int, alpha: float) -> tuple[float, np.ndarray]:
    """tomotopy LDA on the stored corpus (words w00000…); returns (seconds, B over the original word ids)."""
    import pyarrow.parquet as pq
    import tomotopy as tp

    n_words = pq.read_metadata(root / "corpus" / "vocab.parquet").num_rows
    model = tp.LDAModel(k=k, alpha=alpha, eta=0.01, seed=1)
    names = [f"w{i:05d}" for i in range(n_words)]
    seen = 0
    for shard in sorted((root / "corpus").glob("part-*.parquet")):
        t = read_parquet(str(shard))
        for ids, cnt in zip(t.column("word_ids").to_pylist(), t.column("counts").to_pylist(), strict=True):
            model.add_doc([names[i] for i, c in zip(ids, cnt, strict=True) for _ in range(c)])
            seen += 1
            if docs is not None and seen >= docs:
                break
        if docs is not None and seen >= docs:
            break
    t0 = time.perf_counter()
    model.train(iterations, workers=workers)
    seconds = time.perf_counter() - t0
    B = np.zeros((n_words, k))
    index = {w: i for i, w in enumerate(model.used_vocabs)}
    for topic in range(k):
        dist = model.get_topic_word_dist(topic)
        for w, i in index.items():
            B[int(w[1:]), topic] = dist[i]
    return seconds, B


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=300000)
    p.add_argument("--words", type=int, default=15000)
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--length", type=float, default=205)
    p.add_argument("--iterations", type=int, default=150, help="AP cycles")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--gibbs-iterations", type=int, default=100)
    p.add_argument("--gibbs-target", type=int, default=1000)
    p.add_argument("--gibbs-error-docs", type=int, default=30000)
    p.add_argument("--no-gibbs", action="store_true", help="skip the Gibbs reference")
    p.add_argument("--out", default="bench-runs")
    args = p.parse_args(argv)

    from jsmf_dask import cooccur, fit, ingest, synth
    from jsmf_dask.io.parquet import read_vocabulary
    from jsmf_dask.pipeline.synth import read_truth

    base = Path(args.out) / f"fit-M{args.docs}-N{args.words}-K{args.topics}"
    truth_root = base / "truth"
    if not (truth_root / "truth.zarr").exists():
        synth(truth_root, n_docs=args.docs, n_words=args.words, n_topics=args.topics, doc_length=args.length,
              seed=1, overwrite=True)
    docword = base / "docword.synth.txt"
    if not docword.exists():
        write_docword(truth_root, docword)
    truth = read_truth(truth_root)["B"]
    run = str(base / "run")
    rows: list[dict] = []
    staged("ingest", args.workers, lambda: ingest(run, [str(docword)], stopwords=None, overwrite=True), rows)
    staged("cooccur", args.workers, lambda: cooccur(run, overwrite=True), rows)
    result = staged("fit (AP)", args.workers, lambda: fit(run, n_topics=args.topics, iterations=args.iterations,
                                               min_anchor_df=0, overwrite=True), rows)
    words = read_vocabulary(f"{run}/corpus").column("word").to_pylist()
    B = np.zeros_like(truth)
    B[[int(w[1:]) for w in words]] = result.B
    total = sum(r["wall_s"] for r in rows)
    ap = ap_iteration_over_dgemm(run, args.topics)
    report = {"rows": rows, "pipeline_s": total, "pipeline_B_l1": matched_l1(B, truth), "ap": ap,
              "n_iter": result.n_iter}
    try:
        import tomotopy  # noqa: F401
    except ImportError:
        report["gibbs"] = "tomotopy not installed"
    if args.no_gibbs:
        report["gibbs"] = "skipped (--no-gibbs)"
    elif "gibbs" not in report:
        g_s, _ = gibbs(truth_root, args.topics, args.gibbs_iterations, None, os.cpu_count() or 1, 0.1)
        _, g_B = gibbs(truth_root, args.topics, args.gibbs_target, args.gibbs_error_docs, os.cpu_count() or 1, 0.1)
        report["gibbs"] = {"timed_iterations": args.gibbs_iterations, "seconds": g_s,
                           "scaled_seconds": g_s * args.gibbs_target / args.gibbs_iterations,
                           "B_l1_at_error_docs": matched_l1(g_B, truth), "error_docs": args.gibbs_error_docs}
    print(json.dumps(report, indent=2))
    print(f"\nM={args.docs} N={args.words} K={args.topics} L={args.length}, {args.iterations} AP iterations\n")
    print("| stage | wall s | workers | peak RSS / worker MB |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['stage']} | {r['wall_s']:.1f} | {r['workers']} | {r['peak_worker_mb']:.0f} |")
    print(f"\nend to end {total:.1f} s; B L1 (matched) {report['pipeline_B_l1']:.3f}")
    print(f"AP iteration {ap['ap_iteration_s']:.2f} s; dgemm bound {ap['dgemm_bound_s']:.2f} s "
          f"({ap['dgemm_gflops']:.1f} GFlop/s); ratio {ap['ratio']:.2f} (target <= 2)")
    if isinstance(report["gibbs"], dict):
        g = report["gibbs"]
        print(f"Gibbs (tomotopy): {g['timed_iterations']} iterations {g['seconds']:.1f} s -> "
              f"{g['scaled_seconds']:.0f} s for {args.gibbs_target}; speed-up {g['scaled_seconds'] / total:.1f}x; "
              f"Gibbs B L1 {g['B_l1_at_error_docs']:.3f} at {g['error_docs']} docs")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"fit-results-M{args.docs}.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
