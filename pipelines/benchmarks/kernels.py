"""Two compiled kernels of ``fit`` against plain references, on real corpora.

- ``recover``: the simplex least squares of every word (``kernels.recover.recover_weights``, the compiled
  active set with its Cholesky updates) on the NIPS papers' C (5,000 words) after 5 AP cycles, at each K of
  ``--topics``, against exponentiated gradient (``solver='eg'``) and against the Python active set
  (``simplex_least_squares``, word by word: timed on ``--sample`` words and scaled to all of them). The
  objectives summed over the words say how close each gets.
- ``mirror``: ``kernels.upper_sparse.symmetric_from_upper`` on the stored clip of a 20-topic AP fit of MovieLens
  with every movie (9,724 items; from ``--data``, skipped when absent), against scipy's ``U + Uᵀ`` (the code
  before session 48); the two matrices compared entry by entry.

Medians of ``--runs`` in one process (the Python active set once). Usage::

    python -m pipelines.benchmarks.kernels --topics 50,100 --runs 3
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from pipelines.benchmarks.estimator import timed
from pipelines.benchmarks.quality import REPO

NIPS = REPO / "pipelines" / "data" / "nips12-raw" / "nipstxt.tar.xz"


def recover_rows(out: Path, topics: list[int], runs: int, sample: int) -> list[dict]:
    import dask

    from jsmf_dask import cooccur, ingest, open_cooccurrence
    from jsmf_dask.kernels.factorize import find_anchors, rectify
    from jsmf_dask.kernels.recover import recover_weights, simplex_least_squares

    root = str(out / "kernels-nips-papers")
    with dask.config.set({"scheduler": "threads", "jsmf.progress": False}):
        ingest(root, [str(NIPS)], vocab_size=5000, encoding="latin-1", overwrite=True)
        cooccur(root, overwrite=True)
    C = np.asarray(open_cooccurrence(f"{root}/cooc.zarr").C[:], dtype=np.float64)
    rows = []
    for k in topics:
        Cr = rectify(C, k, rectifier="ap", iterations=5).C
        anchors, _ = find_anchors(Cr, k)
        p = Cr.sum(axis=1)
        Cbar = Cr / np.where(p > 0, p, 1.0)[:, None]
        S = Cbar[anchors]
        G, b, norms2 = S @ S.T, Cbar @ S.T, np.einsum("ij,ij->i", Cbar, Cbar)
        recover_weights(G, b[:8], norms2[:8])  # compiled before it is timed
        ours, (Y, exact, _) = timed(lambda: recover_weights(G, b, norms2), runs)
        eg_seconds, (_, eg, eg_short) = timed(lambda: recover_weights(G, b, norms2, solver="eg"), runs)
        picked = np.random.default_rng(0).choice(len(b), size=min(sample, len(b)), replace=False)
        python, _ = timed(lambda: [simplex_least_squares(G, b[i]) for i in picked], 1)
        row = {"case": "recover", "N": len(b), "K": k, "free_topics": float((Y > 0).sum(axis=1).mean()),
               "seconds": ours, "eg_seconds": eg_seconds, "eg_capped": eg_short,
               "eg_objective_excess": float(eg.sum() / exact.sum() - 1),
               "python_seconds": python * len(b) / len(picked)}
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def mirror_rows(out: Path, data: Path, runs: int) -> list[dict]:
    import dask

    from jsmf_dask import cooccur, fit, ingest, open_model
    from jsmf_dask.kernels.upper_sparse import UpperSparse, symmetric_from_upper

    ratings = data / "movielens-small" / "ratings.csv"
    if not ratings.exists():
        print(f"{ratings}: not found; the mirror case skipped", file=sys.stderr)
        return []
    root = str(out / "kernels-movielens-all")
    with dask.config.set({"scheduler": "threads", "jsmf.progress": False}):
        ingest(root, [str(ratings)], format="ratings", overwrite=True)
        cooccur(root, overwrite=True)
        fit(root, n_topics=20, iterations=20, name="k20-ap", overwrite=True)
    model = open_model(root, "k20-ap")
    upper = [model.group["correction"][key][:] for key in ("rows", "cols", "values")]
    i, j, v = upper
    n = model.arrays["B"].shape[0]

    def scipy_mirror():
        U = UpperSparse.from_upper(i, j, np.where(i == j, 0.5 * v, v), n).U
        return (U + U.T).tocsr()

    symmetric_from_upper(i[:8], j[:8], v[:8], n)  # compiled before it is timed
    seconds, ours = timed(lambda: symmetric_from_upper(i, j, v, n), runs)
    reference_seconds, reference = timed(scipy_mirror, runs)
    same = bool(np.array_equal(ours.indptr, reference.indptr) and np.array_equal(ours.indices, reference.indices)
                and np.array_equal(ours.data, reference.data))
    row = {"case": "mirror", "N": n, "K": 20, "entries": int(i.size),
           "upper_share": float(i.size / (n * (n + 1) / 2)), "seconds": seconds,
           "scipy_seconds": reference_seconds, "same_matrix": same}
    print(json.dumps(row), file=sys.stderr, flush=True)
    return [row]


def _table(rows: list[dict]) -> str:
    lines = ["| case | N | K | size | ours s | reference | reference s | reference / ours |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["case"] == "recover":
            size = f"{r['free_topics']:.1f} free topics a word"
            refs = [("Python active set (scaled)", r["python_seconds"]),
                    (f"EG (capped on {r['eg_capped']}; objective +{100 * r['eg_objective_excess']:.2f}%)",
                     r["eg_seconds"])]
        else:
            size = f"{r['entries']:,} entries ({100 * r['upper_share']:.0f}% of the upper triangle)"
            refs = [(f"scipy U + Uᵀ (the same matrix: {r['same_matrix']})", r["scipy_seconds"])]
        for name, seconds in refs:
            lines.append(f"| {r['case']} | {r['N']:,} | {r['K']} | {size} | {r['seconds']:.2f} | {name} | "
                         f"{seconds:.2f} | {seconds / r['seconds']:.1f}× |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topics", default="50,100")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--sample", type=int, default=200, help="words the Python active set is timed on")
    p.add_argument("--cases", default="recover,mirror")
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--out", default="bench-runs")
    p.add_argument("--json", help="write the rows here too")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = args.cases.split(",")
    rows = []
    if "recover" in cases:
        rows += recover_rows(out, [int(k) for k in args.topics.split(",")], args.runs, args.sample)
    if "mirror" in cases:
        rows += mirror_rows(out, Path(args.data), args.runs)
    print(_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
