"""How many AP/ENN cycles a fit needs when ``refine`` follows: held-out perplexity after refine against cycles.

For each corpus: ingest and ``cooccur`` (10% held out, 5% for validation,
by doc_id hash) once, then for each (rectifier, cycles) a fit and the default
refine from it (CVB0, α learned, η 0.05, stopped by the validation
documents), every model scored by ``evaluate``'s one scorer (document
completion on the held-out 10%). Printed per corpus: the spectral model's
and the refined model's held-out perplexity, the refined one's B error on
synthetic corpora, refine's sweeps, and the seconds of fit and refine (one
process, threads). The paper's 150 AP cycles are the reference row.

Usage::

    python -m pipelines.benchmarks.cycles --corpora nips-papers,reuters,movielens,lda-20k,baskets-20k
    python -m pipelines.benchmarks.cycles --corpora lda-100k --cycles ap:150,ap:20,ap:10
    python -m pipelines.benchmarks.cycles --cycles ap:20,ap:20:1e-3   # at most 20, stopped by fit's tol

A variant ``rectifier:cycles:tol`` stops the fit earlier when a cycle's relative change falls below ``tol``
(``fit(tol=...)``); the table then says how many cycles ran.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pipelines.benchmarks.quality import BASKETS, REPO, SYNTHETIC, _ingest_kwargs, ingest_corpus

DEFAULT_CYCLES = "ap:150,ap:50,ap:20,ap:10,ap:5,ap:2,enn:150,enn:20"


def run_corpus(name: str, k: int, variants: list[tuple[str, int, float | None]], args) -> list[dict]:
    import dask

    from jsmf_dask import cooccur, evaluate, fit, open_model, refine
    from pipelines.benchmarks.fit import matched_l1

    root = str(Path(args.out) / f"cycles-{name}")
    rows = []
    with dask.config.set({"scheduler": "threads", "jsmf.progress": False}):
        truth = ingest_corpus(name, root, Path(args.out), Path(args.data))
        cooccur(root, heldout=0.1, validation=0.05, overwrite=True)
        for rectifier, cycles, tol in variants:
            label = f"k{k}-{rectifier}{cycles}" + (f"-tol{tol:g}" if tol is not None else "")
            t0 = time.perf_counter()
            fitted = fit(root, n_topics=k, rectifier=rectifier, iterations=cycles, tol=tol, name=label,
                         overwrite=True)
            fit_seconds = time.perf_counter() - t0
            t0 = time.perf_counter()
            refined = refine(root, model=fitted.name, name=f"{label}-cvb0", method="cvb0", overwrite=True)
            refine_seconds = time.perf_counter() - t0
            scores = evaluate(root, models=[fitted.name, refined.name])["models"]
            row = {"corpus": name, "K": k, "rectifier": rectifier, "cycles": cycles, "tol": tol,
                   "cycles_run": int(fitted.n_iter),
                   "spectral": scores[fitted.name]["heldout"].get("perplexity"),
                   "refined": scores[refined.name]["heldout"].get("perplexity"),
                   "sweeps": refined.n_iter, "fit_seconds": fit_seconds, "refine_seconds": refine_seconds}
            if truth is not None:
                row["B_l1"] = matched_l1(open_model(root, refined.name).arrays["B"], truth)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def _table(rows: list[dict]) -> str:
    ref = next((r for r in rows if r["rectifier"] == "ap" and r["cycles"] == 150 and r.get("tol") is None), rows[0])
    cols = ["K", "rectifier", "cycles", "tol", "cycles run", "spectral", "refined", f"vs {ref['rectifier']} "
            f"{ref['cycles']}", "B_l1", "sweeps", "fit_seconds", "refine_seconds"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        vals = [r["K"], r["rectifier"], r["cycles"], r.get("tol"), r.get("cycles_run"), r["spectral"], r["refined"],
                f"{r['refined'] / ref['refined'] - 1:+.2%}", r.get("B_l1"), r["sweeps"], r["fit_seconds"],
                r["refine_seconds"]]
        out.append("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else ("" if v is None else str(v))
                                     for v in vals) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpora", default="nips-papers,reuters,nips17-bow,movielens,lda-20k,baskets-20k")
    p.add_argument("--topics", type=int, default=20, help="K of the real corpora (synthetic ones use their own)")
    p.add_argument("--cycles", default=DEFAULT_CYCLES, help="rectifier:cycles[:tol] variants")
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--out", default="bench-runs")
    args = p.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    variants = [(parts[0], int(parts[1]), float(parts[2]) if len(parts) > 2 else None)
                for parts in (v.split(":") for v in args.cycles.split(","))]
    results = []
    for name in args.corpora.split(","):
        if name not in SYNTHETIC and name not in BASKETS and _ingest_kwargs(name, Path(args.data)) is None:
            print(f"{name}: not found under {args.data}; skipped", file=sys.stderr)
            continue
        k = SYNTHETIC[name][2] if name in SYNTHETIC else BASKETS[name][2] if name in BASKETS else args.topics
        rows = run_corpus(name, k, variants, args)
        results += rows
        print(f"\n{name}\n\n{_table(rows)}\n", flush=True)
        (Path(args.out) / "cycles-results.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
