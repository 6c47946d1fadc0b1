"""The ``jsmf`` command: parse arguments, pick the cluster, run a stage, report.

This is the only module that configures logging and prints. A
:class:`~jsmf_dask.exceptions.JSMFError` becomes one line on stderr and exit
status 1.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
import warnings
from collections.abc import Sequence

import dask

from jsmf_dask import __version__
from jsmf_dask.cluster import connect
from jsmf_dask.exceptions import JSMFError
from jsmf_dask.io.sources import RatingsColumns
from jsmf_dask.io.model_store import topics_path
from jsmf_dask.kernels.recover import SOLVERS
from jsmf_dask.pipeline.compare import METHODS, compare
from jsmf_dask.pipeline.cooccur import cooccur
from jsmf_dask.pipeline.evaluate import METRICS, evaluate, metrics_path
from jsmf_dask.pipeline.fit import RECTIFIERS, fit
from jsmf_dask.pipeline.infer import infer
from jsmf_dask.pipeline.refine import METHODS as METHODS_REFINE
from jsmf_dask.pipeline.refine import refine
from jsmf_dask.pipeline.ingest import FORMATS, ingest
from jsmf_dask.pipeline.ldavis import export_ldavis, require_pyldavis
from jsmf_dask.pipeline.report import report, report_model
from jsmf_dask.pipeline.run import run
from jsmf_dask.pipeline.run_config import load_run_config
from jsmf_dask.pipeline.synth import TOPICS_FROM, synth
from jsmf_dask.testing.synthetic import PRIORS

__all__ = ["main", "build_parser"]

log = logging.getLogger("jsmf_dask")


EXAMPLES = {
    "ingest": "jsmf ingest runs/nips pipelines/data/nips12-raw/nipstxt.tar.xz --vocab-size 5000 --encoding latin-1",
    "cooccur": "jsmf cooccur runs/nips --heldout 0.1",
    "fit": "jsmf fit runs/nips --topics 20",
    "refine": "jsmf refine runs/nips --model k20-ap",
    "evaluate": "jsmf evaluate runs/nips",
    "compare": "jsmf compare runs/nips --topics 5,10,20 --methods none,ap,ap+cvb0",
    "report": "jsmf report runs/nips --model k20-ap",
    "infer": "jsmf infer runs/nips --model k20-ap-cvb0",
    "run": "jsmf run pipelines/configs/demo.toml",
    "synth": "jsmf synth runs/synth --docs 20000 --vocab 2000 --topics 20",
}


def _command(sub, name: str, **kwargs) -> argparse.ArgumentParser:
    """A sub-command's parser, with its example as the epilog."""
    return sub.add_parser(name, epilog=f"example: {EXAMPLES[name]}", **kwargs)


def _add_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("root", metavar="ROOT", help="run root: a local path or an fsspec URL (s3://bucket/run)")


def _add_cluster_options(p: argparse.ArgumentParser, *, overwrite: bool = True) -> None:
    if overwrite:
        p.add_argument("--overwrite", action="store_true", help="replace this command's existing output")
    g = p.add_argument_group("cluster")
    g.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="Dask scheduler address (default: $DASK_SCHEDULER_ADDRESS, else a LocalCluster of worker "
        "processes sized to this machine); 'synchronous' or 'threads' run in this process",
    )
    g.add_argument("--workers", type=int, metavar="N", help="LocalCluster worker processes (default: one per core)")
    g.add_argument("--memory-limit", metavar="BYTES", help="LocalCluster memory per worker, e.g. 4GiB")
    g.add_argument("--connect-timeout", type=_positive_float, default=10.0, metavar="SECONDS",
                   help="give up on a --scheduler that has not completed the Dask handshake by then (default: 10)")
    g.add_argument("--quiet", action="store_true", help="print results only: no progress, no dashboard link")


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _prior(text: str) -> float | str:
    return "auto" if text == "auto" else _positive_float(text)


def _validation_fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 0.5:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 0.5], got {text!r}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 0.5:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 0.5], got {text!r}")
    return value


