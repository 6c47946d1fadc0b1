"""Check that a change leaves every model identical: fit and refine the shipped corpora, save or compare.

Refactors promise "no behaviour change". This script makes the promise
checkable: ``--save DIR`` runs the pipeline on the corpora shipped in the
repository (the NIPS papers and Reuters) through every rectification route
(AP in one task and tiled, DC, no rectification, ENN on the dense and on the
compressed store), a CVB0 refinement and the estimator on a count matrix, and
writes each model's arrays to ``DIR``; ``--check DIR`` runs the same and
compares every array with the saved one (max absolute difference at most
``--tol``, 1e-12 by default), printing a table and exiting 1 on any difference.

Usage::

    python -m pipelines.benchmarks.models_unchanged --save /tmp/before     # on the old code
    python -m pipelines.benchmarks.models_unchanged --check /tmp/before    # on the new code
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
CORPORA = {
    "nips": (REPO / "pipelines" / "data" / "nips12-raw" / "nipstxt.tar.xz", {"encoding": "latin-1"}),
    "reuters": (REPO / "tests" / "data" / "reuters395" / "docword.reuters395.txt.gz", {}),
}
#: (model name, fit keyword arguments) on the dense store.
FITS = [
    ("ap", {"rectifier": "ap", "path": "in-task", "iterations": 30}),
    ("ap-tiled", {"rectifier": "ap", "path": "tiled", "iterations": 5}),
    ("dc", {"rectifier": "dc", "path": "in-task"}),
    ("none", {"rectifier": "none", "path": "in-task"}),
    ("enn", {"rectifier": "enn", "iterations": 20}),
]
ARRAYS = ("B", "A", "A_least_squares", "anchors", "alpha")


def run(out: Path) -> dict[str, dict[str, np.ndarray]]:
    """Every model of every corpus: ``{"<corpus>/<model>": {array: values}}``."""
    import dask
    import scipy.sparse as sps

    from jsmf_dask import RectifiedAnchorWords, cooccur, fit, ingest, open_model, refine

    models: dict[str, dict[str, np.ndarray]] = {}
    with dask.config.set({"scheduler": "threads", "jsmf.progress": False}):
        for corpus, (path, options) in CORPORA.items():
            root = str(out / corpus)
            ingest(root, [str(path)], vocab_size=3000, **options)
            cooccur(root, heldout=0.1, validation=0.05)
            for name, kwargs in FITS:
                fit(root, n_topics=15, name=name, **kwargs)
            refine(root, model="ap", name="ap-cvb0", method="cvb0", sweeps=4, tol=1e-4)
            compressed = str(out / f"{corpus}-rank")
            ingest(compressed, [str(path)], vocab_size=3000, **options)
            cooccur(compressed, rank=30)
            fit(compressed, n_topics=15, name="enn", iterations=20)
            for root_, name in [(root, n) for n, _ in FITS] + [(root, "ap-cvb0"), (compressed, "enn")]:
                key = f"{corpus}{'-rank' if root_ == compressed else ''}/{name}"
                arrays = open_model(root_, name).arrays
                models[key] = {a: np.asarray(arrays[a]) for a in ARRAYS if a in arrays}
            rng = np.random.default_rng(0)
            X = sps.random(400, 300, density=0.05, random_state=rng, data_rvs=lambda n: rng.integers(1, 5, n))
            est = RectifiedAnchorWords(n_components=8, min_anchor_df=0, refine=None).fit_cooccurrence(*_cooccurrence(X))
            models[f"{corpus}/estimator"] = {"B": est.components_.T, "A": est.topic_topic_}
    return models


def _cooccurrence(X) -> tuple[np.ndarray, np.ndarray]:
    """The paper's C of a small count matrix (dense, for the estimator) and the words' document frequencies."""
    X = np.asarray(X.todense(), dtype=np.float64)
    X = X[X.sum(axis=1) >= 2]
    n = X.sum(axis=1, keepdims=True)
    H = X / np.sqrt(n * (n - 1))
    C = H.T @ H - np.diag((X / (n * (n - 1))).sum(axis=0))
    return C / C.sum(), (X > 0).sum(axis=0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", metavar="DIR")
    group.add_argument("--check", metavar="DIR")
    p.add_argument("--tol", type=float, default=1e-12)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        models = run(Path(work))
    if args.save:
        Path(args.save).mkdir(parents=True, exist_ok=True)
        for key, arrays in models.items():
            np.savez(Path(args.save) / (key.replace("/", "__") + ".npz"), **arrays)
        print(f"saved {len(models)} models to {args.save}")
        return 0
    worst = 0.0
    print("| model | array | max abs difference |\n|---|---|---|")
    for key, arrays in models.items():
        saved = np.load(Path(args.check) / (key.replace("/", "__") + ".npz"))
        for name, values in arrays.items():
            diff = float(np.max(np.abs(values - saved[name]), initial=0.0)) if values.shape == saved[name].shape \
                else np.inf
            worst = max(worst, diff)
            print(f"| {key} | {name} | {diff:.3g} |")
    print(f"worst {worst:.3g} (tolerance {args.tol:g})")
    return 0 if worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
