"""The ``jsmf`` command line's argument parser: one sub-command per stage (no I/O, no printing).

The options of ``fit`` and ``refine`` come from the parameter table
(:mod:`jsmf_dask.parameters`); the others are declared here.
"""

from __future__ import annotations

import argparse
import math

from jsmf_dask import __version__
from jsmf_dask.parameters import (
    CONNECT_TIMEOUT,
    HEARTBEAT_TIMEOUT,
    WORKER_TIMEOUT,
    STRIPS,
    INPUT_FORMATS,
    CHOOSE_K_ITERATIONS,
    CHOOSE_K_SWEEPS,
    REFINED_FIT_ITERATIONS,
    REFINED_FIT_ITERATIONS_SMALL_K,
    REFINED_FIT_SMALL_K,
    SYNTH_PRIORS,
    SYNTH_TOPICS_FROM,
    TOPICS_VOCAB_SIZE,
    cli_options,
    compare_methods,
    parameter,
)

__all__ = ["EXAMPLES", "build_parser"]


EXAMPLES = {
    "ingest": "jsmf ingest runs/nips pipelines/data/nips12-raw/nipstxt.tar.xz --vocab-size 5000 --encoding latin-1",
    "cooccur": "jsmf cooccur runs/nips --heldout 0.1",
    "fit": "jsmf fit runs/nips --topics 20",
    "refine": "jsmf refine runs/nips --model k20-ap",
    "evaluate": "jsmf evaluate runs/nips",
    "compare": "jsmf compare runs/nips --topics 5,10,20 --methods none,ap,ap+cvb0",
    "choose-k": "jsmf choose-k runs/nips --topics 5:100",
    "report": "jsmf report runs/nips --model k20-ap",
    "infer": "jsmf infer runs/nips --model k20-ap-refined",
    "transform": "jsmf transform runs/nips --model k20-ap-refined new-papers/ --output new-topics.parquet",
    "export": "jsmf export runs/nips --model k20-ap-refined --format csv --top 50",
    "run": "jsmf run pipelines/configs/demo.toml",
    "topics": "jsmf topics pipelines/data/nips12-raw/nipstxt.tar.xz --topics 20 --out runs/nips --encoding latin-1",
    "synth": "jsmf synth runs/synth --docs 20000 --vocab 2000 --topics 20",
}


def _command(sub, name: str, **kwargs) -> argparse.ArgumentParser:
    """A sub-command's parser, with its example as the epilog; ``-v`` is accepted after the command too."""
    p = sub.add_parser(name, epilog=f"example: {EXAMPLES[name]}", **kwargs)
    p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                   help="more logging (-vv for debug); also accepted before the command")
    return p


def _add_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("root", metavar="ROOT", help="run root: a local path or an fsspec URL (s3://bucket/run)")