def _str_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``jsmf`` (one sub-command per stage)."""
    parser = argparse.ArgumentParser(
        prog="jsmf",
        description="Rectified Anchor Words topic inference on Dask (Lee, Bindel & Mimno 2015).",
    )
    parser.add_argument("--version", action="version", version=f"jsmf_dask {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _command(
        sub, "ingest",
        help="raw documents, bag of words, ratings or baskets -> curated Parquet corpus",
        description="Read raw input into ROOT/corpus (Parquet shards + vocab.parquet), curating the "
        "vocabulary by tf-idf as in the paper's experiments.",
    )
    _add_root(p)
    p.add_argument("inputs", metavar="INPUT", nargs="+", help="input files or directories")
    p.add_argument("--format", choices=FORMATS, default="auto",
                   help="auto: docword.*.txt[.gz] is UCI, anything else raw text (default)")
    p.add_argument("--vocab", help="UCI vocabulary file (default: vocab.X.txt beside docword.X.txt)")
    p.add_argument("--doc-ids", help="UCI: file whose line k names document k")
    p.add_argument("--text-column", default="text", help="text column of JSONL/CSV/Parquet input (default: text)")
    p.add_argument("--id-column", help="document id column (default: FILE:ROW)")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--stopwords", default="english", metavar="FILE",
                      help="stop list, one word a line (default: the shipped English list)")
    stop.add_argument("--no-stopwords", action="store_true", help="keep stop words")
    p.add_argument("--min-word-length", type=int, default=3, help="shortest token kept from text (default: 3)")
    p.add_argument("--encoding", default="utf-8",
                   help="encoding of text, JSONL, CSV and baskets input, decoded strictly: binary or undecodable "
                   "input is refused with the file name (default: utf-8; e.g. latin-1)")
    p.add_argument("--user-column", help="ratings: user column (default: first column)")
    p.add_argument("--item-column", help="ratings: item column (default: second column)")
    p.add_argument("--rating-column", help="ratings: rating column (default: third column)")
    p.add_argument("--delimiter", default=",", help="baskets: item separator (default: ,)")
    p.add_argument("--labels", metavar="FILE",
                   help="CSV (or .tsv) with a header: item id, then its label (e.g. MovieLens movies.csv); topics and "
                   "reports show the labels instead of bare ids")
    p.add_argument("--vocab-size", type=int, help="words kept by tf-idf rank (default: all)")
    p.add_argument("--min-doc-tokens", type=int,
                   help="drop documents with fewer tokens (default: 5 for text and bag of words, 2 for ratings and "
                   "baskets)")
    p.add_argument("--min-doc-words", type=int,
                   help="drop documents with fewer distinct words (default: 3 for text and bag of words, 2 for "
                   "ratings and baskets)")
    p.add_argument("--docs-per-shard", type=int, help="documents per shard file (default: 50000)")
    p.add_argument("--row-group-size", type=int, help="documents per Parquet row group (default: 10000)")
    p.add_argument("--append", action="store_true",
                   help="add the input's documents to the existing corpus, with its vocabulary (then "
                   "`jsmf cooccur --update`)")
    _add_cluster_options(p)

    p = _command(
        sub, "cooccur",
        help="corpus -> co-occurrence matrix C (ROOT/cooc.zarr)",
        description="Build the unbiased co-occurrence matrix C of the paper (eq. 1), with document "
        "frequencies D1 and co-document frequencies D2, tile by tile into ROOT/cooc.zarr.",
    )
    _add_root(p)
    p.add_argument("--tile-size", type=int, help="edge of a tile of C (default: 2048)")
    p.add_argument("--no-codoc", action="store_true", help="skip D2 (co-document counts); halves the work")
    p.add_argument("--update", action="store_true",
                   help="add only the shards the existing C has not counted (after `jsmf ingest --append`)")
    p.add_argument("--heldout", type=_fraction, metavar="FRACTION",
                   help="leave out of C the documents whose doc_id hashes below FRACTION, for held-out "
                   "perplexity in `jsmf evaluate` (e.g. 0.1)")
    p.add_argument("--validation", type=_fraction, metavar="FRACTION",
                   help="also leave out of C the documents whose doc_id hashes at or above 1 - FRACTION (never "
                   "held-out ones): `jsmf refine` scores them each sweep and stops when they stop improving (e.g. 0.05)")
    p.add_argument("--rank", type=_positive_int, metavar="R",
                   help="write the compressed store instead: the top R eigenpairs of C computed by passes over "
                   "the corpus, no N x N array (for large vocabularies; fit it with --rectifier enn and any "
                   "--topics up to R; no D2, no --update). Without --rank the store is dense unless its C "
                   "(and D2) would exceed jsmf.cooccur.dense-max-bytes (16 GiB): then compressed, rank 100")
    p.add_argument("--eig-tol", type=_positive_float, default=1e-6, metavar="T",
                   help="with --rank: relative residual asked of the eigenpairs (default: 1e-6)")
    _add_cluster_options(p)

    p = _command(
        sub, "fit",
        help="C -> topics: rectify, anchors, B and A (ROOT/model.zarr/NAME, ROOT/topics/NAME.txt)",
        description="Fit a Rectified Anchor Words model from ROOT/cooc.zarr and print its topics.",
    )
    _add_root(p)
    p.add_argument("--topics", type=int, required=True, metavar="K", help="number of topics")
    p.add_argument("--rectifier", choices=RECTIFIERS,
                   help="ap: alternating projection (default on a dense store); dc: diagonal completion; enn: "
                   "epsilon-non-negative rectification and low-rank anchors in O(N*K) memory (default on a "
                   "compressed store, `cooccur --rank`); none: the Baseline")
    p.add_argument("--iterations", type=int, default=150, help="AP or ENN cycles (default: 150)")
    p.add_argument("--tol", type=float,
                   help="stop AP or ENN when its relative change falls below this (default: run all --iterations; "
                   "1e-6, the eigensolver's accuracy, is several times faster: see the README); ENN also stops when "
                   "its change is below what it can measure, 1e-7")
    p.add_argument("--end-with", choices=("nonnegative", "psd"), default="nonnegative",
                   help="AP's last projection (default: nonnegative)")
    p.add_argument("--solver", choices=SOLVERS, default="exact", help="B solver (default: exact)")
    p.add_argument("--min-anchor-df", type=int,
                   help="document-frequency floor of anchor words (default: jsmf.fit.min-anchor-df, 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the eigensolver's random start (default: 0)")
    p.add_argument("--name", help="model name (default: k<K>-<rectifier>)")
    p.add_argument("--warm-start", metavar="NAME",
                   help="start AP from the eigenvectors of model NAME (the refit after `cooccur --update`)")
    p.add_argument("--path", choices=("auto", "in-task", "tiled"), default="auto",
                   help="rectification path; auto (default): in one task where the dense C and the rectified C (about "
                   "2.5*8*N^2 bytes) fit 80%% of the largest worker's memory limit; else, with the default "
                   "--rectifier, ENN and low-rank anchors in O(N*K) memory (model k<K>-enn), with --rectifier ap "
                   "the tiled path")
    _add_cluster_options(p)

    p = _command(
        sub, "refine",
        help="sweeps of CVB0 (or variational Bayes) from a fitted model -> ROOT/model.zarr/NAME-cvb0",
        description="Refine model NAME's topics by batch CVB0 (zero-order collapsed variational Bayes) or "
        "variational Bayes for LDA over ROOT/corpus, started from its B (and A), with learned priors; stops when "
        "the perplexity of a small validation subset of the documents stops improving. Writes a new model (same "
        "layout, so evaluate/compare/report/infer read it) with each training document's topic weights, and "
        "prints the topics and what changed.",
    )
    _add_root(p)
    p.add_argument("--model", required=True, metavar="NAME", help="the fitted model to start from")
    p.add_argument("--method", choices=METHODS_REFINE,
                   help="cvb0: collapsed variational Bayes, zero order (default); vb: variational Bayes")
    p.add_argument("--sweeps", type=_positive_int, metavar="S", help="passes over the corpus at most (default: 50)")
    p.add_argument("--tol", type=_positive_float, metavar="T",
                   help="stop earlier when the relative change of the word-topic counts falls below T "
                   "(default: 1e-4)")
    p.add_argument("--alpha", type=_prior, metavar="auto|FLOAT",
                   help="document-topic prior: a symmetric value, or auto (asymmetric, one value per topic, learned "
                   "by Minka's fixed point between sweeps) (default: auto)")
    p.add_argument("--eta", type=_prior, metavar="auto|FLOAT",
                   help="topic-word prior: a symmetric value, or auto (learned by Minka's fixed point) (default: 0.05)")
    p.add_argument("--validation", type=_validation_fraction, metavar="FRACTION",
                   help="stop when the perplexity of the validation documents (by doc_id hash, never held-out ones) "
                   "has not improved for 3 sweeps; 0: off (default: the fraction `cooccur --validation` left out of "
                   "C, none without it)")
    p.add_argument("--inner-iterations", type=_positive_int, metavar="I",
                   help="updates per document and sweep at most (default: 3)")
    p.add_argument("--heldout", type=_fraction, metavar="FRACTION",
                   help="leave out the documents whose id hashes below FRACTION (default: the fraction "
                   "cooc.zarr was built with)")
    p.add_argument("--name", help="output model name (default: NAME-METHOD)")
    _add_cluster_options(p)

    p = _command(
        sub, "evaluate",
        help="the paper's six metrics of every model -> ROOT/report/metrics.json",
        description="Recovery, approximation, dominancy, specificity, dissimilarity and coherence (paper §4) "
        "of every model under ROOT, against the original C and against each model's rectified C.",
    )
    _add_root(p)
    p.add_argument("--model", action="append", dest="models", metavar="NAME",
                   help="only this model (repeatable; default: all)")
    p.add_argument("--heldout", type=_fraction, metavar="FRACTION",
                   help="held-out perplexity on the documents whose doc_id hashes below FRACTION; a model "
                   "trained on any of them is an error (default: the fraction cooc.zarr was built with)")
    _add_cluster_options(p, overwrite=False)

    p = _command(
        sub, "compare",
        help="fit and evaluate methods over a sweep of K -> ROOT/report/compare.{csv,md,png}",
        description="Fit each method at each K, evaluate them all and write a table and the analogue of the "
        "paper's Figure 4 (each metric against log K).",
    )
    _add_root(p)
    p.add_argument("--topics", type=_int_list, required=True, metavar="K1,K2,...", help="the numbers of topics to fit")
    p.add_argument("--methods", type=_str_list, default=["none", "dc", "ap"], metavar="M1,M2,...",
                   help=f"from {','.join(METHODS)} (default: none,dc,ap; gibbs needs jsmf_dask[gibbs])")
    p.add_argument("--iterations", type=int, default=150, help="AP cycles (default: 150)")
    p.add_argument("--gibbs-iterations", type=int, default=1000, help="Gibbs sweeps (default: 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of every method's random start (default: 0)")
    _add_cluster_options(p, overwrite=False)

    p = _command(
        sub, "report",
        help="HTML report with the topics and the paper's figures -> ROOT/report/report.html",
        description="Write ROOT/report/report.html (self-contained) and its figures as PNGs.",
    )
    _add_root(p)
    p.add_argument("--model", help="the model to show (default: the first AP model)")
    p.add_argument("--baseline", help="the Baseline for Figure 3 (default: the unrectified model of the same K)")
    p.add_argument("--ldavis", action="store_true",
                   help="also write ROOT/report/ldavis-<model>.html, pyLDAvis's interactive view of the model "
                        "(needs pyLDAvis, and document-topic weights: a refined model, or `jsmf infer` under it)")
    _add_cluster_options(p, overwrite=False)

    p = _command(
        sub, "infer",
        help="each document's topic composition -> ROOT/doc_topics.parquet",
        description="Each document's topic weights under the model, one Dask task per row group: a refined "
        "(or Gibbs) model folds the document in by LDA's variational inference with its own document prior; a "
        "spectral model fits the document's word distribution by its topics (simplex-constrained least squares).",
    )
    _add_root(p)
    p.add_argument("--model", help="model name (required when ROOT holds several)")
    _add_cluster_options(p)

    p = _command(
        sub, "run",
        help="every stage from one config file, skipping stages committed from the same inputs",
        description="Run the stages named in CONFIG.toml (ingest, cooccur, fit, evaluate, report, infer) on "
        "the root it names. A stage whose marker shows the same parameters and inputs is skipped.",
    )
    p.add_argument("config", metavar="CONFIG.toml", help="the run's config (see pipelines/configs/)")
    p.add_argument("--force", action="store_true", help="redo every stage")
    _add_cluster_options(p, overwrite=False)

    p = _command(
        sub, "synth",
        help="a synthetic corpus drawn from known topics (ROOT/corpus + ROOT/truth.zarr)",
        description="Draw a corpus from a separable topic model with known B and A, for testing recovery.",
    )
    _add_root(p)
    p.add_argument("--docs", type=int, required=True, metavar="M", help="documents to draw")
    p.add_argument("--vocab", type=int, required=True, metavar="N", help="vocabulary size")
    p.add_argument("--topics", type=int, required=True, metavar="K", help="number of topics of the truth")
    p.add_argument("--doc-length", type=float, default=200, metavar="L", help="mean tokens per document")
    p.add_argument("--seed", type=int, default=0, help="random seed of the draw (default: 0)")
    p.add_argument("--prior", choices=PRIORS, default="dirichlet",
                   help="document-topic prior: dirichlet (default) or a correlated logistic normal")
    p.add_argument("--alpha", type=float, default=0.1, help="Dirichlet concentration (default: 0.1)")
    p.add_argument("--topics-from", choices=TOPICS_FROM, default="separable",
                   help="separable (default): each topic has a planted anchor word, which flatters anchor methods; "
                   "dirichlet: each topic drawn from a symmetric Dirichlet(--beta) over the vocabulary, as plain LDA")
    p.add_argument("--beta", type=_positive_float, default=0.05,
                   help="concentration of --topics-from dirichlet (default: 0.05)")
    p.add_argument("--row-group-size", type=int, default=10000, help="documents per Parquet row group (default: 10000)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing synthetic corpus")
    return parser


def _run_ingest(args: argparse.Namespace) -> list[str]:
    report = ingest(
        args.root,
        args.inputs,
        format=args.format,
        vocab=args.vocab,
        doc_ids=args.doc_ids,
        text_column=args.text_column,
        id_column=args.id_column,
        stopwords=None if args.no_stopwords else args.stopwords,
        min_word_length=args.min_word_length,
        ratings_columns=RatingsColumns(args.user_column, args.item_column, args.rating_column),
        delimiter=args.delimiter,
        vocab_size=args.vocab_size,
        min_doc_tokens=args.min_doc_tokens,
        min_doc_words=args.min_doc_words,
        docs_per_shard=args.docs_per_shard,
        row_group_size=args.row_group_size,
        overwrite=args.overwrite,
        append=args.append,
        encoding=args.encoding,
        labels=args.labels,
    )
    return report.lines()


def _run_cooccur(args: argparse.Namespace) -> list[str]:
    def on_pass(n: int, seconds: float) -> None:
        if not args.quiet:
            print(f"cooccur: pass {n} over the corpus (product with C), {seconds:.1f} s", file=sys.stderr, flush=True)

    return cooccur(
        args.root, tile_size=args.tile_size, codoc=not args.no_codoc, overwrite=args.overwrite, update=args.update,
        heldout=args.heldout, validation=args.validation, rank=args.rank, eig_tol=args.eig_tol, on_pass=on_pass,
    ).lines()


class _CycleProgress:
    """Prints fit's AP cycles on stderr: every cycle on a terminal (one line, rewritten), else every ~5 s."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, record) -> None:
        now = time.monotonic()
        final = record.cycle == record.of
        if self.tty:
            print("\r" + record.line(), end="\n" if final else "", file=sys.stderr, flush=True)
        elif final or now - self.last >= 5.0:
            print(record.line(), file=sys.stderr, flush=True)
            self.last = now

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr, flush=True)


