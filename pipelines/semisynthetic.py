"""Semi-synthetic experiments: topics learned from the shipped NIPS papers, documents drawn from them.

1. ingest + cooccur + fit (AP) on the NIPS papers gives a realistic B (N×K);
2. for each prior (Dirichlet, and correlated: logistic normal) and each corpus
   size M, ``synth`` draws M documents from that B (mean length: the NIPS
   corpus's), and each method (none, dc, ap, and gibbs when tomotopy is
   installed and asked for) is fitted to them;
3. the table gives B's error (mean L1 over topics) and A's error (total L1
   over the K×K joint) after optimal column matching, against the truth
   (``A`` = the drawn documents' own mean θθᵀ, which is what C estimates).

Run from the repository root (the defaults take about an hour on 2 cores)::

    python -m pipelines.semisynthetic --out semisynthetic-run
    python -m pipelines.semisynthetic --docs 2000,10000 --methods none,ap --vocab-size 1000 --topics 10
"""

from __future__ import annotations

import argparse
import csv
import logging
import sys
import time
from pathlib import Path

import numpy as np

from jsmf_dask import cooccur, fit, ingest, open_cooccurrence, synth
from jsmf_dask.cluster import connect
from jsmf_dask.io.fs import write_file
from jsmf_dask.kernels.metrics import matched_errors
from jsmf_dask.pipeline.synth import read_truth

NIPS = Path(__file__).parent / "data" / "nips12-raw" / "nipstxt.tar.xz"


def nips_topics(out: Path, vocab_size: int, k: int) -> tuple[np.ndarray, float]:
    """B of an AP model of the NIPS papers, and their mean document length (tokens)."""
    root = out / "nips"
    ingest(root, [str(NIPS)], vocab_size=vocab_size, row_group_size=500, encoding="latin-1",
           overwrite=True)
    # the truth stays the one the table was measured with: the AP model of the paper's C (each paper once)
    summary = cooccur(root, weighting="documents", overwrite=True)
    store = open_cooccurrence(summary.path)
    model = fit(root, n_topics=k, rectifier="ap", overwrite=True)
    return model.B, store.attrs["n_tokens"] / store.attrs["n_docs"]


def fit_method(root: Path, method: str, k: int, gibbs_iterations: int):
    if method == "gibbs":
        from jsmf_dask.pipeline.gibbs import fit_gibbs

        return fit_gibbs(root, n_topics=k, iterations=gibbs_iterations, overwrite=True)
    return fit(root, n_topics=k, rectifier=method, min_anchor_df=0, overwrite=True)


def run(out: Path, *, docs: list[int], methods: list[str], priors: list[str], vocab_size: int, k: int,
        doc_length: float | None, gibbs_iterations: int, seed: int) -> list[dict]:
    """Every (prior, M, method) cell of the table; also written to ``out/semisynthetic.{csv,md}``."""
    B, nips_length = nips_topics(out, vocab_size, k)
    length = doc_length or nips_length
    rows = []
    for prior in priors:
        for m in docs:
            root = out / f"{prior}-M{m}"
            synth(root, n_docs=m, n_words=B.shape[0], n_topics=k, doc_length=length, seed=seed, prior=prior,
                  B=B, overwrite=True)
            cooccur(root, overwrite=True)
            truth = read_truth(root)
            for method in methods:
                t0 = time.perf_counter()
                result = fit_method(root, method, k, gibbs_iterations)
                b_err, a_err = matched_errors(result.B, result.A, truth["B"], truth["A"])
                rows.append({"prior": prior, "docs": m, "method": method, "B_error": b_err, "A_error": a_err,
                             "seconds": time.perf_counter() - t0})
                print(f"{prior:>10} M={m:<7} {method:>6}: B error {b_err:.4f}  A error {a_err:.4f}", flush=True)
    header = ["prior", "docs", "method", "B_error", "A_error", "seconds"]
    lines = ["| prior | M | method | B error (mean L1) | A error (L1) | fit s |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['prior']} | {r['docs']} | {r['method']} | {r['B_error']:.4f} | {r['A_error']:.4f} | "
              f"{r['seconds']:.1f} |" for r in rows]
    table = "\n".join(lines) + "\n"
    with open(out / "semisynthetic.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    write_file(str(out / "semisynthetic.md"),
               f"Semi-synthetic: B from AP (K = {k}) on NIPS ({B.shape[0]} words), mean length {length:.0f}.\n\n"
               + table, root=str(out))
    print(table)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="semisynthetic-run")
    p.add_argument("--docs", default="2000,10000,50000", help="corpus sizes M (comma-separated)")
    p.add_argument("--methods", default="none,dc,ap", help="from none,dc,ap,gibbs (gibbs needs tomotopy)")
    p.add_argument("--priors", default="dirichlet,correlated")
    p.add_argument("--vocab-size", type=int, default=2000)
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--doc-length", type=float, help="mean tokens per document (default: the NIPS corpus's)")
    p.add_argument("--gibbs-iterations", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scheduler", help="Dask scheduler address (default: a LocalCluster)")
    args = p.parse_args(argv)
    logging.getLogger("distributed").setLevel(logging.WARNING)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with connect(args.scheduler):
        run(out, docs=[int(x) for x in args.docs.split(",")], methods=args.methods.split(","),
            priors=args.priors.split(","), vocab_size=args.vocab_size, k=args.topics, doc_length=args.doc_length,
            gibbs_iterations=args.gibbs_iterations, seed=args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
