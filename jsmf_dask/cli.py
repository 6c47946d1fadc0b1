"""The ``jsmf`` command: parse arguments, pick the cluster, run a stage, report.

This is the only module that configures logging and prints. A
:class:`~jsmf_dask.exceptions.JSMFError` becomes one line on stderr and exit
status 1.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Sequence

import dask

from jsmf_dask import __version__
from jsmf_dask.cluster import connect
from jsmf_dask.exceptions import JSMFError
from jsmf_dask.io.sources import RatingsColumns
from jsmf_dask.pipeline.cooccur import cooccur
from jsmf_dask.pipeline.ingest import FORMATS, ingest

__all__ = ["main", "build_parser"]

log = logging.getLogger("jsmf_dask")


def _add_cluster_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="Dask scheduler address (default: $DASK_SCHEDULER_ADDRESS, else a LocalCluster of worker "
        "processes sized to this machine); 'synchronous' or 'threads' run in this process",
    )
    g.add_argument("--workers", type=int, metavar="N", help="LocalCluster worker processes (default: one per core)")
    g.add_argument("--memory-limit", metavar="BYTES", help="LocalCluster memory per worker, e.g. 4GiB")
    g.add_argument("--quiet", action="store_true", help="no progress bars")
    g.add_argument("--overwrite", action="store_true", help="replace this stage's existing output")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``jsmf`` (one sub-command per stage)."""
    parser = argparse.ArgumentParser(
        prog="jsmf",
        description="Rectified Anchor Words topic inference on Dask (Lee, Bindel & Mimno 2015).",
    )
    parser.add_argument("--version", action="version", version=f"jsmf_dask {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "ingest",
        help="raw documents, bag of words, ratings or baskets -> curated Parquet corpus",
        description="Read raw input into ROOT/corpus (Parquet shards + vocab.parquet), curating the "
        "vocabulary by tf-idf as in the paper's experiments.",
    )
    p.add_argument("root", metavar="ROOT", help="run root: local path or fsspec URL")
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
    p.add_argument("--user-column", help="ratings: user column (default: first column)")
    p.add_argument("--item-column", help="ratings: item column (default: second column)")
    p.add_argument("--rating-column", help="ratings: rating column (default: third column)")
    p.add_argument("--delimiter", default=",", help="baskets: item separator (default: ,)")
    p.add_argument("--vocab-size", type=int, help="words kept by tf-idf rank (default: all)")
    p.add_argument("--min-doc-tokens", type=int, default=5, help="drop documents with fewer tokens (default: 5)")
    p.add_argument("--min-doc-words", type=int, default=3,
                   help="drop documents with fewer distinct words (default: 3)")
    p.add_argument("--docs-per-shard", type=int, help="documents per shard file (default: 50000)")
    p.add_argument("--row-group-size", type=int, help="documents per Parquet row group (default: 10000)")
    _add_cluster_options(p)

    p = sub.add_parser(
        "cooccur",
        help="corpus -> co-occurrence matrix C (ROOT/cooc.zarr)",
        description="Build the unbiased co-occurrence matrix C of the paper (eq. 1), with document "
        "frequencies D1 and co-document frequencies D2, tile by tile into ROOT/cooc.zarr.",
    )
    p.add_argument("root", metavar="ROOT")
    p.add_argument("--tile-size", type=int, help="edge of a tile of C (default: 2048)")
    p.add_argument("--no-codoc", action="store_true", help="skip D2 (co-document counts); halves the work")
    _add_cluster_options(p)
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
    )
    return report.lines()


def _run_cooccur(args: argparse.Namespace) -> list[str]:
    return cooccur(
        args.root, tile_size=args.tile_size, codoc=not args.no_codoc, overwrite=args.overwrite
    ).lines()


_COMMANDS = {"ingest": _run_ingest, "cooccur": _run_cooccur}


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"jsmf: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``jsmf``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("distributed", "bokeh", "tornado"):
        logging.getLogger(noisy).setLevel(level if args.verbose else logging.WARNING)
    warnings.showwarning = _show_warning
    for name, value in (("workers", args.workers),):
        if value is not None and value < 1:
            print(f"jsmf: error: --{name} must be >= 1, got {value}", file=sys.stderr)
            return 2
    try:
        with dask.config.set({"jsmf.progress": not args.quiet}):
            with connect(
                args.scheduler,
                n_workers=args.workers,
                memory_limit=args.memory_limit,
                on_dashboard=lambda link: print(f"dask dashboard: {link}", file=sys.stderr),
            ):
                lines = _COMMANDS[args.command](args)
    except JSMFError as err:
        print(f"jsmf: error: {err}", file=sys.stderr)
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