def _run_fit(args: argparse.Namespace) -> list[str]:
    progress = None if args.quiet else _CycleProgress()
    try:
        result = fit(
            args.root, n_topics=args.topics, rectifier=args.rectifier, iterations=args.iterations, tol=args.tol,
            end_with=args.end_with, solver=args.solver, min_anchor_df=args.min_anchor_df, seed=args.seed,
            name=args.name, path=args.path, warm_start=args.warm_start, overwrite=args.overwrite,
            on_cycle=progress,
        )
    finally:
        if progress is not None:
            progress.close()
    head = [f"model {result.name}: {args.topics} topics, rectifier {result.attrs['params']['rectifier']}, "
            f"{result.n_iter} iterations, "
            f"{result.attrs['path']['chosen']} path ({result.attrs['path']['reason']}); "
            f"written to {result.path} and {topics_path(args.root, result.name)}"]
    return head + result.lines()


def _run_refine(args: argparse.Namespace) -> list[str]:
    def progress(record) -> None:
        if not args.quiet:
            print(record.line(), file=sys.stderr, flush=True)

    result = refine(
        args.root, model=args.model, method=args.method, sweeps=args.sweeps, tol=args.tol, alpha=args.alpha,
        eta=args.eta, name=args.name, heldout=args.heldout, validation=args.validation,
        inner_iterations=args.inner_iterations, overwrite=args.overwrite, on_sweep=progress,
    )
    valid = result.attrs["validation"]
    score = (f"validation perplexity {valid['start_perplexity']:.1f} -> {valid['final_perplexity']:.1f}"
             if valid["final_perplexity"] is not None else "no validation documents")
    head = [f"model {result.name}: {result.B.shape[1]} topics refined from {result.source} by {result.n_iter} "
            f"sweep(s) of {result.attrs['params']['method']} (stopped by {result.attrs['stopped']}; {score}); "
            f"written to {result.path} and {topics_path(args.root, result.name)}"]
    return head + result.lines() + ["", f"changes from {result.source} (top-10 words gained, lost):"] + result.changes()