def _add_cluster_options(p: argparse.ArgumentParser, *, overwrite: bool = True) -> None:
    if overwrite:
        p.add_argument("--overwrite", action="store_true", help="replace this command's existing output")
    g = p.add_argument_group("cluster")
    g.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="where the stage runs: a Dask scheduler address; 'local': a LocalCluster of worker processes sized "
        "to this machine; 'threads' or 'synchronous': in this process; 'auto': threads for small work, the "
        "LocalCluster for large (the size and the choice are printed) (default: $DASK_SCHEDULER_ADDRESS, else "
        "auto)",
    )
    g.add_argument("--workers", type=int, metavar="N",
                   help="LocalCluster worker processes (default: one per core; implies --scheduler local)")
    g.add_argument("--memory-limit", metavar="BYTES",
                   help="LocalCluster memory per worker, e.g. 4GiB (implies --scheduler local)")
    g.add_argument("--connect-timeout", type=_positive_float, default=CONNECT_TIMEOUT, metavar="SECONDS",
                   help="give up on a --scheduler that has not completed the Dask handshake by then "
                   f"(default: {CONNECT_TIMEOUT:g})")
    g.add_argument("--wait-for-workers", type=_positive_int, default=1, metavar="N",
                   help="with --scheduler ADDRESS: wait until N workers have registered before the stage runs "
                   "(workers of a batch queue or an autoscaler come after the driver) (default: 1)")
    g.add_argument("--worker-timeout", type=_positive_float, default=WORKER_TIMEOUT, metavar="SECONDS",
                   help=f"give up waiting for those workers after SECONDS (default: {WORKER_TIMEOUT:g})")
    g.add_argument("--heartbeat-timeout", type=_positive_float, default=HEARTBEAT_TIMEOUT, metavar="SECONDS",
                   help="with --scheduler ADDRESS: give up when the scheduler has not answered for SECONDS (frozen "
                   f"or unreachable) (default: {HEARTBEAT_TIMEOUT:g})")
    g.add_argument("--quiet", action="store_true", help="print results only: no progress, no dashboard link")


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _topics_spec(text: str) -> list[int]:
    """``choose-k --topics``: ``A:B`` (10 values from A to B evenly spaced on a log scale, rounded), ``A:B:S``
    (A, A+S, …, up to B) or ``K1,K2,…``."""
    try:
        if ":" in text:
            parts = [int(x) for x in text.split(":")]
            if len(parts) == 2 and 2 <= parts[0] < parts[1]:
                lo, hi = math.log(parts[0]), math.log(parts[1])
                return sorted({round(math.exp(lo + (hi - lo) * i / 9)) for i in range(10)})
            if len(parts) == 3 and 2 <= parts[0] < parts[1] and parts[2] >= 1:
                return list(range(parts[0], parts[1] + 1, parts[2]))
            raise ValueError
        return _int_list(text)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(
            f"expected A:B (10 values from A to B, log-spaced), A:B:STEP or K1,K2,... with 2 <= A < B, got {text!r}"
        ) from None


def _separator(text: str) -> str:
    """``--delimiter``: the text itself, with ``\\t`` or ``tab`` for a tab (hard to type in a shell)."""
    return "\t" if text in ("\\t", "tab") else text


