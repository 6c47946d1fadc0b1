"""Benchmark of the large-vocabulary route: compressed co-occurrence + ENN/LAW against the dense store + AP.

For each ``--case`` (M documents, N words) a corpus is drawn by ``jsmf synth``
(K topics, ``--length`` tokens per document, known B) and written as a UCI
docword file; then, each stage on a fresh LocalCluster of ``--workers`` worker
processes with ``--memory-limit`` each, every worker's RSS sampled:

* ``lowrank``: ingest → ``cooccur --rank K`` → ``fit --rectifier enn``;
* ``dense`` (only where N is at most ``--dense-max-words``): ingest → ``cooccur``
  → ``fit`` (AP in one task, on workers with LocalCluster's default memory, since
  AP in one task needs about 2.5·8N² bytes on one worker).

It prints one row per stage (wall seconds, peak worker RSS) and per route the
total and the B error (mean L1 over topics after matching) against the truth;
with ``--runs`` above 1 the medians. ``--nips`` adds the shipped NIPS papers at
N = 5,000 and the whole vocabulary: the paper's six metrics of AP and ENN.

Usage::

    python -m pipelines.benchmarks.large_vocabulary --case 300000x15000 --case 300000x100000 \\
        --topics 100 --memory-limit 2GiB
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

from pipelines.benchmarks.fit import matched_l1, staged, write_docword


def route(name: str, docword: Path, run: Path, k: int, truth, args) -> dict:
    from jsmf_dask import cooccur, fit, ingest

    if run.exists():
        shutil.rmtree(run)
    rows: list[dict] = []
    n_words = truth.shape[0]
    # AP in one task needs about 2.5·8N² bytes on one worker: the dense route gets LocalCluster's default
    # memory per worker (machine memory / workers); the low-rank route the --memory-limit under test.
    limit = args.memory_limit if name == "lowrank" else None
    staged(f"{name} ingest", args.workers,
           lambda: ingest(str(run), [str(docword)], vocab_size=n_words, stopwords=None), rows, memory_limit=limit)
    if name == "lowrank":
        summary = staged(f"{name} cooccur --rank {k}", args.workers,
                         lambda: cooccur(str(run), rank=k), rows, memory_limit=limit)
        result = staged(f"{name} fit enn", args.workers,
                        lambda: fit(str(run), n_topics=k, rectifier="enn"), rows, memory_limit=limit)
        extra = {"n_passes": summary.n_passes, "eig_residual": summary.eig_residual,
                 "enn_cycles": result.n_iter, "correction_nnz": result.attrs["low_rank"]["correction_nnz"]}
    else:
        staged(f"{name} cooccur", args.workers,
               lambda: cooccur(str(run), codoc=False), rows, memory_limit=limit)
        result = staged(f"{name} fit ap", args.workers,
                        lambda: fit(str(run), n_topics=k), rows, memory_limit=limit)
        extra = {"ap_cycles": result.n_iter}
    # ingest renumbers words by tf-idf rank; map B back to the truth's ids (vocabulary words are w00000…)
    from jsmf_dask.io.parquet import read_vocabulary

    import numpy as np

    words = read_vocabulary(f"{run}/corpus").column("word").to_pylist()
    full = np.zeros_like(truth)
    full[[int(w[1:]) for w in words]] = result.B
    return {"stages": rows, "total_s": sum(r["wall_s"] for r in rows), "B_l1": matched_l1(full, truth), **extra}


def nips(out: Path, k: int, workers: int, runs: int = 1) -> dict:
    """AP and ENN on the shipped NIPS papers: the six metrics and the fit times (medians of ``runs``).

    At N = 5,000 both fit the dense store and are measured against its C; the compressed route
    (``cooccur --rank K`` → ENN) is timed too and measured against the rank-K C it holds. The whole
    vocabulary (70k words: AP's dense iterates would need 130 GB) takes the compressed route only.
    """
    import time

    import dask

    from jsmf_dask import cooccur, evaluate, fit, ingest
    from jsmf_dask.cluster import connect

    archive = Path(__file__).resolve().parents[1] / "data" / "nips12-raw" / "nipstxt.tar.xz"
    metrics = ("recovery", "approximation", "dominancy", "specificity", "dissimilarity", "coherence")

    def timed_fit(root: Path, rect: str) -> dict:
        seconds = []
        for _ in range(runs):
            t0 = time.perf_counter()
            result = fit(str(root), n_topics=k, rectifier=rect, name=f"k{k}-{rect}", overwrite=True)
            seconds.append(time.perf_counter() - t0)
        measured = evaluate(str(root), models=[f"k{k}-{rect}"])["models"][f"k{k}-{rect}"]["original_C"]
        return {"fit_s": statistics.median(seconds), "fit_s_runs": seconds, "cycles": result.n_iter,
                **{m: measured[m] for m in metrics}}

    results = {}
    with dask.config.set({"jsmf.progress": False}), connect(n_workers=workers, dashboard=False):
        for vocab in (5000, None):
            label = f"N={vocab}" if vocab else "whole vocabulary"
            dense, compressed = out / f"nips-{vocab or 'all'}", out / f"nips-{vocab or 'all'}-rank{k}"
            if not (dense / "corpus").exists():
                ingest(str(dense), [str(archive)], vocab_size=vocab, encoding="latin-1")
            if not (compressed / "corpus").exists():
                shutil.copytree(dense / "corpus", compressed / "corpus")
            entry: dict = {}
            if vocab is not None:
                cooccur(str(dense), overwrite=True)
                entry["dense: ap"] = timed_fit(dense, "ap")
                entry["dense: enn"] = timed_fit(dense, "enn")
            t0 = time.perf_counter()
            summary = cooccur(str(compressed), rank=k, overwrite=True)
            entry["compressed: cooccur_s"] = time.perf_counter() - t0
            entry["n_words"] = summary.n_words
            entry["compressed: enn (vs the rank-K C)"] = timed_fit(compressed, "enn")
            results[label] = entry
            print(f"NIPS {label}: {json.dumps(entry)}", file=sys.stderr, flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", action="append", default=[], metavar="MxN", help="documents x words (repeatable)")
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--length", type=float, default=205)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default="2GiB")
    p.add_argument("--dense-max-words", type=int, default=15000)
    p.add_argument("--routes", default="lowrank,dense",
                   help="comma-separated routes to run (lowrank, dense; dense only up to --dense-max-words)")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--nips", action="store_true")
    p.add_argument("--nips-topics", type=int, default=20)
    p.add_argument("--out", type=Path, default=Path("bench-large-vocabulary"))
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)

    from jsmf_dask.pipeline.synth import read_truth, synth

    report: dict = {"cases": {}}
    for case in args.case:
        m, n = (int(x) for x in case.lower().split("x"))
        base = args.out / case
        truth_root = base / "truth"
        if not (truth_root / "truth.zarr").exists():
            synth(truth_root, n_docs=m, n_words=n, n_topics=args.topics, doc_length=args.length, seed=0,
                  overwrite=True)
        docword = base / "docword.synth.txt"
        if not docword.exists():
            write_docword(truth_root, docword)
        truth = read_truth(truth_root)["B"]
        wanted = args.routes.split(",")
        routes = [r for r in ("lowrank", "dense") if r in wanted and (r == "lowrank" or n <= args.dense_max_words)]
        entry = {}
        for name in routes:
            runs = [route(name, docword, base / name, args.topics, truth, args) for _ in range(args.runs)]
            stages = {}
            for r in runs:
                for row in r["stages"]:
                    stages.setdefault(row["stage"], []).append(row)
            entry[name] = {
                "stages": [{"stage": s, "wall_s": statistics.median(x["wall_s"] for x in rs),
                            "peak_worker_mb": max(x["peak_worker_mb"] for x in rs)} for s, rs in stages.items()],
                "total_s": statistics.median(r["total_s"] for r in runs),
                "B_l1": statistics.median(r["B_l1"] for r in runs),
                **{k: v for k, v in runs[-1].items() if k not in ("stages", "total_s", "B_l1")},
            }
        report["cases"][case] = entry
        print(f"\n## M={m}, N={n}, K={args.topics}, {args.workers} workers (low-rank route: {args.memory_limit} each)")
        print("| route | stage | wall s | peak RSS per worker MB |\n|---|---|---|---|")
        for name, e in entry.items():
            for row in e["stages"]:
                print(f"| {name} | {row['stage']} | {row['wall_s']:.1f} | {row['peak_worker_mb']:.0f} |")
            print(f"| {name} | **total** | **{e['total_s']:.1f}** | B L1 vs truth **{e['B_l1']:.3f}** |")
        if "dense" in entry and "lowrank" in entry:
            print(f"\nENN route / AP route: {entry['lowrank']['total_s'] / entry['dense']['total_s']:.2f} of the time "
                  f"(fit alone: {entry['lowrank']['stages'][-1]['wall_s'] / entry['dense']['stages'][-1]['wall_s']:.2f}); "
                  f"B error {entry['lowrank']['B_l1'] / entry['dense']['B_l1']:.3f} of AP's")
    if args.nips:
        report["nips"] = nips(args.out, args.nips_topics, args.workers, args.runs)
        print("\n## NIPS papers, K =", args.nips_topics)
        print(json.dumps(report["nips"], indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
