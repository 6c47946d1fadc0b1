"""Refine with the corpus's prepared row groups kept in memory against spilled to scratch (out of core).

A corpus whose prepared blocks do not fit in a quarter of the workers' memory
(:data:`~jsmf_dask.pipeline.refine_sweeps.PREPARED_MEMORY_SHARE`) writes them
once to the refine's scratch and each round of a sweep reads back its group's
documents. This forces that route on a corpus that would fit, so that the two
are timed on the same documents, start and engine: the same number of sweeps
(``--sweeps``, no stop), each route ``--runs`` times in alternation. Printed
per route: wall seconds of the refine, the median sweep, the largest resident
set of any one process (the driver or a worker, sampled every 50 ms), and the
ratio to the kept route; and the largest difference between the two models
(they are the same to the bit).

Usage::

    python -m pipelines.benchmarks.refine_out_of_core --corpus lda-20k --runs 3
    python -m pipelines.benchmarks.refine_out_of_core --corpus lda-100k --engine local --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

from jsmf_dask.parameters import refined_fit_iterations
from pipelines.benchmarks.memory import PeakMemory
from pipelines.benchmarks.small import SYNTHETIC, _inputs

ROUTES = ("kept", "spilled")


def _prepare_root(corpus: str, out: Path) -> tuple[str, str]:
    """A run root with the corpus ingested, C built (5% validation) and the spectral fit; its model's name."""
    from jsmf_dask import cooccur, fit, ingest

    inputs, _, k = _inputs(corpus, out, out)  # synthetic corpora: no extra ingest flags
    root = out / f"ooc-{corpus}"
    if not (root / "model.zarr" / f"k{k}-ap").exists():
        ingest(root, inputs, vocab_size=5000, overwrite=True)
        cooccur(root, validation=0.05, overwrite=True)
        fit(root, n_topics=k, iterations=refined_fit_iterations(k), overwrite=True)
    return str(root), f"k{k}-ap"


def _refine(root: str, model: str, route: str, sweeps: int) -> dict:
    import jsmf_dask.pipeline.refine_sweeps as refine_sweeps
    from jsmf_dask import refine

    share = refine_sweeps.PREPARED_MEMORY_SHARE
    refine_sweeps.PREPARED_MEMORY_SHARE = 0.0 if route == "spilled" else share
    try:
        with PeakMemory() as peak:
            t0 = time.perf_counter()
            result = refine(root, model=model, name=f"{model}-{route}", sweeps=sweeps, tol=None, drawn_sweeps=0,
                            refit="never", overwrite=True)
            seconds = time.perf_counter() - t0
    finally:
        refine_sweeps.PREPARED_MEMORY_SHARE = share
    return {"seconds": seconds, "sweep": float(np.median(result.trace["seconds"][1:])), "peak": peak.largest}


def main(argv: list[str] | None = None) -> None:
    import dask

    from jsmf_dask import open_model
    from jsmf_dask.cluster import connect

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default="lda-20k", choices=sorted(SYNTHETIC))
    p.add_argument("--engine", default="threads", help="threads (this process) or local (the embedded LocalCluster)")
    p.add_argument("--sweeps", type=int, default=6)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", default="bench-runs")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore")
    rows: dict[str, list[dict]] = {route: [] for route in ROUTES}
    with dask.config.set({"jsmf.progress": False}), connect(args.engine, dashboard=False):
        root, model = _prepare_root(args.corpus, out)
        for run in range(args.runs):
            for route in ROUTES:
                rows[route].append(_refine(root, model, route, args.sweeps))
            print(f"run {run + 1} done", flush=True)
    kept = statistics.median(r["seconds"] for r in rows["kept"])
    print(f"\n{args.corpus}, {args.sweeps} sweeps, {args.engine}, medians of {args.runs}\n")
    print("| route | refine s | median sweep s | peak GB (one process) | / kept |")
    print("|---|---|---|---|---|")
    for route in ROUTES:
        seconds = statistics.median(r["seconds"] for r in rows[route])
        sweep = statistics.median(r["sweep"] for r in rows[route])
        peak = max(r["peak"] for r in rows[route])
        print(f"| {route} | {seconds:.2f} | {sweep:.3f} | {peak / 2**30:.2f} | {seconds / kept:.2f}x |")
    a, b = (open_model(root, f"{model}-{route}").group["lambda"][...] for route in ROUTES)
    print(f"\nlargest difference between the two models' word-topic counts: {np.abs(a - b).max():.3g}")


if __name__ == "__main__":
    main()
