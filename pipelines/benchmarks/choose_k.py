"""``choose-k`` on a shipped corpus against one Gibbs fit (issue: choosing the number of topics).

For each run: ingest the corpus (5,000 words), build C with 10% held out and 5% validation documents, run
:func:`jsmf_dask.choose_k` over the candidate K (each K's fit and refine timed), then time one tomotopy Gibbs
fit (1000 iterations, its defaults otherwise) at ``--gibbs-k`` on every document not held out, in the same
run. Prints the per-K table, the curves' picks and the totals; medians over ``--runs``::

    python -m pipelines.benchmarks.choose_k --corpus nips-papers --topics 5:100 --runs 3
    python -m pipelines.benchmarks.choose_k --corpus nips-papers --topics 5:100 --iterations 10

Everything runs on threads in this process; the peak memory printed is this process's.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

from pipelines.benchmarks.quality import ingest_corpus


def _topics(text: str) -> list[int]:
    from jsmf_dask.cli_parser import _topics_spec

    return _topics_spec(text)


def run_once(args, run: int) -> dict:
    import dask

    from jsmf_dask import cooccur
    from jsmf_dask.pipeline.choose_k import choose_k
    from jsmf_dask.pipeline.gibbs import fit_gibbs

    root = str(Path(args.out) / f"choose-k-{args.corpus}")
    with dask.config.set({"scheduler": "threads", "jsmf.progress": False}):
        ingest_corpus(args.corpus, root, Path(args.out), Path(args.data))
        cooccur(root, heldout=0.1, validation=0.05, overwrite=True)
        for name in _models(root):  # a fresh sweep each run (choose-k would resume)
            from jsmf_dask.io.fs import remove
            from jsmf_dask.io.model_store import model_path

            remove(model_path(root, name), root=root)
        t0 = time.perf_counter()
        result = choose_k(root, topics=args.topics, iterations=args.iterations,
                          on_k=lambda rec: print(f"run {run}: {rec.line()}", file=sys.stderr, flush=True))
        sweep = time.perf_counter() - t0
        gibbs = None
        if not args.no_gibbs:
            t0 = time.perf_counter()
            fit_gibbs(root, n_topics=args.gibbs_k, iterations=1000, name=f"k{args.gibbs_k}-gibbs", overwrite=True)
            gibbs = time.perf_counter() - t0
    return {"run": run, "choose_k_seconds": sweep, "gibbs_seconds": gibbs, "recommended": result.recommended,
            "lowest_perplexity": result.best_perplexity_k, "coherence_peak": result.coherence_peak_k,
            "npmi_peak": result.npmi_peak_k, "rows": result.rows, "validation": result.validation}


def _models(root: str) -> list[str]:
    from jsmf_dask.io.model_store import list_models

    return [m for m in list_models(root) if m.startswith("choose-k")]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default="nips-papers")
    p.add_argument("--topics", type=_topics, default=_topics("5:100"))
    p.add_argument("--iterations", type=int, default=None, help="AP cycles per K (default: choose_k's)")
    p.add_argument("--gibbs-k", type=int, default=20)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--no-gibbs", action="store_true")
    p.add_argument("--out", default="/tmp/bench")
    p.add_argument("--data", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    p.add_argument("--json", help="write every run's figures here")
    args = p.parse_args(argv)
    if args.iterations is None:
        from jsmf_dask.parameters import CHOOSE_K_ITERATIONS

        args.iterations = CHOOSE_K_ITERATIONS
    runs = [run_once(args, r + 1) for r in range(args.runs)]
    last = runs[-1]
    print(f"{args.corpus}: K in {args.topics}, {args.iterations} AP cycles per K; validation documents "
          f"{last['validation']['n_docs']} ({last['validation']['n_tokens']} tokens)")
    print("| K | fit s | refine s | sweeps | validation perplexity | ± paired SE | coherence | NPMI |")
    print("|---|---|---|---|---|---|---|---|")
    for j, row in enumerate(last["rows"]):
        fit_s = statistics.median(r["rows"][j]["fit_seconds"] for r in runs)
        ref_s = statistics.median(r["rows"][j]["refine_seconds"] for r in runs)
        print(f"| {row['n_topics']} | {fit_s:.1f} | {ref_s:.1f} | {row['sweeps']} | {row['perplexity']:.1f} | "
              f"{row['perplexity_se']:.1f} | {row['coherence']:.1f} | {row['npmi']:.3f} |")
    sweep = statistics.median(r["choose_k_seconds"] for r in runs)
    line = f"choose-k total {sweep:.1f} s (median of {len(runs)})"
    if not args.no_gibbs:
        gibbs = statistics.median(r["gibbs_seconds"] for r in runs)
        line += f"; one Gibbs fit at K = {args.gibbs_k}: {gibbs:.1f} s; ratio choose-k / Gibbs {sweep / gibbs:.2f}"
    print(line)
    print(f"recommended K {last['recommended']}; lowest perplexity at {last['lowest_perplexity']}; coherence peak "
          f"{last['coherence_peak']}, NPMI peak {last['npmi_peak']}")
    print(f"peak memory of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