def _run_synth(args: argparse.Namespace) -> list[str]:
    return synth(
        args.root, n_docs=args.docs, n_words=args.vocab, n_topics=args.topics, doc_length=args.doc_length,
        seed=args.seed, prior=args.prior, alpha=args.alpha, topics_from=args.topics_from, beta=args.beta,
        row_group_size=args.row_group_size,
        overwrite=args.overwrite,
    ).lines()


def _run_evaluate(args: argparse.Namespace) -> list[str]:
    out = evaluate(args.root, models=args.models, heldout=args.heldout)
    lines = [f"metrics written to {metrics_path(args.root)}",
             f"{'model':<16} {'against':<12} " + " ".join(f"{m:>13}" for m in METRICS)]
    for name, entry in out["models"].items():
        for label in ("original_C", "rectified_C"):
            if label in entry:
                vals = [entry[label].get(m) for m in METRICS]
                lines.append(f"{name:<16} {label:<12} " + " ".join(
                    f"{'n/a':>13}" if v is None else f"{v:>13.4g}" for v in vals))
    if out.get("heldout_fraction"):
        lines.append(f"held-out perplexity (document completion, fraction {out['heldout_fraction']}):")
        for name, entry in out["models"].items():
            held = entry.get("heldout", {})
            value = held.get("perplexity")
            lines.append(f"{name:<16} " + (f"{value:.1f}" if value is not None else f"n/a: {held.get('notes')}"))
    return lines


