"""Topic quality against Gibbs sampling on every corpus: held-out perplexity, B error, metrics and seconds.

For each corpus and K, on one run root: ``cooccur`` with 10% of the documents
held out and 5% kept for validation (by doc_id hash), AP (the cycles the
default route runs before refinement: 20 up to K = 20, 50 above), then from AP:

* ``vb``: the previous default refine (variational Bayes, 8 sweeps, α 0.1, η 0.01);
* ``cvb0-fixed``: CVB0 with fixed priors (α 0.1, η 0.05), up to 50 sweeps, no validation stop;
* ``auto``: the default refine (``method='auto'``, since session 35): ``cvb0`` below, and on a million
  training tokens or more of short documents (150 tokens or fewer on average) ``sampled`` beside it, the one
  the validation documents score lower kept;
* ``both-starts``: the default with every run from the spectral model and from a chain's topics
  (``start='both'``, session 41);
* ``sweeps-50``: the default until session 42, 50 sweeps at most where the validation documents stop it too
  (``sweeps='auto'`` is 100 there);
* ``cvb0``: the default refine until session 35 (CVB0, α learned, η 0.05, stopped by the validation documents;
  below 2,500 training documents they also choose between no drawn sweeps and 20);
* ``cvb0-a01``: the same with a fixed symmetric α 0.1;
* ``cvb0-learned``: CVB0 with α and η learned, stopped by the validation documents;
* ``cvb0-soft``: ``cvb0`` without drawn sweeps (``drawn_sweeps=0``: the default until session 21);
* ``cvb0-drawn``: ``cvb0`` with 20 drawn sweeps first, always (``drawn_sweeps=20``);
* ``cvb0-eta-chosen``: ``cvb0`` with η chosen among 0.01 and 0.05 by the validation documents;
* ``cvb0-drawn-eta-chosen``: 20 drawn sweeps always, η chosen;
* ``sampled``: ``cvb0``'s priors and stops with ``method='sampled'`` (each document's topics drawn by Gibbs
  sampling under the sweep's topics);
* ``cvb0-100``: CVB0 with the default's priors, 100 sweeps without any stop (``validation=0, tol=None``): what
  the default's stops leave (session 44);

and, from the topics of Gibbs's first chain (seed 0; with ``gibbs`` among the peers):

* ``cvb0-from-gibbs``: CVB0 with the default's priors, 50 sweeps (or until the counts settle) without the
  validation stop: the chain trained on the validation documents, so their scores would only say that refine
  forgets them (timed as the chain plus the refine);
* ``cvb0-from-gibbs-3``: the same, 3 sweeps. Session 44: between the two, held-out perplexity falls on text
  while the topics lose the chain's specificity;

and, on every document not held out (the validation ones too: the default
refine trains on them as well, by its refit or beyond its scored sample):
tomotopy's collapsed Gibbs sampler (1000 iterations, its α 0.1, η 0.01; with
``--gibbs-seeds S``, S chains, the one of median perplexity the reference) and
scikit-learn's batch ``LatentDirichletAllocation`` (its defaults). Every model
is scored by ``evaluate``'s one scorer (document completion on the held-out
documents: θ of each document's observed half by the VB fold-in and, since
session 37, by the sampled one, the exact posterior mean; both are reported, each
against Gibbs's chain), with the paper's metrics; on ``jsmf synth --topics-from dirichlet``
corpora also the B error (mean L1 after matching). Ours is timed stage by
stage (end to end = ingest + cooccur + fit + refine), in one process on
threads (the embedded default for small work would add a cluster start).

Corpora: the NIPS papers shipped in ``pipelines/data``, Reuters from
``tests/data``, and, from ``--data`` (default ``../shared/data``) when present,
the NIPS 1987–2003 bag of words and MovieLens ratings as documents; plain-LDA
synthetic corpora ``lda-20k`` (M 20k, N 5k, K 20) and ``lda-100k`` (M 100k, N 5k, K 50) of 200 tokens a
document, ``lda-short-50k`` (M 50k, N 5k, K 20) of 40, and
``baskets-20k``: 20k baskets of 2–10 items drawn from a known LDA model (300 items, K 10, α 0.1,
topics from a Dirichlet(0.05)), ingested as ``--format baskets``; ``nips-chunks``: the shipped NIPS papers
cut into documents of 600 words (a paper's last piece kept from 200 words; 9,118 documents), a real text
corpus between the shipped ones' sizes and 10,000 documents; ``nips-chunks-300``: the same cut into 300 words
(last piece from 100 words; 17,954 documents), real text above 10,000 documents, where the default route fits
every word; ``nips-chunks-100-3k``, ``-8k``, ``-15k``, ``-25k``, ``nips-chunks-300-3k``, ``-12k``: a sample
(seed 0) of that many documents of a cut, for where ``method='sampled'`` starts to pay. A path to a file
(text, JSONL, a UCI docword, ratings… as ``jsmf ingest`` reads it, ``--vocab-size 5000``) is a corpus of one's
own, named after the file; ``manpages``, ``docstrings`` and ``changelogs`` are this machine's own text
(:mod:`pipelines.benchmarks.machine_corpora`).
Writes ``quality-results.json``, a Markdown table per corpus and a PNG per
corpus (held-out perplexity against seconds) into ``--out``.

Usage::

    python -m pipelines.benchmarks.quality --corpora nips-papers,reuters --topics 20,50
    python -m pipelines.benchmarks.quality --corpora lda-20k --runs 3
    python -m pipelines.benchmarks.quality --corpora path/to/my-corpus.jsonl --topics 20 --runs 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from pipelines.benchmarks.machine_corpora import CORPORA as MACHINE_CORPORA

REPO = Path(__file__).resolve().parents[2]
SHIPPED = {"nips-papers": REPO / "pipelines" / "data" / "nips12-raw" / "nipstxt.tar.xz",
           "reuters": REPO / "tests" / "data" / "reuters395" / "docword.reuters395.txt.gz"}
#: name → (documents, words, K, mean document length) of plain-LDA corpora (topics Dirichlet(0.05), α 0.1).
SYNTHETIC = {"lda-20k": (20000, 5000, 20, 200), "lda-100k": (100000, 5000, 50, 200),
             "lda-short-50k": (50000, 5000, 20, 40)}
#: name → (words per document, shortest last piece, documents kept: a sample, or None for all) of the NIPS
#: papers cut into pieces.
CHUNKS = {"nips-chunks": (600, 200, None), "nips-chunks-300": (300, 100, None), "nips-chunks-100": (100, 30, None),
          "nips-chunks-100-3k": (100, 30, 3000), "nips-chunks-100-8k": (100, 30, 8000),
          "nips-chunks-100-15k": (100, 30, 15000), "nips-chunks-100-25k": (100, 30, 25000),
          "nips-chunks-300-3k": (300, 100, 3000), "nips-chunks-300-12k": (300, 100, 12000)}
#: name (the file's stem) → path of the corpora given as files in ``--corpora`` (filled by :func:`main`).
FILES: dict[str, str] = {}
#: Short documents from a known model: (baskets, items, K, shortest, longest basket).
BASKETS = {"baskets-20k": (20000, 300, 10, 2, 10)}
REFINES = {
    "vb": {"method": "vb", "sweeps": 8, "alpha": 0.1, "eta": 0.01, "validation": 0},
    "cvb0-fixed": {"method": "cvb0", "alpha": 0.1, "eta": 0.05, "validation": 0},
    "cvb0": {"method": "cvb0"},  # the default until session 35
    "auto": {},  # the default: cvb0, and sampled too on short documents (the validation documents choose)
    "both-starts": {"start": "both"},  # every run from the spectral model and from a chain's topics
    "sweeps-50": {"sweeps": 50},  # the default until session 42: 50 sweeps at most, with validation documents too
    "cvb0-a01": {"method": "cvb0", "alpha": 0.1},
    "cvb0-learned": {"method": "cvb0", "alpha": "auto", "eta": "auto"},
    "cvb0-soft": {"method": "cvb0", "drawn_sweeps": 0},
    "cvb0-drawn": {"method": "cvb0", "drawn_sweeps": 20},
    "cvb0-eta-chosen": {"method": "cvb0", "eta": [0.01, 0.05]},
    "cvb0-drawn-eta-chosen": {"method": "cvb0", "drawn_sweeps": 20, "eta": [0.01, 0.05]},
    "sampled": {"method": "sampled"},
    "cvb0-100": {"method": "cvb0", "sweeps": 100, "validation": 0, "tol": None},
}
#: Refines started from Gibbs's first chain (``k<K>-gibbs``) instead of AP.
FROM_GIBBS = {"cvb0-from-gibbs": {"method": "cvb0", "validation": 0},
              "cvb0-from-gibbs-3": {"method": "cvb0", "validation": 0, "sweeps": 3}}


def _ingest_kwargs(name: str, data: Path) -> dict | None:
    if name in SHIPPED:
        kwargs = {"inputs": [str(SHIPPED[name])], "vocab_size": 5000}
        return kwargs | ({"encoding": "latin-1"} if name == "nips-papers" else {})
    if name == "nips17-bow" and (data / "nips17" / "docword.nips17.txt.gz").exists():
        return {"inputs": [str(data / "nips17" / "docword.nips17.txt.gz")], "vocab_size": 5000}
    if name in FILES:  # a corpus of the user's: `jsmf ingest`'s defaults (the format from the file's name)
        return {"inputs": [FILES[name]], "vocab_size": 5000}
    if name == "movielens" and (data / "movielens-small" / "ratings.csv").exists():
        # the README's route (--vocab-size 5000). With all 9,724 films the in-process fit of a threads run once took
        # 24 GB and was OOM-killed; in session 48 `jsmf fit` of them (K 20, 20 cycles) peaked at 5.9 GB in 39 s
        return {"inputs": [str(data / "movielens-small" / "ratings.csv")], "format": "ratings", "vocab_size": 5000}
    return None


def _write_chunks(path: Path, words: int, shortest: int, keep: int | None) -> None:
    """The shipped NIPS papers as JSONL documents of ``words`` whitespace-separated words (id ``paper#piece``);
    ``keep``: that many of them, drawn without replacement (seed 0), else all."""
    import json
    import tarfile

    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    with tarfile.open(SHIPPED["nips-papers"]) as tar:
        for member in tar.getmembers():
            if not (member.isfile() and member.name.endswith(".txt")):
                continue
            tokens = tar.extractfile(member).read().decode("latin-1").split()
            for i in range(0, len(tokens), words):
                if len(tokens[i:i + words]) >= shortest:
                    lines.append(json.dumps({"id": f"{member.name}#{i // words}",
                                             "text": " ".join(tokens[i:i + words])}))
    if keep is not None:
        lines = [lines[i] for i in sorted(np.random.default_rng(0).choice(len(lines), keep, replace=False))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_baskets(path: Path, spec: tuple) -> np.ndarray:
    """Draw the baskets of ``spec`` into ``path`` (one a line, items ``item<i>``); return the true B."""
    n_docs, n_items, k, shortest, longest = spec
    rng = np.random.default_rng(0)
    B = rng.dirichlet(np.full(n_items, 0.05), size=k).T
    lines = []
    for _ in range(n_docs):
        theta = rng.dirichlet(np.full(k, 0.1))
        topics = rng.choice(k, size=int(rng.integers(shortest, longest + 1)), p=theta)
        lines.append(",".join(f"item{rng.choice(n_items, p=B[:, t])}" for t in topics))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return B


def ingest_corpus(name: str, root: str, out: Path, data: Path):
    """Ingest (or draw) corpus ``name`` into ``root``; returns the true B of synthetic corpora (else None)."""
    from jsmf_dask import ingest, synth
    from jsmf_dask.io.parquet import read_vocabulary
    from jsmf_dask.pipeline.synth import read_truth

    if name in SYNTHETIC:
        m, n, k, length = SYNTHETIC[name]
        synth(root, n_docs=m, n_words=n, n_topics=k, doc_length=length, seed=1, topics_from="dirichlet", overwrite=True)
        return read_truth(root)["B"]
    if name in CHUNKS:
        path = out / f"{name}.jsonl"
        _write_chunks(path, *CHUNKS[name])
        ingest(root, [str(path)], format="text", id_column="id", vocab_size=5000, overwrite=True)
        return None
    if name in BASKETS:
        path = out / f"{name}.txt"
        drawn = _write_baskets(path, BASKETS[name])
        ingest(root, [str(path)], format="baskets", overwrite=True)
        items = [int(w.removeprefix("item")) for w in read_vocabulary(f"{root}/corpus").column("word").to_pylist()]
        return drawn[items] / drawn[items].sum(axis=0)  # the items seen, renormalised
    ingest(root, overwrite=True, **_ingest_kwargs(name, data))
    return None


def _store_peer(root: str, name: str, B: np.ndarray, alpha: np.ndarray, heldout: float) -> None:
    """A peer's topics as a model of the root, so that ``evaluate`` scores it with the same code."""
    import zarr

    from jsmf_dask.io.fs import staged_output
    from jsmf_dask.io.model_store import ensure_model_group, model_path
    from jsmf_dask.io.zarr_store import write_array
    from jsmf_dask.io.schema import SCHEMA_VERSION
    from jsmf_dask.io.zarr_store import zarr_store

    k = B.shape[1]
    with staged_output(model_path(root, name), root=root, overwrite=True) as tmp:
        zarr.open_group(zarr_store(tmp), mode="a", zarr_format=3)
        for key, values in {"anchors": np.zeros(0, dtype=np.int64), "B": B, "A": np.full((k, k), 1 / k**2),
                            "alpha": alpha, "p_word": B.mean(axis=1)}.items():
            write_array(tmp, key, values)
        zarr.open_group(zarr_store(tmp), mode="r+").attrs.update({
            "schema_version": SCHEMA_VERSION, "name": name, "heldout_fraction": heldout,
            "params": {"n_topics": k, "rectifier": name}})
        ensure_model_group(root)


def _training_matrix(root: str, heldout: float):
    import scipy.sparse as sps

    from jsmf_dask.io.parquet import corpus_dir, list_blocks, read_block, read_vocabulary
    from jsmf_dask.kernels.doc_split import DocumentSplit
    from jsmf_dask.stages.infer import block_counts

    n = read_vocabulary(corpus_dir(root)).num_rows
    split = DocumentSplit(heldout)
    parts = []
    for block in list_blocks(corpus_dir(root)):
        table = read_block(block, n)
        parts.append(block_counts(table, n)[split.training(table.column("doc_id"))])
    return sps.vstack(parts).tocsr()


def corpus_and_topics(name: str, args) -> tuple[str | None, list[int]]:
    """The corpus ``--corpora`` names by ``name`` (None, said on stderr, where it is not found) and its K values.

    A path to a file is a corpus of one's own, named after its file; a name of :data:`MACHINE_CORPORA` is this
    machine's own text, written once under ``--out`` (documents named ``<file>:<line>``, which the split hashes),
    then read as a file of one's own. Synthetic corpora and baskets have their own K, the others ``--topics``.
    """
    if Path(name).is_file():
        path, name = str(Path(name).resolve()), Path(name).name.split(".")[0]
        FILES[name] = path
    elif name in MACHINE_CORPORA:
        path = Path(args.out) / f"{name}.jsonl"
        if not path.exists():
            MACHINE_CORPORA[name](path)
        FILES[name] = str(path.resolve())
    if name not in {**SYNTHETIC, **BASKETS, **CHUNKS} and _ingest_kwargs(name, Path(args.data)) is None:
        print(f"{name}: not found under {args.data}; skipped", file=sys.stderr)
        return None, []
    return name, ([SYNTHETIC[name][2]] if name in SYNTHETIC else [BASKETS[name][2]] if name in BASKETS else
                  [int(k) for k in args.topics.split(",")])


def run_corpus(name: str, topics: list[int], args) -> dict:
    """Every method at every K on one corpus; returns the rows."""
    import dask

    from jsmf_dask import cooccur, evaluate, fit, open_model
    from jsmf_dask.parameters import refined_fit_iterations
    from jsmf_dask.pipeline.gibbs import fit_gibbs, median_chain
    from jsmf_dask.pipeline.refine import refine
    from pipelines.benchmarks.fit import matched_l1

    root = str(Path(args.out) / f"quality-{name}")
    rows: list[dict] = []
    truth = None
    with dask.config.set({"scheduler": "threads", "jsmf.progress": False}):
        for k in topics:
            seconds: dict[str, list[float]] = {}
            for run in range(args.runs):
                t0 = time.perf_counter()
                truth = ingest_corpus(name, root, Path(args.out), Path(args.data))
                seconds.setdefault("ingest", []).append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                cooccur(root, heldout=0.1, validation=0.05, overwrite=True)
                seconds.setdefault("cooccur", []).append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                # the default route's start for refinement (`jsmf topics`, `jsmf run`, the estimator): 20 or 50
                # cycles on the anchor vocabulary
                fit(root, n_topics=k, iterations=refined_fit_iterations(k), anchor_words="auto",
                    name=f"k{k}-ap", overwrite=True)
                seconds.setdefault(f"k{k}-ap", []).append(time.perf_counter() - t0)
                for label, kwargs in REFINES.items():
                    if label not in args.refines.split(","):
                        continue
                    t0 = time.perf_counter()
                    refine(root, model=f"k{k}-ap", name=f"k{k}-{label}", overwrite=True, **kwargs)
                    seconds.setdefault(f"k{k}-{label}", []).append(time.perf_counter() - t0)
                    print(f"{name} K={k} run {run + 1}: {label} {seconds[f'k{k}-{label}'][-1]:.1f} s",
                          file=sys.stderr, flush=True)
            if "gibbs" in args.peers:
                for seed in range(args.gibbs_seeds):
                    label = f"k{k}-gibbs" + (f"-s{seed}" if seed else "")
                    t0 = time.perf_counter()
                    fit_gibbs(root, n_topics=k, iterations=args.gibbs_iterations, seed=seed, name=label,
                              overwrite=True)
                    seconds[label] = [time.perf_counter() - t0]
                    print(f"{name} K={k}: gibbs seed {seed} {seconds[label][0]:.1f} s", file=sys.stderr, flush=True)
                for label, kwargs in FROM_GIBBS.items():
                    if label not in args.refines.split(","):
                        continue
                    t0 = time.perf_counter()
                    refine(root, model=f"k{k}-gibbs", name=f"k{k}-{label}", overwrite=True, **kwargs)
                    seconds[f"k{k}-{label}"] = [seconds[f"k{k}-gibbs"][0] + time.perf_counter() - t0]
                    print(f"{name} K={k}: {label} {seconds[f'k{k}-{label}'][0]:.1f} s", file=sys.stderr, flush=True)
            if "sklearn" in args.peers:
                from sklearn.decomposition import LatentDirichletAllocation

                X = _training_matrix(root, 0.1)
                lda = LatentDirichletAllocation(n_components=k, learning_method="batch", random_state=0)
                t0 = time.perf_counter()
                lda.fit(X)
                seconds[f"k{k}-sklearn"] = [time.perf_counter() - t0]
                B = (lda.components_ / lda.components_.sum(axis=1, keepdims=True)).T
                _store_peer(root, f"k{k}-sklearn", B, np.full(k, float(lda.doc_topic_prior_)), 0.1)
            names = [m for m in seconds if m.startswith(f"k{k}-")]
            metrics = evaluate(root, models=names)["models"]
            chains = [m for m in names if m.startswith(f"k{k}-gibbs")]
            reference = median_chain(root, chains, metrics) if chains else None
            paired = _paired_to_gibbs(root, names, reference)
            fixed = statistics.median(seconds["ingest"]) + statistics.median(seconds["cooccur"]) + \
                statistics.median(seconds[f"k{k}-ap"])
            p_word = open_model(root, f"k{k}-ap").arrays["p_word"]  # the training documents' word frequencies
            for model, entry in metrics.items():
                # the chain of median perplexity is the reference ("gibbs"); the others are "gibbs-chain"
                method = "gibbs" if model == reference else "gibbs-chain" if model in chains else \
                    model.split("-", 1)[1]
                own = statistics.median(seconds[model])
                end_to_end = fixed if method == "ap" else fixed + own if method in REFINES else own
                B = open_model(root, model).arrays["B"]
                row = {"corpus": name, "K": k, "method": method,
                       "perplexity": entry["heldout"].get("perplexity"),
                       "perplexity_sampled": entry["heldout"].get("sampled_fold_in", {}).get("perplexity"),
                       "specificity": entry["original_C"].get("specificity"),
                       "dissimilarity": entry["original_C"].get("dissimilarity"),
                       "coherence": entry["original_C"].get("coherence"),
                       "npmi": entry["original_C"].get("npmi"),
                       "word_topic_entropy": _word_topic_entropy(B, p_word),
                       "seconds": own, "end_to_end_seconds": end_to_end} | paired.get(model, {})
                if truth is not None:
                    row["B_l1"] = matched_l1(B, truth)
                rows.append(row)
    return {"corpus": name, "rows": rows}


def _word_topic_entropy(B: np.ndarray, p_word: np.ndarray) -> float:
    """Over how many topics (2^H) a word's tokens spread, in bits
    (:func:`~jsmf_dask.kernels.metrics.word_topic_entropy` under the shares with which ``B`` explains ``p_word``)."""
    from jsmf_dask.kernels.metrics import word_topic_entropy
    from jsmf_dask.kernels.variational import topic_shares

    return word_topic_entropy(B, topic_shares(B, p_word), p_word)


def _paired_to_gibbs(root: str, names: list[str], gibbs: str | None) -> dict[str, dict]:
    """Gibbs's held-out log likelihood per token minus each model's (positive: the model is worse) and its
    paired standard error (the same documents score both); on the relative perplexity scale to first order."""
    from jsmf_dask.kernels.model_selection import paired_gap
    from jsmf_dask.pipeline.evaluate import heldout_document_scores

    if gibbs not in names:
        return {}
    out: dict[str, dict] = {name: {} for name in names if name != gibbs}
    by_fold_in = heldout_document_scores(root, names, 0.1, fold_ins=("vb", "sampled"))
    for fold_in, suffix in (("vb", ""), ("sampled", "_sampled")):
        scores = by_fold_in[fold_in]
        L, n = scores.log_likelihood, scores.n_tokens
        for name in out:
            out[name] |= dict(zip((f"loglik_gap_to_gibbs{suffix}", f"loglik_gap_se{suffix}"),
                                  paired_gap(L[gibbs], L[name], n), strict=True))
    return out


def _table(rows: list[dict]) -> str:
    gibbs = {r["K"]: r for r in rows if r["method"] == "gibbs"}
    cols = ["K", "method", "perplexity", "vs Gibbs", "sampled fold-in", "vs Gibbs (sampled)", "B_l1", "specificity",
            "H(k|w)", "dissimilarity", "coherence", "npmi", "seconds", "end_to_end_seconds", "Gibbs / ours"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]

    def against(r: dict, g: dict | None, key: str, suffix: str) -> str:
        if not (g and r.get(key) and g.get(key)):
            return "n/a"
        text = f"{r[key] / g[key] - 1:+.1%}"
        if r.get(f"loglik_gap_se{suffix}") is not None:  # the paired error, relative (first order)
            text += f" ± {r[key] / g[key] * r[f'loglik_gap_se{suffix}']:.1%}"
        return text

    for r in rows:
        g = gibbs.get(r["K"])
        vs, vs_sampled = against(r, g, "perplexity", ""), against(r, g, "perplexity_sampled", "_sampled")
        speed = f"{g['seconds'] / r['end_to_end_seconds']:.1f}x" \
            if g and r["method"] not in ("gibbs", "gibbs-chain", "sklearn") \
            else ""
        vals = [r["K"], r["method"], r["perplexity"], vs, r.get("perplexity_sampled"), vs_sampled, r.get("B_l1"),
                r["specificity"], r.get("word_topic_entropy"), r["dissimilarity"],
                r["coherence"], r.get("npmi"), r["seconds"], r["end_to_end_seconds"], speed]
        out.append("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else ("" if v is None else str(v))
                                     for v in vals) + " |")
    return "\n".join(out)


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    ks = sorted({r["K"] for r in result["rows"]})
    fig, axes = plt.subplots(1, len(ks), figsize=(6 * len(ks), 4.5), squeeze=False)
    for ax, k in zip(axes[0], ks, strict=True):
        for r in (r for r in result["rows"] if r["K"] == k and r["perplexity"]):
            ax.scatter(r["end_to_end_seconds"], r["perplexity"], s=30)
            ax.annotate(r["method"], (r["end_to_end_seconds"], r["perplexity"]), fontsize=8,
                        xytext=(4, 4), textcoords="offset points")
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("seconds (ours: end to end; peers: their training)")
        ax.set_ylabel("held-out perplexity")
        ax.set_title(f"{result['corpus']}, K = {k}")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpora", default="nips-papers,reuters,nips17-bow,movielens,lda-20k")
    p.add_argument("--topics", default="20,50", help="K values (lda-* corpora use their own K)")
    p.add_argument("--runs", type=int, default=3, help="repeats of our pipeline (median seconds)")
    p.add_argument("--refines", default=",".join([*REFINES, *FROM_GIBBS]),
                   help="which refines to run (names above)")
    p.add_argument("--gibbs-iterations", type=int, default=1000)
    p.add_argument("--gibbs-seeds", type=int, default=1,
                   help="Gibbs chains (seeds 0, 1, ...): the one of median perplexity is the reference")
    p.add_argument("--peers", default="gibbs,sklearn")
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--out", default="bench-runs")
    p.add_argument("--replot", metavar="JSON", help="only redraw the tables and PNGs of a quality-results.json")
    args = p.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.replot:
        for result in json.loads(Path(args.replot).read_text()):
            print(f"\n{result['corpus']}\n\n{_table(result['rows'])}\n")
            _plot(result, Path(args.out) / f"quality-{result['corpus']}.png")
        return 0
    results = []
    for name in args.corpora.split(","):
        name, topics = corpus_and_topics(name, args)
        if name is None:
            continue
        result = run_corpus(name, topics, args)
        results.append(result)
        print(f"\n{name}\n\n{_table(result['rows'])}\n", flush=True)
        _plot(result, Path(args.out) / f"quality-{name}.png")
        (Path(args.out) / "quality-results.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
