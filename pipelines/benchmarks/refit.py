"""The estimator's refit measured: ``RectifiedAnchorWords(K).fit(X)`` with and without it, one scorer.

Each argument is a run root whose ``corpus/`` was ingested (``quality.py``
makes one per corpus, e.g. ``quality-nips-papers``). Its documents outside a
10% held-out split (by doc-id hash, as ``cooccur --heldout 0.1`` chooses)
are the count matrix ``X`` given to ``fit``, which leaves 5% of them out as
validation documents and holds none out; the held-out 10% are scored by
document completion (:func:`jsmf_dask.kernels.heldout.completion_log_likelihood`)
under each model's own ``α``. The refit is toggled through
:data:`jsmf_dask.pipeline.refine.REFIT_MAX_DOCS` (``auto`` refits below it),
so both fits are the estimator as users run it. Perplexities are
deterministic; seconds are one run each. Usage::

    python -m pipelines.benchmarks.refit bench-runs/quality-nips-papers bench-runs/quality-movielens --topics 20,50
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sps

import jsmf_dask.pipeline.refine as refine_module
from jsmf_dask import RectifiedAnchorWords
from jsmf_dask.io.parquet import list_blocks, read_block
from jsmf_dask.kernels.doc_split import DocumentSplit, doc_hashes
from jsmf_dask.kernels.heldout import completion_log_likelihood, split_tokens
from jsmf_dask.stages.infer import block_counts

HELDOUT = 0.1


def split_corpus(root: Path) -> tuple[sps.csr_array, sps.csr_array, sps.csr_array]:
    """The training count matrix, and the held-out documents' observed and scored halves."""
    n_words = pq.read_metadata(root / "corpus" / "vocab.parquet").num_rows
    counts, hashes = [], []
    for block in list_blocks(str(root / "corpus")):
        table = read_block(block, n_words)
        counts.append(block_counts(table, n_words))
        hashes.append(doc_hashes(table.column("doc_id")))
    X, h = sps.vstack(counts).tocsr(), np.concatenate(hashes)
    held, _ = DocumentSplit(HELDOUT, 0.0).masks(hashes=h)
    observed, scored = split_tokens(X[held], h[held])
    return X[~held], observed, scored


def measure(root: Path, k: int) -> dict:
    train, observed, scored = split_corpus(root)
    row = {"corpus": root.name, "K": k, "training_docs": train.shape[0], "heldout_docs": observed.shape[0]}
    for refit in (False, True):
        refine_module.REFIT_MAX_DOCS = train.shape[0] + 1 if refit else 0
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = RectifiedAnchorWords(n_components=k).fit(train)
        seconds = time.perf_counter() - t0
        loglik, n_tokens, _ = completion_log_likelihood(observed, scored, est.components_.T, est.doc_topic_prior_)
        key = "refit" if refit else "without"
        row[f"{key}_perplexity"] = float(np.exp(-loglik / n_tokens))
        row[f"{key}_seconds"] = seconds
    row["change"] = row["refit_perplexity"] / row["without_perplexity"] - 1
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("roots", nargs="+", type=Path)
    p.add_argument("--topics", default="20,50")
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args(argv)
    default = refine_module.REFIT_MAX_DOCS
    rows = []
    print("| corpus | K | training docs | without refit | refit | change | seconds, without → with |")
    print("|---|---|---|---|---|---|---|")
    try:
        for root in args.roots:
            for k in (int(x) for x in args.topics.split(",")):
                r = measure(root, k)
                rows.append(r)
                print(f"| {r['corpus']} | {k} | {r['training_docs']} | {r['without_perplexity']:.2f} | "
                      f"{r['refit_perplexity']:.2f} | {100 * r['change']:+.2f}% | "
                      f"{r['without_seconds']:.1f} → {r['refit_seconds']:.1f} |", flush=True)
    finally:
        refine_module.REFIT_MAX_DOCS = default
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