def _run_compare(args: argparse.Namespace) -> list[str]:
    result = compare(args.root, topics=args.topics, methods=args.methods, iterations=args.iterations,
                     gibbs_iterations=args.gibbs_iterations, seed=args.seed)
    return [result.markdown(), f"written {result.csv_path}, {result.markdown_path}, {result.figure_path}"]


def _run_report(args: argparse.Namespace) -> list[str]:
    if args.ldavis:
        require_pyldavis()  # before any work
    path = report(args.root, model=args.model, baseline=args.baseline)
    lines = [f"report: {path}"]
    if args.ldavis:
        shown = args.model or report_model(args.root)
        lines.append(f"pyLDAvis view of {shown}: {export_ldavis(args.root, model=shown)}")
    return lines


def _run_infer(args: argparse.Namespace) -> list[str]:
    return infer(args.root, model=args.model, overwrite=args.overwrite).lines()


def _run_run(args: argparse.Namespace) -> list[str]:
    outcomes = run(args.run_config, force=args.force, log=lambda line: print(line, flush=True))
    lines = []
    for o in outcomes:
        lines.extend(o.lines)
    ran = sum(o.status == "ran" for o in outcomes)
    return lines + [f"run {args.run_config.path}: {ran} stage(s) ran, {len(outcomes) - ran} up to date; "
                    f"outputs under {args.run_config.root}"]


