"""The demo behind ``make demo``: the shipped NIPS papers, end to end on a local Dask cluster.

ingest (raw OCR text of 1,740 NIPS papers, tf-idf vocabulary of 5,000 words)
→ cooccur (C into ``<root>/cooc.zarr``, 10% of the papers held out) → fit (AP,
K = 20, and the unrectified Baseline for comparison, into ``<root>/model.zarr``)
→ refine (CVB0 sweeps from the AP model) → evaluate (the paper's
metrics and held-out perplexity) → report (``<root>/report/report.html``).
Prints the corpus statistics, the metrics, the spectral and refined topics and
the report's path. Run from the
repository root::

    python -m pipelines.demo --root demo-run
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

from jsmf_dask import cooccur, evaluate, fit, ingest, open_cooccurrence, refine, report
from jsmf_dask.cluster import connect
from jsmf_dask.io.parquet import read_vocabulary
from jsmf_dask.pipeline.refine_candidates import choice_line

NIPS = Path(__file__).parent / "data" / "nips12-raw" / "nipstxt.tar.xz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="demo-run", help="run root (replaced on every run)")
    parser.add_argument("--vocab-size", type=int, default=5000)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=150, help="AP cycles")
    parser.add_argument("--sweeps", type=int, default=None, help="refine sweeps at most (default: the library's, 50)")
    parser.add_argument("--heldout", type=float, default=0.1, help="fraction of papers held out for perplexity")
    parser.add_argument("--validation", type=float, default=0.05,
                        help="fraction of papers refine scores each sweep to decide when to stop")
    parser.add_argument("--scheduler", help="a Dask scheduler address, local, threads or synchronous (default: "
                        "auto, by the corpus's size)")
    args = parser.parse_args(argv)
    logging.getLogger("distributed").setLevel(logging.WARNING)
    t0 = time.perf_counter()
    with connect(args.scheduler, on_dashboard=lambda link: print(f"dask dashboard: {link}"), on_engine=print):
        print(f"== ingest {NIPS.name} (raw text, vocabulary of {args.vocab_size} words by tf-idf)")
        ingested = ingest(args.root, [str(NIPS)], vocab_size=args.vocab_size, row_group_size=500,
                          encoding="latin-1", overwrite=True)  # OCR text: see its README
        print("\n".join(ingested.lines()))
        print("== cooccur")
        summary = cooccur(args.root, overwrite=True, heldout=args.heldout, validation=args.validation)
        print("\n".join(summary.lines()))
        print(f"== fit: AP rectification, K = {args.topics}, {args.iterations} iterations")
        t1 = time.perf_counter()
        model = fit(args.root, n_topics=args.topics, rectifier="ap", iterations=args.iterations, overwrite=True)
        fit_seconds = time.perf_counter() - t1
        print(f"== fit: the Baseline (no rectification), K = {args.topics}")
        fit(args.root, n_topics=args.topics, rectifier="none", overwrite=True)
        print(f"== refine {model.name}: CVB0 sweeps over the training papers")
        t1 = time.perf_counter()
        given = {"sweeps": args.sweeps} if args.sweeps is not None else {}  # else the library's default
        refined = refine(args.root, model=model.name, overwrite=True, on_sweep=lambda r: print(r.line(), flush=True),
                         **given)
        refine_seconds = time.perf_counter() - t1
        print("== evaluate and report")
        metrics = evaluate(args.root)
        html = report(args.root, model=model.name)
    store = open_cooccurrence(summary.path)
    vocab = read_vocabulary(f"{args.root}/corpus")
    words = np.array(vocab.column("word").to_pylist())
    C = store.C[:]
    print("== corpus statistics")
    print(f"documents {store.attrs['n_docs']}, tokens {store.attrs['n_tokens']}, "
          f"mean length {store.attrs['n_tokens'] / store.attrs['n_docs']:.1f}")
    print(f"C: sum {C.sum():.15f}, symmetric {bool((C == C.T).all())}, min {C.min():.3g}, "
          f"non-zero {np.count_nonzero(C) / C.size:.1%}")
    print("top words by tf-idf:", " ".join(words[:20]))
    print("most frequent words:", " ".join(words[np.argsort(-vocab.column('tf').to_numpy(), kind='stable')[:20]]))
    print("== metrics against the original C (paper §4; report/metrics.json has them against the rectified C)")
    names = ("recovery", "approximation", "dominancy", "specificity", "dissimilarity", "coherence")
    print(f"{'model':<10}" + "".join(f"{n:>15}" for n in names) + f"{'perplexity':>15}")
    for name, entry in metrics["models"].items():
        values = [entry["original_C"].get(n) for n in names] + [entry.get("heldout", {}).get("perplexity")]
        print(f"{name:<10}" + "".join(f"{'n/a':>15}" if v is None else f"{v:>15.4g}" for v in values))
    print(f"(perplexity: document completion on the {metrics['heldout_fraction']:.0%} of papers held out; lower is "
          "better)")
    print(f"== topics (anchor word in brackets; fit took {fit_seconds:.0f} s, "
          f"final eigen-residual {model.attrs['final_eig_residual']:.1e})")
    print("\n".join(model.lines(12)))
    refit = refined.attrs.get("refit")
    again = f", then {refit['sweeps']} more with the validation papers in training" if refit else ""
    if (chosen := choice_line(refined.attrs)) is not None:  # soft sweeps alone, or drawn ones first
        again = f"{again}; {chosen}"
    print(f"== refined topics ({refined.n_iter} sweeps{again}, {refine_seconds:.0f} s; top-10 words gained +[...] "
          "and lost -[...] per topic)")
    print("\n".join(refined.lines(12)))
    print("\n".join(refined.changes()))
    print(f"models: {model.url}, {refined.url}; topics: {args.root}/topics/")
    print(f"report: {html}")
    print(f"done in {time.perf_counter() - t0:.1f} s; outputs under {args.root}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