def _number(cast, accept, expected: str):
    """An argparse type: ``cast(text)``, refused with ``expected`` unless ``accept`` takes it."""
    def parse(text: str):
        try:
            value = cast(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_positive_float = _number(float, lambda v: 0 < v < float("inf"), "a number > 0")
_positive_int = _number(int, lambda v: v >= 1, "an integer >= 1")
_fraction = _number(float, lambda v: 0 < v <= 0.5, "a fraction in (0, 0.5]")


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
    p.add_argument("--format", choices=INPUT_FORMATS, default="auto",
                   help="auto: docword.*.txt[.gz] is UCI, anything else raw text (default)")
    p.add_argument("--vocab", help="UCI vocabulary file (default: vocab.X.txt beside docword.X.txt)")
    p.add_argument("--doc-ids", help="UCI: file whose line k names document k")
    p.add_argument("--text-column", default="text", help="text column of JSONL/CSV/Parquet input (default: text)")
    p.add_argument("--id-column", help="document id column (default: FILE:ROW)")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--stopwords", default="english", metavar="FILE",
                      help="stop list, one word a line (default: the shipped English list)")
    stop.add_argument("--no-stopwords", action="store_true", help="keep stop words")
    p.add_argument("--encoding", default="utf-8",
                   help="encoding of text, JSONL, CSV and baskets input, decoded strictly: binary or undecodable "
                   "input is refused with the file name (default: utf-8; e.g. latin-1)")
    p.add_argument("--user-column", help="ratings: user column (default: first column)")
    p.add_argument("--item-column", help="ratings: item column (default: second column)")
    p.add_argument("--rating-column", help="ratings: rating column (default: third column)")
    p.add_argument("--delimiter", default=None, metavar="SEP", type=_separator,
                   help="CSV/TSV text tables: field separator (default: tab for .tsv files, else a comma); baskets: "
                   "item separator (default: a comma)")
    p.add_argument("--no-header", dest="header", action="store_false",
                   help="CSV/TSV text tables: the first line is data; name columns by position "
                   "(--text-column 2 --id-column 1)")
    p.add_argument("--strip", choices=STRIPS,
                   help="text: remove each document's e-mail header block, quoted replies (> lines and the "
                   "'... writes:' line) and signature (after a line of dashes) before tokenising")
    p.add_argument("--labels", metavar="FILE",
                   help="CSV (or .tsv) with a header: item id, then its label (e.g. MovieLens movies.csv); topics and "
                   "reports show the labels instead of bare ids")
    cli_options(p, "ingest")
    p.add_argument("--docs-per-shard", type=int, help="documents per shard file (default: 50000)")
    p.add_argument("--row-group-size", type=int,
                   help="documents per Parquet row group (default: 10000, or fewer so that a small corpus has 8 "
                        "of at least 500)")
    p.add_argument("--append", action="store_true",
                   help="add the input's documents to the existing corpus, with its vocabulary (then "
                   "`jsmf cooccur --update`)")
    _add_cluster_options(p)

    p = _command(
        sub, "cooccur",
        help="corpus -> co-occurrence matrix C (ROOT/cooc.zarr)",
        description="Build the unbiased co-occurrence matrix C of the paper (eq. 1, each document weighed by its "
        "tokens unless --weighting documents), with document frequencies D1 and co-document frequencies D2, tile "
        "by tile into ROOT/cooc.zarr.",
    )
    _add_root(p)
    p.add_argument("--tile-size", type=int, help="largest edge of a tile of C, the tiles made equal (default: 2048)")
    p.add_argument("--no-codoc", action="store_true", help="skip D2 (co-document counts); halves the work")
    p.add_argument("--update", action="store_true",
                   help="add only the shards the existing C has not counted (after `jsmf ingest --append`)")
    cli_options(p, "cooccur")
    _add_cluster_options(p)

    p = _command(
        sub, "fit",
        help="C -> topics: rectify, anchors, B and A (ROOT/model.zarr/NAME, ROOT/topics/NAME.txt)",
        description="Fit a Rectified Anchor Words model from ROOT/cooc.zarr and print its topics.",
    )
    _add_root(p)
    cli_options(p, "fit")
    p.add_argument("--name", help="model name (default: k<K>-<rectifier>)")
    p.add_argument("--warm-start", metavar="NAME",
                   help="start AP from the eigenvectors of model NAME (the refit after `cooccur --update`)")
    _add_cluster_options(p)

    p = _command(
        sub, "refine",
        help="sweeps of CVB0 (or sampled passes, or variational Bayes) from a fitted model -> "
        "ROOT/model.zarr/NAME-refined",
        description="Refine model NAME's topics by batch CVB0 (zero-order collapsed variational Bayes), sampled "
        "passes or variational Bayes for LDA over ROOT/corpus, started from its B (and A), with learned priors "
        "(--method auto, the default: CVB0, and on a corpus of short documents the sampled passes too, the "
        "validation documents keeping the better); stops when "
        "the perplexity of a small validation subset of the documents stops improving. Writes a new model (same "
        "layout, so evaluate/compare/report/infer read it) with each training document's topic weights, and "
        "prints the topics and what changed.",
    )
    _add_root(p)
    p.add_argument("--model", required=True, metavar="NAME", help="the fitted model to start from")
    cli_options(p, "refine")
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
    p.add_argument("--no-sampled-fold-in", dest="sampled_fold_in", action="store_false",
                   help="score the held-out documents by the VB fold-in alone, not also by the sampled one "
                   "(theta the exact posterior mean by Gibbs sampling; 4-9x the VB fold-in's time)")
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
                   help=f"from {','.join(compare_methods())} (default: none,dc,ap; gibbs needs jsmf_dask[gibbs])")
    p.add_argument("--iterations", type=int, default=150, help="AP cycles (default: 150)")
    p.add_argument("--gibbs-iterations", type=int, default=1000, help="Gibbs sweeps (default: 1000)")
    p.add_argument("--gibbs-chains", type=int, default=1,
                   help="Gibbs chains per K (seeds SEED, SEED+1, ...); the row is the one of median held-out "
                        "perplexity: chains can differ by several per cent (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of every method's random start (default: 0)")
    _add_cluster_options(p, overwrite=False)

    p = _command(
        sub, "choose-k",
        help="how many topics: fit and refine each K from one C, score them on the validation documents -> "
             "ROOT/report/choose_k.{json,csv,png}",
        description="For each K: a spectral fit (AP) and a short CVB0 refine, kept as models choose-k<K>-ap and "
        "choose-k<K>-ap-cvb0 (a rerun resumes); each refined model scored by document completion on the validation "
        "documents (cooccur --validation; the held-out ones stay unseen), with coherence (the paper's and NPMI), "
        "dissimilarity and C's eigenvalues. Recommends the smallest K whose validation log likelihood is within "
        "one paired standard error of the best.",
    )
    _add_root(p)
    p.add_argument("--topics", type=_topics_spec, required=True, metavar="A:B|A:B:STEP|K1,K2,...",
                   help="the candidate K: A:B is 10 values from A to B spaced evenly on a log scale (5:100 gives "
                        "5,7,10,14,19,26,37,51,72,100)")
    p.add_argument("--iterations", type=int, default=CHOOSE_K_ITERATIONS,
                   help=f"AP cycles of each fit (default: {CHOOSE_K_ITERATIONS})")
    p.add_argument("--sweeps", type=int, default=CHOOSE_K_SWEEPS,
                   help=f"CVB0 sweeps of each refine at most (default: {CHOOSE_K_SWEEPS})")
    p.add_argument("--seed", type=int, default=0, help="seed of each fit's eigensolver start (default: 0)")
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
        help="each document's topic composition under a model -> ROOT/doc_topics/MODEL/",
        description="Each document's topic weights under the model, one Dask task per row group: a refined "
        "(or Gibbs) model folds the document in by LDA's variational inference with its own document prior, a "
        "spectral model with the Dirichlet moment-matched to its A (measured better than least squares).",
    )
    _add_root(p)
    p.add_argument("--model", help="model name (required when ROOT holds several)")
    _add_cluster_options(p)

    p = _command(
        sub, "transform",
        help="topic compositions of new documents under a model -> OUTPUT (the run root is only read)",
        description="Read new documents in any format ingest reads, tokenised as ROOT's corpus was, map their "
        "words to the model's vocabulary (others are counted as unknown), and write each document's topic "
        "weights: folded in under the model's topics and document prior (a spectral model's: moment-matched "
        "to its A). Writes a directory of Parquet parts (doc_id, n_tokens, n_unknown, topics) atomically.",
    )
    _add_root(p)
    p.add_argument("inputs", metavar="INPUT", nargs="+", help="input files or directories (as for ingest)")
    p.add_argument("--model", help="model name (required when ROOT holds several)")
    p.add_argument("--output", required=True, metavar="PATH",
                   help="directory to write, outside ROOT (part-NNNNN.parquet and _infer.json)")
    p.add_argument("--format", choices=INPUT_FORMATS,
                   help="input format (default: the format ROOT's corpus was ingested from)")
    _add_cluster_options(p)

    p = _command(
        sub, "export",
        help="a model's topic-word probabilities, labels, anchors and A as CSV, Parquet or JSON",
        description="Write ROOT/export/<model>-<format>: topic_words (topic, rank, word_id, word, probability), "
        "topics (topic, label, anchor_word_id, anchor, prior) and topic_topic (A), as CSV or Parquet files or "
        "one model.json. Words appear as the corpus labels them (film titles stay one quoted CSV field).",
    )
    _add_root(p)
    p.add_argument("--model", help="model name (required when ROOT holds several)")
    p.add_argument("--format", choices=("csv", "parquet", "json"), default="csv", help="(default: csv)")
    p.add_argument("--top", type=int, metavar="N", help="words per topic (default: all)")
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
        sub, "topics",
        help="input -> refined topics in one command (ingest, cooccur, fit, refine on one root; resumable)",
        description="Run ingest, cooccur (5% of the documents kept for refine's validation stop), fit (AP, "
        "with the cycles and the anchor vocabulary of a fit that refine follows: --anchor-words auto) and refine "
        "(its default method: CVB0, and the sampled method too on a corpus of short documents) on ROOT, as four "
        "commands would, and "
        "print the refined topics. Rerun, it skips every stage whose inputs and parameters are unchanged "
        "(like `jsmf run`).",
    )
    p.add_argument("inputs", metavar="INPUT", nargs="+", help="input files or directories (as for ingest)")
    p.add_argument("--topics", dest="n_topics", type=parameter("fit", "n_topics").parse, required=True, metavar="K",
                   help="number of topics")
    p.add_argument("--out", dest="root", required=True, metavar="ROOT", help="run root (a local path or URL)")
    p.add_argument("--format", choices=INPUT_FORMATS, default="auto", help="as for ingest (default: auto)")
    p.add_argument("--encoding", default="utf-8", help="as for ingest (default: utf-8)")
    p.add_argument("--labels", metavar="FILE",
                   help="as for ingest: CSV (or .tsv) of item id, then its label (e.g. MovieLens movies.csv); the "
                   "topics show the labels instead of bare ids")
    p.add_argument("--vocab-size", type=parameter("ingest", "vocab_size").parse,
                   metavar="N", help=f"words kept by tf-idf rank (default: {TOPICS_VOCAB_SIZE}, or every word of a "
                   "corpus with fewer)")
    p.add_argument("--heldout", type=parameter("cooccur", "heldout").parse, metavar="FRACTION",
                   help="also hold out this fraction of the documents for `jsmf evaluate` (default: none)")
    p.add_argument("--iterations", type=parameter("fit", "iterations").parse, metavar="N",
                   help=f"AP cycles (default: {REFINED_FIT_ITERATIONS_SMALL_K} up to {REFINED_FIT_SMALL_K} topics, "
                   f"{REFINED_FIT_ITERATIONS} above: refine corrects the topics)")
    p.add_argument("--anchor-words", type=parameter("fit", "anchor_words").parse, metavar="n",
                   help="AP and the anchors on the n words of highest tf-idf only (default: auto, max(1000, 20 K) "
                   "words below 10,000 documents, else every word; a number at least the vocabulary's size fits "
                   "every word)")
    p.add_argument("--start", choices=parameter("refine", "start").choices, metavar="{auto,spectral,chain,both}",
                   help="where refine's runs start, as for refine (default: auto); both: from the spectral model "
                   "and from a chain's topics, the validation documents choosing (slower; better on some real text)")
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
    p.add_argument("--prior", choices=SYNTH_PRIORS, default="dirichlet",
                   help="document-topic prior: dirichlet (default) or a correlated logistic normal")
    p.add_argument("--alpha", type=float, default=0.1, help="Dirichlet concentration (default: 0.1)")
    p.add_argument("--topics-from", choices=SYNTH_TOPICS_FROM, default="separable",
                   help="separable (default): each topic has a planted anchor word, which flatters anchor methods; "
                   "dirichlet: each topic drawn from a symmetric Dirichlet(--beta) over the vocabulary, as plain LDA")
    p.add_argument("--beta", type=_positive_float, default=0.05,
                   help="concentration of --topics-from dirichlet (default: 0.05)")
    p.add_argument("--row-group-size", type=int,
                   help="documents per Parquet row group (default: 10000, or fewer so that the corpus has 8 of at "
                        "least 500)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing synthetic corpus")
    parser.command_parsers = dict(sub.choices)  # each command's own parser (its usage for its errors)
    return parser


