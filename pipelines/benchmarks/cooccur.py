"""Benchmark of ``cooccur`` at NYTimes scale against a single-process scipy computation.

For each corpus size M (default 30k and 300k documents, N = 15k words, mean
length 205 tokens, drawn from a 100-topic model and written as Parquet shards),
it measures, in the same run:

* ``cooccur`` on a fresh LocalCluster of ``--workers`` single-threaded worker
  processes: wall time (cluster start-up excluded) and the peak RSS of every
  worker process (sampled every 50 ms during the stage), with and without ``D2``;
* the reference: one process reads the same shards, builds the scaled CSR
  matrix H̃ and computes H̃ᵀH̃ − diag(d) with scipy (the same operation the paper's
  code performs densely); wall time and peak RSS, in a fresh subprocess.

Parallel efficiency is ``reference time / (cooccur time × workers)``; the
target is ≥ 2/3. Figures are medians over ``--repeats`` runs. Usage::

    python -m pipelines.benchmarks.cooccur --docs 30000,300000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from pipelines.benchmarks.memory import PeakMemory


def generate(root: Path, n_docs: int, n_words: int, length: float, seed: int) -> None:
    """Write a synthetic corpus under ``root/corpus`` unless it is already there."""
    from jsmf_dask.kernels.synthetic import sample_corpus, separable_topics
    from jsmf_dask.pipeline.synth import write_corpus

    if (root / "corpus" / "vocab.parquet").exists():
        return
    rng = np.random.default_rng(seed)
    B = separable_topics(n_words, 100, rng, concentration=0.05)
    corpus = sample_corpus(B, np.full(100, 0.1), n_docs, length, rng)
    write_corpus(root, corpus, n_words, docs_per_shard=50000, row_group_size=10000, overwrite=True)


def reference(root: str) -> dict:
    """Single process: read shards, build H̃, scipy H̃ᵀH̃ − diag(d). Run in a fresh subprocess."""
    import pyarrow.parquet as pq
    import scipy.sparse as sp

    t0 = time.perf_counter()
    corpus = Path(root) / "corpus"
    n_words = pq.read_metadata(corpus / "vocab.parquet").num_rows
    blocks = []
    for path in sorted(corpus.glob("part-*.parquet")):
        t = pq.ParquetFile(path).read()
        ids = t.column("word_ids").combine_chunks()
        cnt = t.column("counts").combine_chunks()
        blocks.append(sp.csr_array((cnt.flatten().to_numpy().astype(np.float64), ids.flatten().to_numpy(),
                                    ids.offsets.to_numpy().astype(np.int64)), shape=(len(t), n_words)))
    H = sp.vstack(blocks, format="csr")
    n = np.asarray(H.sum(axis=1)).ravel()
    H = H[n >= 2]
    n = n[n >= 2]
    w = 1.0 / (n * (n - 1))
    Ht = sp.diags_array(np.sqrt(w)) @ H
    d = H.T @ w
    t1 = time.perf_counter()
    C = Ht.T @ Ht
    C = C - sp.diags_array(d)
    total = C.sum()
    t2 = time.perf_counter()
    return {
        "read_s": t1 - t0,
        "product_s": t2 - t1,
        "total_s": t2 - t0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "entry_sum": float(total),
        "nnz_H": int(H.nnz),
    }


def run_cooccur(root: Path, workers: int, codoc: bool) -> dict:
    import dask

    from jsmf_dask import cooccur
    from jsmf_dask.cluster import connect

    with dask.config.set({"jsmf.progress": False}), connect(n_workers=workers, dashboard=False) as client:
        pids = list(client.run(os.getpid).values())
        with PeakMemory(pids) as sampler:
            t0 = time.perf_counter()
            summary = cooccur(root, codoc=codoc, overwrite=True)
            wall = time.perf_counter() - t0
    return {"wall_s": wall, "worker_peak_mb": sorted(v / 2**20 for v in sampler.peaks.values()),
            "n_docs": summary.n_docs, "entry_sum": summary.entry_sum}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", default="30000,300000", help="comma-separated corpus sizes M")
    p.add_argument("--words", type=int, default=15000)
    p.add_argument("--length", type=float, default=205)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="bench-runs", help="where corpora and results are kept")
    p.add_argument("--reference-only", metavar="ROOT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.reference_only:
        print(json.dumps(reference(args.reference_only)))
        return 0
    rows = []
    for n_docs in (int(x) for x in args.docs.split(",")):
        root = Path(args.out) / f"synthetic-M{n_docs}-N{args.words}"
        t0 = time.perf_counter()
        generate(root, n_docs, args.words, args.length, seed=n_docs)
        print(f"M={n_docs}: corpus ready ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        runs: dict[str, list[dict]] = {"ref": [], "C": [], "C+D2": []}
        for rep in range(args.repeats):
            out = subprocess.run(
                [sys.executable, "-m", "pipelines.benchmarks.cooccur", "--reference-only", str(root)],
                capture_output=True, text=True, check=True,
            )
            runs["ref"].append(json.loads(out.stdout))
            runs["C"].append(run_cooccur(root, args.workers, codoc=False))
            runs["C+D2"].append(run_cooccur(root, args.workers, codoc=True))
            print(f"M={n_docs} repeat {rep + 1}: ref {runs['ref'][-1]['total_s']:.1f} s, "
                  f"C {runs['C'][-1]['wall_s']:.1f} s, C+D2 {runs['C+D2'][-1]['wall_s']:.1f} s", file=sys.stderr)
        ref_s = statistics.median(r["total_s"] for r in runs["ref"])
        ref_prod = statistics.median(r["product_s"] for r in runs["ref"])
        for label in ("C", "C+D2"):
            wall = statistics.median(r["wall_s"] for r in runs[label])
            peak = statistics.median(max(r["worker_peak_mb"]) for r in runs[label])
            rows.append({
                "M": n_docs, "stage": f"cooccur ({label})", "wall_s": wall, "workers": args.workers,
                "peak_worker_mb": peak, "ref_s": ref_s, "ref_product_s": ref_prod,
                "ref_peak_mb": statistics.median(r["peak_rss_mb"] for r in runs["ref"]),
                "efficiency": ref_s / (wall * args.workers),
                "entry_sum_rel_diff": abs(runs[label][0]["entry_sum"] - runs["ref"][0]["entry_sum"])
                / runs["ref"][0]["entry_sum"],
            })
    print()
    print(f"cooccur benchmark: N={args.words}, mean length {args.length:g}, {args.workers} worker processes, "
          f"median of {args.repeats} runs")
    print()
    print("| M | stage | wall s | peak RSS / worker MB | scipy 1-proc s (product only) | scipy peak MB "
          "| efficiency = ref/(wall×workers) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['M']:,} | {r['stage']} | {r['wall_s']:.1f} | {r['peak_worker_mb']:.0f} | "
              f"{r['ref_s']:.1f} ({r['ref_product_s']:.1f}) | {r['ref_peak_mb']:.0f} | {r['efficiency']:.2f} |")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "cooccur-results.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
