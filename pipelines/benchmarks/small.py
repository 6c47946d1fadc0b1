"""Small and medium corpora end to end against Gibbs sampling: per stage, per route, per engine.

For each corpus, the README's four commands (``ingest --vocab-size 5000``,
``cooccur --validation 0.05``, ``fit --topics K --iterations C --anchor-words auto`` (those of a fit that refine follows:
:func:`jsmf_dask.parameters.refined_fit_iterations`, :func:`~jsmf_dask.parameters.auto_anchor_words`),
``refine``), each a fresh ``jsmf`` process as a user types them; the
one-command route ``jsmf topics`` (one process); and the Python API in this
process (``connect()`` around the four functions). Every route runs on the
engine the work's size chooses unless ``--engines`` asks for more: each
engine named there (``threads``, ``local``) also runs the Python API route,
which prints the crossover of the two engines stage by stage. tomotopy's
Gibbs sampler (1000 iterations, every core) is timed **in the same run** on
the same curated corpus (the ingested one, validation documents left out, as
ours trains). Seconds are medians of ``--runs`` (Gibbs's of ``--gibbs-runs``, by
default as many: at 100k documents one Gibbs run takes about 13 minutes); peak memory is the largest
resident set of any one process of the route (the driver or a worker),
sampled every 50 ms.

Corpora: ``reuters`` (``tests/data``, UCI bag of words), ``nips-papers``
(``pipelines/data``, raw text: tokenising is part of the route),
``movielens`` (``--data``, ratings as documents, K 20), and plain-LDA synthetic
corpora written as UCI files: ``lda-3k``, ``lda-20k``, ``lda-100k``
(documents, N = 5,000, K 20 / 20 / 50, 200 tokens a document on average).

Usage::

    python -m pipelines.benchmarks.small --corpora reuters,nips-papers,lda-3k,lda-20k --runs 3
    python -m pipelines.benchmarks.small --corpora lda-20k,lda-100k --engines threads,local --runs 3
    python -m pipelines.benchmarks.small --corpora lda-100k --routes topics --runs 3 --gibbs-runs 1
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from jsmf_dask.parameters import refined_fit_iterations
from pipelines.benchmarks.memory import PeakMemory
from pipelines.benchmarks.quality import REPO

#: name → (documents, vocabulary, K) of the synthetic corpora.
SYNTHETIC = {"lda-3k": (3000, 5000, 20), "lda-20k": (20000, 5000, 20), "lda-100k": (100000, 5000, 50)}
STAGES = ("ingest", "cooccur", "fit", "refine")


def _inputs(name: str, out: Path, data: Path) -> tuple[list[str], list[str], int] | None:
    """(inputs, extra ingest flags, K) of a corpus, writing synthetic ones as UCI files first."""
    if name == "reuters":
        return [str(REPO / "tests" / "data" / "reuters395" / "docword.reuters395.txt.gz")], [], 20
    if name == "nips-papers":
        return [str(REPO / "pipelines" / "data" / "nips12-raw" / "nipstxt.tar.xz")], ["--encoding", "latin-1"], 20
    if name == "movielens":
        path = data / "movielens-small" / "ratings.csv"
        return ([str(path)], ["--format", "ratings"], 20) if path.exists() else None
    if name in SYNTHETIC:
        m, n, k = SYNTHETIC[name]
        path = out / f"{name}" / f"docword.{name}.txt.gz"
        if not path.exists():
            _write_lda(path, m, n, k)
        return [str(path)], [], k
    return None


def _write_lda(path: Path, m: int, n: int, k: int) -> None:
    """A plain-LDA corpus (topics from a Dirichlet(0.05) over the words, α 0.1; no anchor words) as UCI files."""
    from jsmf_dask.kernels.synthetic import sample_corpus

    rng = np.random.default_rng(1)
    B = rng.dirichlet(np.full(n, 0.05), size=k).T
    corpus = sample_corpus(B, np.full(k, 0.1), m, 200, rng)
    path.parent.mkdir(parents=True, exist_ok=True)
    docs = np.repeat(np.arange(m), np.diff(corpus.offsets))
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write(f"{m}\n{n}\n{len(corpus.word_ids)}\n")
        f.writelines(f"{d + 1} {w + 1} {c}\n" for d, w, c in zip(docs, corpus.word_ids, corpus.counts, strict=True))
    (path.parent / f"vocab.{path.name.split('.')[1]}.txt").write_text("".join(f"w{i:05d}\n" for i in range(n)))


def _jsmf(argv: list[str], env: dict) -> tuple[float, int, str]:
    """Run one ``jsmf`` command as a user would: (seconds, peak bytes of one process, stderr)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "jsmf_dask.cli", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    with PeakMemory(root=proc.pid) as peak:
        _, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"jsmf {' '.join(argv)} failed:\n{err}")
    return time.perf_counter() - t0, peak.largest, err


def _engine_line(err: str) -> str:
    return next((line.split(" (")[0].removeprefix("engine: ") for line in err.splitlines()
                 if line.startswith("engine: ")), "")


def four_commands(root: str, inputs, flags, k: int, env: dict, scheduler: list[str]) -> dict:
    steps = {"ingest": ["ingest", root, *inputs, "--vocab-size", "5000", *flags, "--overwrite"],
             "cooccur": ["cooccur", root, "--validation", "0.05", "--overwrite"],
             "fit": ["fit", root, "--topics", str(k), "--iterations", str(refined_fit_iterations(k)),
                     "--anchor-words", "auto", "--overwrite"],
             "refine": ["refine", root, "--model", f"k{k}-ap", "--overwrite"]}
    row: dict = {"peak": 0, "engine": set()}
    for stage, argv in steps.items():
        seconds, peak, err = _jsmf([*argv, *scheduler], env)
        row[stage] = seconds
        row["peak"] = max(row["peak"], peak)
        row["engine"].add(_engine_line(err))
    row["engine"] = "/".join(sorted(e for e in row["engine"] if e)) or (scheduler[-1] if scheduler else "")
    return row


