"""Each document once or by its tokens in C: the spectral model and the default refine under both, against Gibbs.

On one root per corpus (``quality.py``'s corpora and names: the shipped ones, this machine's text, synthetic
ones, or a file of one's own), ``cooccur --heldout 0.1 --validation 0.05`` with ``weighting='documents'`` (the
paper's eq. 1), then the default route's spectral fit (AP, 20 or 50 cycles, the anchor vocabulary where ``auto``
takes one) and the default refine from it; the same with ``weighting='tokens'`` (the store rebuilt in place: the
same documents held out and kept for validation); then tomotopy's Gibbs sampler (seed 0, 1,000 iterations) on
every document not held out. Every model is scored on the same held-out documents by the exact fold-in
(``evaluate``'s reference: document completion, θ by Gibbs sampling under each model's own document prior), and
each row says its gap to Gibbs and the tokens model's gap to the documents model of its kind, ± the paired
standard error. Perplexities are deterministic; seconds are single runs.

Usage::

    python -m pipelines.benchmarks.weighting --corpora movielens,changelogs --topics 20,50
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pipelines.benchmarks.quality import REPO, corpus_and_topics, ingest_corpus

WEIGHTINGS = ("documents", "tokens")


def run_corpus(name: str, topics: list[int], out: Path, data: Path) -> list[dict]:
    """Both weightings' spectral and refined models at every K of ``topics``, and Gibbs's, scored; the rows."""
    import dask

    from jsmf_dask import cooccur, fit
    from jsmf_dask.kernels.model_selection import paired_gap
    from jsmf_dask.parameters import refined_fit_iterations
    from jsmf_dask.pipeline.evaluate import heldout_document_scores
    from jsmf_dask.pipeline.gibbs import fit_gibbs
    from jsmf_dask.pipeline.refine import refine

    root = str(out / f"weighting-{name}")
    rows = []
    with dask.config.set({"scheduler": "threads", "jsmf.progress": False}):
        ingest_corpus(name, root, out, data)
        seconds: dict[str, float] = {}
        for weighting in WEIGHTINGS:
            cooccur(root, heldout=0.1, validation=0.05, weighting=weighting, overwrite=True)
            for k in topics:
                t0 = time.perf_counter()
                fit(root, n_topics=k, iterations=refined_fit_iterations(k), anchor_words="auto",
                    name=f"k{k}-{weighting}-ap", overwrite=True)
                seconds[f"k{k}-{weighting}-ap"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                refine(root, model=f"k{k}-{weighting}-ap", name=f"k{k}-{weighting}", overwrite=True)
                seconds[f"k{k}-{weighting}"] = time.perf_counter() - t0
                print(f"{name} K={k} {weighting}: fit {seconds[f'k{k}-{weighting}-ap']:.1f} s, refine "
                      f"{seconds[f'k{k}-{weighting}']:.1f} s", file=sys.stderr, flush=True)
        for k in topics:
            t0 = time.perf_counter()
            fit_gibbs(root, n_topics=k, name=f"k{k}-gibbs", overwrite=True)
            seconds[f"k{k}-gibbs"] = time.perf_counter() - t0
            names = [f"k{k}-gibbs"] + [f"k{k}-{w}{s}" for w in WEIGHTINGS for s in ("-ap", "")]
            scores = heldout_document_scores(root, names, 0.1, fold_ins=("sampled",))["sampled"]
            L, n = scores.log_likelihood, scores.n_tokens
            for kind in ("-ap", ""):
                for w in WEIGHTINGS:
                    model = f"k{k}-{w}{kind}"
                    gap, se = paired_gap(L[f"k{k}-gibbs"], L[model], n)
                    row = {"corpus": name, "K": k, "model": "spectral" if kind else "refined", "weighting": w,
                           "perplexity": float(2.718281828459045 ** (-L[model].sum() / n.sum())),
                           "vs_gibbs": gap, "vs_gibbs_se": se, "seconds": seconds[model]}
                    if w == "tokens":
                        row["vs_documents"], row["vs_documents_se"] = paired_gap(L[f"k{k}-documents{kind}"],
                                                                                  L[model], n)
                    rows.append(row)
    return rows


def _table(rows: list[dict]) -> str:
    lines = ["| corpus | K | model | weighting | held out | vs Gibbs | tokens vs documents | s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        versus = (f"{100 * r['vs_documents']:+.2f}% ± {100 * r['vs_documents_se']:.2f}" if "vs_documents" in r
                  else "")
        lines.append(f"| {r['corpus']} | {r['K']} | {r['model']} | {r['weighting']} | {r['perplexity']:.1f} | "
                     f"{100 * r['vs_gibbs']:+.2f}% ± {100 * r['vs_gibbs_se']:.2f} | {versus} | {r['seconds']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpora", default="movielens,reuters")
    p.add_argument("--topics", default="20,50", help="K values (synthetic corpora and baskets use their own K)")
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--out", default="bench-runs")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.corpora.split(","):
        name, topics = corpus_and_topics(name, args)
        if name is None:
            continue
        rows += run_corpus(name, topics, out, Path(args.data))
        print(_table([r for r in rows if r["corpus"] == name]), flush=True)
    (out / "weighting-results.json").write_text(json.dumps(rows, indent=1))
    print("\n" + _table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