_COMMANDS = {"ingest": _run_ingest, "cooccur": _run_cooccur, "fit": _run_fit, "refine": _run_refine,
             "synth": _run_synth,
             "evaluate": _run_evaluate, "compare": _run_compare, "report": _run_report, "infer": _run_infer,
             "run": _run_run}
_LOCAL_ONLY = {"synth"}


#: Python parameters whose CLI flag is not ``--`` + the name with dashes.
_FLAGS = {"n_topics": "--topics", "n_docs": "--docs", "n_words": "--vocab", "iterations": "--iterations",
          "models": "--model", "inputs": "INPUT", "root": "ROOT"}


def _flag(name: str) -> str:
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def _cli_words(message: str) -> str:
    """A library message in the CLI's words: parameters become the flags that set them.

    ``The 'n_topics' parameter of fit`` → ``--topics``; ``overwrite=True`` →
    ``--overwrite``; ``path='tiled'`` → ``--path tiled``; ``min_anchor_df=10`` →
    ``--min-anchor-df 10``.
    """
    message = re.sub(r"The '(\w+)' parameter of \w+", lambda m: _flag(m.group(1)), message)
    message = re.sub(r"\b([a-z_]+)=True\b", lambda m: _flag(m.group(1)), message)
    message = re.sub(r"\b([a-z_]+)='([\w.+-]+)'", lambda m: f"{_flag(m.group(1))} {m.group(2)}", message)
    return re.sub(r"\b([a-z][a-z_]*)=(\d[\w.]*)", lambda m: f"{_flag(m.group(1))} {m.group(2)}", message)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"jsmf: warning: {_cli_words(str(message))}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``jsmf``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    import distributed  # noqa: F401 - importing it sets its loggers from dask's config: set ours after that

    for noisy, quiet in (("distributed", logging.WARNING), ("bokeh", logging.ERROR), ("tornado", logging.ERROR)):
        logging.getLogger(noisy).setLevel(level if args.verbose else quiet)
    warnings.showwarning = _show_warning
    if getattr(args, "workers", None) is not None and args.workers < 1:
        print(f"jsmf: error: --workers must be >= 1, got {args.workers}", file=sys.stderr)
        return 2
    try:
        if args.command == "run":  # validate the config before starting any cluster; it may name one
            args.run_config = load_run_config(args.config)
            args.scheduler = args.scheduler or args.run_config.scheduler
            args.workers = args.workers or args.run_config.workers
            args.memory_limit = args.memory_limit or args.run_config.memory_limit
        if args.command in _LOCAL_ONLY:
            lines = _COMMANDS[args.command](args)
        else:
            with dask.config.set({"jsmf.progress": not args.quiet}), connect(
                args.scheduler,
                n_workers=args.workers,
                memory_limit=args.memory_limit,
                connect_timeout=args.connect_timeout,
                lazy=True,  # the stage checks its inputs first: a bad one fails without starting a cluster
                on_dashboard=None if args.quiet else lambda link: print(f"dask dashboard: {link}", file=sys.stderr),
            ):
                lines = _COMMANDS[args.command](args)
    except JSMFError as err:
        # `jsmf run` takes no stage flags: its config keys carry the parameters' names
        message = str(err) if args.command == "run" else _cli_words(str(err))
        print(f"jsmf: error: {message}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"jsmf: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("jsmf: interrupted", file=sys.stderr)
        return 130
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
