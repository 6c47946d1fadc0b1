"""The stage-by-stage route without validation documents against the default route with them, one scorer.

``jsmf topics``, ``jsmf run`` and the estimator run ``cooccur`` with 5% of the documents kept for refine's
validation stop; ``jsmf cooccur`` alone keeps none unless asked, and ``refine`` on such a store runs to its
tolerance or its sweeps (no validation stop, no drawn candidates, no refit). For each corpus (the names and
ingest of ``quality.py``) this builds two roots, ``cooccur --heldout 0.1`` with and without ``--validation
0.05`` — the same held-out documents, chosen by doc-id hash — fits the default route's start on each (20 or 50
AP cycles on the anchor vocabulary) and refines it with refine's defaults, then scores both refined models by
document completion on the held-out documents under each model's own prior. Prints a table of held-out
perplexity, the change without validation against with it (± the paired standard error), the state returned
and refine's seconds; writes every row to ``--json``. Perplexities are deterministic. Usage::

    python -m pipelines.benchmarks.validation_route --corpora reuters,movielens,nips-papers,nips17-bow --topics 20,50
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import dask

from jsmf_dask import cooccur, evaluate, fit, refine
from jsmf_dask.kernels.model_selection import paired_gap
from jsmf_dask.parameters import refined_fit_iterations
from jsmf_dask.pipeline.evaluate import heldout_document_scores
from pipelines.benchmarks.quality import REPO, ingest_corpus

HELDOUT = 0.1
ROUTES = {"with validation": 0.05, "without": None}


def run_corpus(corpus: str, topics: list[int], out: Path, data: Path) -> list[dict]:
    """Both routes at every K on one corpus; one row per K."""
    roots = {}
    for route, validation in ROUTES.items():
        root = str(out / f"validation-route-{corpus}-{'with' if validation else 'without'}")
        ingest_corpus(corpus, root, out, data)
        cooccur(root, heldout=HELDOUT, validation=validation, overwrite=True)
        roots[route] = root
    rows = []
    for k in topics:
        row: dict = {"corpus": corpus, "K": k}
        scores = {}
        for route, root in roots.items():
            fit(root, n_topics=k, iterations=refined_fit_iterations(k), anchor_words="auto", name=f"k{k}-ap",
                overwrite=True)
            t0 = time.perf_counter()
            refined = refine(root, model=f"k{k}-ap", name=f"k{k}-refined", overwrite=True)
            seconds = time.perf_counter() - t0
            perplexity = evaluate(root, models=[f"k{k}-refined"])["models"][f"k{k}-refined"]["heldout"]["perplexity"]
            scores[route] = heldout_document_scores(root, [f"k{k}-refined"], HELDOUT)["vb"]
            row[route] = {"perplexity": perplexity, "seconds": seconds, "stopped": refined.attrs["stopped"],
                          "returned_state": refined.attrs["returned_state"],
                          "warnings": len(refined.attrs["warnings"])}
        with_, without = scores["with validation"], scores["without"]
        assert with_.n_tokens.tolist() == without.n_tokens.tolist(), "the routes must score the same documents"
        # log likelihood per token with validation minus without: positive when the route without is worse
        gap, se = paired_gap(with_.log_likelihood[f"k{k}-refined"], without.log_likelihood[f"k{k}-refined"],
                             with_.n_tokens)
        row |= {"loglik_gap": gap, "loglik_gap_se": se}
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _line(row: dict) -> str:
    w, wo = row["with validation"], row["without"]
    change = wo["perplexity"] / w["perplexity"] - 1
    return (f"| {row['corpus']} | {row['K']} | {w['perplexity']:.1f} ({w['returned_state'] - 1}, {w['seconds']:.1f} s) "
            f"| {wo['perplexity']:.1f} ({wo['returned_state'] - 1}, {wo['seconds']:.1f} s"
            f"{', warned' if wo['warnings'] else ''}) | {change:+.2%} ± {row['loglik_gap_se']:.2%} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpora", default="reuters,movielens,nips-papers,nips17-bow")
    p.add_argument("--topics", default="20,50")
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--out", default="bench-runs")
    p.add_argument("--json", default="validation-route-results.json")
    args = p.parse_args(argv)
    print("| corpus | K | with validation (state kept, refine s) | without (sweeps, refine s) | without vs with |")
    print("|---|---|---|---|---|")
    rows = []
    with dask.config.set({"scheduler": "threads", "jsmf.progress": False}):
        for corpus in args.corpora.split(","):
            rows += run_corpus(corpus, [int(k) for k in args.topics.split(",")], Path(args.out), Path(args.data))
    Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