def one_command(root: str, inputs, flags, k: int, env: dict, scheduler: list[str]) -> dict:
    shutil.rmtree(root, ignore_errors=True)
    seconds, peak, err = _jsmf(["topics", *inputs, "--topics", str(k), "--out", root, *flags, *scheduler], env)
    ran = {line.split("]")[0].lstrip("[").split("-")[0]: float(line.split(" in ")[1].split()[0])
           for line in err.splitlines() if line.startswith("[") and " ran in " in line}
    return {**ran, "total": seconds, "peak": peak, "engine": _engine_line(err) or (scheduler[-1] if scheduler else "")}


def python_api(root: str, inputs, flags, k: int, engine: str | None) -> dict:
    import dask

    from jsmf_dask import cooccur, fit, ingest, refine
    from jsmf_dask.cluster import connect

    kwargs = {"vocab_size": 5000}
    for flag, value in zip(flags[::2], flags[1::2], strict=True):
        kwargs[flag.removeprefix("--")] = value
    lines: list[str] = []
    row: dict = {}
    t_all = time.perf_counter()
    with PeakMemory() as peak, dask.config.set({"jsmf.progress": False}), \
            connect(engine, dashboard=False, on_engine=lines.append):
        for stage, call in (("ingest", lambda: ingest(root, inputs, overwrite=True, **kwargs)),
                            ("cooccur", lambda: cooccur(root, validation=0.05, overwrite=True)),
                            ("fit", lambda: fit(root, n_topics=k, iterations=refined_fit_iterations(k),
                                                anchor_words="auto", overwrite=True)),
                            ("refine", lambda: refine(root, model=f"k{k}-ap", overwrite=True))):
            t0 = time.perf_counter()
            call()
            row[stage] = time.perf_counter() - t0
    row["total"] = time.perf_counter() - t_all  # the cluster's start and stop included
    row["peak"] = peak.largest
    row["engine"] = engine or (lines[0].split(" (")[0].removeprefix("engine: ") if lines else "")
    return row


def gibbs(root: str, k: int) -> float:
    from jsmf_dask.pipeline.gibbs import fit_gibbs

    t0 = time.perf_counter()
    fit_gibbs(root, n_topics=k, iterations=1000, name=f"k{k}-gibbs", overwrite=True)
    return time.perf_counter() - t0


def _median_row(rows: list[dict]) -> dict:
    out = dict(rows[0])
    for key, value in rows[0].items():
        if isinstance(value, float | int) and key != "peak":
            out[key] = statistics.median(r[key] for r in rows)
    out["peak"] = max(r["peak"] for r in rows)
    if "total" not in out:
        out["total"] = sum(out[s] for s in STAGES)
    return out


def _table(name: str, rows: list[dict], gibbs_seconds: float | None) -> str:
    cols = ["route", "engine", *STAGES, "total", "peak GB (one process)", "Gibbs / ours"]
    lines = [f"{name}" + (f" — Gibbs {gibbs_seconds:.1f} s" if gibbs_seconds else ""), "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        vals = [r["route"], r["engine"], *(f"{r[s]:.2f}" if s in r else "" for s in STAGES), f"{r['total']:.2f}",
                f"{r['peak'] / 2**30:.2f}", f"{gibbs_seconds / r['total']:.1f}x" if gibbs_seconds else ""]
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpora", default="reuters,nips-papers,movielens,lda-3k,lda-20k")
    p.add_argument("--routes", default="four-commands,topics,api")
    p.add_argument("--engines", default="", help="also run the Python API on these engines (threads,local)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--gibbs-runs", type=int, default=None, help="Gibbs runs per corpus (default: --runs)")
    p.add_argument("--no-gibbs", action="store_true")
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--out", default="bench-runs")
    args = p.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    results = []
    for name in args.corpora.split(","):
        spec = _inputs(name, out, Path(args.data))
        if spec is None:
            print(f"{name}: not found under {args.data}; skipped", file=sys.stderr)
            continue
        inputs, flags, k = spec
        runs: dict[tuple[str, str], list[dict]] = {}
        for run in range(args.runs):
            for route in args.routes.split(","):
                root = str(out / f"small-{name}-{route}")
                row = four_commands(root, inputs, flags, k, env, []) if route == "four-commands" else \
                    one_command(root, inputs, flags, k, env, []) if route == "topics" else \
                    python_api(root, inputs, flags, k, None)
                runs.setdefault((route, "auto"), []).append(row)
            for engine in filter(None, args.engines.split(",")):
                row = python_api(str(out / f"small-{name}-{engine}"), inputs, flags, k, engine)
                runs.setdefault(("api", engine), []).append(row)
            print(f"{name}: run {run + 1} done", file=sys.stderr, flush=True)
        rows = [{"route": route, **_median_row(r)} | ({"engine": f"{engine} (forced)"} if engine != "auto" else {})
                for (route, engine), r in runs.items()]
        # Gibbs on the documents a route just ingested (every route reads the same ones), a median of --gibbs-runs
        gibbs_root = str(out / f"small-{name}-{args.routes.split(',')[-1]}")
        gibbs_runs = args.runs if args.gibbs_runs is None else args.gibbs_runs
        seconds = None if args.no_gibbs else statistics.median(gibbs(gibbs_root, k) for _ in range(gibbs_runs))
        results.append({"corpus": name, "K": k, "gibbs_seconds": seconds, "rows": rows})
        print("\n" + _table(name, rows, seconds) + "\n", flush=True)
        (out / "small-results.json").write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
