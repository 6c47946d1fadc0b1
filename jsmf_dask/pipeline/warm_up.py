"""Compile the package's numba kernels into numba's cache once, right after installing.

The compiled loops (co-occurrence tiles, the simplex solver, CVB0, the
sampled passes, the chain, the variational E-step, the fold-ins) are compiled the first time they run and cached on disk;
that first compilation takes about 7 s, which a fresh install's first command
would otherwise pay (measured: ``jsmf topics`` on a 3,000-document corpus
11.3 s cold against 4.4 s once cached). ``python -m jsmf_dask.pipeline.warm_up``
runs every stage that uses a kernel on a tiny synthetic corpus in a temporary
directory, so each kernel is compiled for the very types the stages pass it;
``make`` runs it after installing.
"""

from __future__ import annotations

import tempfile
import time
import warnings

import dask

__all__ = ["warm_up"]


def warm_up() -> float:
    """Run synth → cooccur → fit → refine (CVB0, sampled, VB, and sampled from a chain) → evaluate on a tiny corpus;
    return the seconds taken.

    Nothing is written outside a temporary directory (numba's cache aside).
    """
    from jsmf_dask.pipeline.cooccur import cooccur
    from jsmf_dask.pipeline.evaluate import evaluate
    from jsmf_dask.pipeline.fit import fit
    from jsmf_dask.pipeline.refine import refine
    from jsmf_dask.pipeline.synth import synth

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jsmf-warm-up-") as root, warnings.catch_warnings(), \
            dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        warnings.simplefilter("ignore")  # a tiny corpus's convergence warnings say nothing here
        synth(root, n_docs=200, n_words=60, n_topics=3, doc_length=30, seed=0)
        cooccur(root, heldout=0.1, validation=0.1)
        fit(root, n_topics=3, iterations=2, name="ap")
        for method in ("cvb0", "sampled", "vb"):
            refine(root, model="ap", method=method, sweeps=2, name=f"ap-{method}")
        refine(root, model="ap", method="sampled", start="chain", sweeps=2, name="ap-chain")  # the chain's loop
        evaluate(root)
    return time.perf_counter() - started


if __name__ == "__main__":  # pragma: no cover - exercised by the Makefile and a subprocess test
    print(f"jsmf_dask: kernels compiled into numba's cache in {warm_up():.1f} s")
