"""The ``jsmf`` command: parse arguments, pick the cluster, run a stage, report.

This is the only module that configures logging and prints. A
:class:`~jsmf_dask.exceptions.JSMFError` becomes one line on stderr and exit
status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence

from jsmf_dask.cli_parser import EXAMPLES, build_parser
from jsmf_dask.cli_progress import print_line, stage_progress
from jsmf_dask.cli_words import cli_words, user_words
from jsmf_dask.exceptions import JSMFError
from jsmf_dask.parameters import stage_parameters

__all__ = ["main", "build_parser", "EXAMPLES"]

log = logging.getLogger("jsmf_dask")


# Each command imports its stage when it runs: `jsmf --help` and argument errors load no numpy, dask or zarr.


def _run_ingest(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.io.sources import RatingsColumns
    from jsmf_dask.pipeline.ingest import ingest

    report = ingest(
        args.root,
        args.inputs,
        format=args.format,
        vocab=args.vocab,
        doc_ids=args.doc_ids,
        text_column=args.text_column,
        id_column=args.id_column,
        stopwords=None if args.no_stopwords else args.stopwords,
        **_stage_kwargs(args, "ingest"),
        ratings_columns=RatingsColumns(args.user_column, args.item_column, args.rating_column),
        delimiter=args.delimiter,
        docs_per_shard=args.docs_per_shard,
        row_group_size=args.row_group_size,
        overwrite=args.overwrite,
        append=args.append,
        encoding=args.encoding,
        labels=args.labels,
        strip=args.strip,
        header=args.header,
    )
    return report.lines()


def _run_cooccur(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.pipeline.cooccur import cooccur

    def on_pass(n: int, seconds: float) -> None:
        if not args.quiet:
            print(f"cooccur: pass {n} over the corpus (product with C), {seconds:.1f} s", file=sys.stderr, flush=True)

    return cooccur(args.root, **_stage_kwargs(args, "cooccur"), tile_size=args.tile_size, codoc=not args.no_codoc,
                   overwrite=args.overwrite, update=args.update, on_pass=on_pass).lines()


def _stage_kwargs(args: argparse.Namespace, stage: str) -> dict:
    """The options of ``stage``'s parameters that were given (the others keep the stage's defaults)."""
    return {p.name: getattr(args, p.name) for p in stage_parameters(stage) if getattr(args, p.name) is not None}


def _run_fit(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.io.model_store import topics_path
    from jsmf_dask.pipeline.anchor_floor import floor_line
    from jsmf_dask.pipeline.fit import fit

    with stage_progress(args.quiet) as progress:
        result = fit(args.root, **_stage_kwargs(args, "fit"), name=args.name, warm_start=args.warm_start,
                     overwrite=args.overwrite, on_cycle=progress.get("on_cycle"))
    head = [f"model {result.name}: {args.n_topics} topics, rectifier {result.attrs['params']['rectifier']}, "
            f"{result.n_iter} iterations, "
            f"{result.attrs['path']['chosen']} path ({result.attrs['path']['reason']}); "
            f"written to {result.url} and {topics_path(args.root, result.name)}"]
    if "anchor_floor" in result.attrs:
        head.append(floor_line(result.attrs["anchor_floor"], args.n_topics))
    return head + result.lines()


#: What ``jsmf refine`` adds for a store without validation documents (``cooccur`` run without ``--validation``,
#: which `jsmf topics`, `jsmf run` and the estimator pass). Measured (session 33, the benchmarks README): on
#: MovieLens at K = 50 such a refine ran to its 50 sweeps and ended 3.7% ± 1.1% above the default route's
#: held-out perplexity (CVB0 overfits 610 users), Reuters at K = 5 3.6% ± 1.9%; the others moved within ±1.1%.
NO_VALIDATION_NOTE = ("note: without validation documents refine runs to --tol or --sweeps, and on a small corpus "
                      "the sweeps can overfit; `jsmf cooccur ROOT --validation 0.05` (what `jsmf topics` runs) lets it "
                      "stop when they stop improving")


def _run_refine(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.io.model_store import topics_path
    from jsmf_dask.pipeline.refine import refine
    from jsmf_dask.pipeline.refine_candidates import choice_line, stored_route
    from jsmf_dask.pipeline.refine_start import kept_state

    result = refine(args.root, model=args.model, **_stage_kwargs(args, "refine"), name=args.name,
                    heldout=args.heldout, overwrite=args.overwrite, on_sweep=None if args.quiet else print_line)
    valid = result.attrs["validation"]
    if valid["final_perplexity"] is not None:
        score = f"validation perplexity {valid['start_perplexity']:.1f} -> {valid['final_perplexity']:.1f}"
    elif valid["n_docs"]:
        score = f"{valid['n_docs']} validation documents"
    else:
        score = "validation off" if args.validation == 0 else "no validation documents in the store"
    if (kept := kept_state(result.attrs, result.n_iter)) is not None:  # sweeps after the validation's best undone
        score += f"; {cli_words(kept)}"
    if result.attrs["averaged_states"] > 1:
        score += f"; the mean of its last {result.attrs['averaged_states']} states"
    if (chosen := choice_line(result.attrs)) is not None:
        score += f"; {chosen}"
    if result.attrs.get("refit"):
        score += (f"; then {result.attrs['refit']['sweeps']} sweep(s) on from it with the validation "
                  "documents in training (refit)")
    head = [f"model {result.name}: {result.B.shape[1]} topics refined from {result.source} by {result.n_iter} "
            f"sweep(s) of {stored_route(result.attrs)} (stopped by {result.attrs['stopped']}; {score}); "
            f"written to {result.url} and {topics_path(args.root, result.name)}"]
    if not valid["n_docs"] and args.validation is None:
        head.append(NO_VALIDATION_NOTE)
    return head + result.lines() + ["", f"changes from {result.source} (top-10 words gained, lost):"] + result.changes()


def _run_synth(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.pipeline.synth import synth

    return synth(
        args.root, n_docs=args.docs, n_words=args.vocab, n_topics=args.topics, doc_length=args.doc_length,
        seed=args.seed, prior=args.prior, alpha=args.alpha, topics_from=args.topics_from, beta=args.beta,
        row_group_size=args.row_group_size,
        overwrite=args.overwrite,
    ).lines()


def _run_evaluate(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.pipeline.evaluate import METRICS, evaluate, metrics_path

    out = evaluate(args.root, models=args.models, heldout=args.heldout, sampled_fold_in=args.sampled_fold_in)
    lines = [f"metrics written to {metrics_path(args.root)}",
             f"{'model':<16} {'against':<12} " + " ".join(f"{m:>13}" for m in METRICS)]
    for name, entry in out["models"].items():
        for label in ("original_C", "rectified_C"):
            if label in entry:
                vals = [entry[label].get(m) for m in METRICS]
                lines.append(f"{name:<16} {label:<12} " + " ".join(
                    f"{'n/a':>13}" if v is None else f"{v:>13.4g}" for v in vals))
    if out.get("heldout_fraction"):
        lines.append(f"held-out perplexity (document completion, fraction {out['heldout_fraction']}; ± its standard "
                     "error; gap: log likelihood per token below the best model's, ± the paired standard error):")
        for name, entry in out["models"].items():
            lines.append(f"{name:<16} {_heldout_line(entry.get('heldout', {}))}")
        sampled = {name: entry["heldout"]["sampled_fold_in"] for name, entry in out["models"].items()
                   if "sampled_fold_in" in entry.get("heldout", {})}
        if sampled:
            lines.append("the same, theta of each document's observed half the exact posterior mean by Gibbs sampling "
                         "(the sampled fold-in):")
            lines += [f"{name:<16} {_heldout_line(held)}" for name, held in sampled.items()]
    return lines


def _heldout_line(held: dict) -> str:
    """One model's held-out perplexity, its standard error and its paired gap to the best model."""
    value = held.get("perplexity")
    if value is None:
        return f"n/a: {held.get('notes')}"
    se = held.get("perplexity_se")
    line = f"{value:.1f}" + (f" ± {se:.1f}" if se is not None else "")
    if held.get("best_model") is not None and held.get("loglik_gap_to_best") is not None:
        gap, gap_se = held["loglik_gap_to_best"], held.get("loglik_gap_se")
        line += ("   best" if gap == 0 and gap_se == 0 else
                 f"   gap {gap:.4f}" + (f" ± {gap_se:.4f}" if gap_se is not None else ""))
    return line


def _run_compare(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.pipeline.compare import compare

    result = compare(args.root, topics=args.topics, methods=args.methods, iterations=args.iterations,
                     gibbs_iterations=args.gibbs_iterations, gibbs_chains=args.gibbs_chains, seed=args.seed)
    return [result.markdown(), f"written {result.csv_path}, {result.markdown_path}, {result.figure_path}"]


def _run_choose_k(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.pipeline.choose_k import choose_k

    return choose_k(args.root, topics=args.topics, iterations=args.iterations, sweeps=args.sweeps, seed=args.seed,
                    on_k=None if args.quiet else print_line).lines()


def _run_report(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.pipeline.ldavis import check_ldavis, export_ldavis
    from jsmf_dask.pipeline.report import report, report_model

    shown = None
    if args.ldavis:  # pyLDAvis and the model's document weights checked before any work: report.html stays
        shown = args.model if args.model is not None else report_model(args.root)
        check_ldavis(args.root, shown)
    path = report(args.root, model=args.model, baseline=args.baseline)
    lines = [f"report: {path}"]
    if shown is not None:
        lines.append(f"pyLDAvis view of {shown}: {export_ldavis(args.root, model=shown)}")
    return lines


def _run_transform(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.pipeline.transform import transform

    return transform(args.root, args.inputs, output=args.output, model=args.model, format=args.format,
                     overwrite=args.overwrite).lines()


def _run_export(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.pipeline.export import export

    return export(args.root, model=args.model, format=args.format, top=args.top, overwrite=args.overwrite).lines()


def _run_infer(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.pipeline.infer import infer

    return infer(args.root, model=args.model, overwrite=args.overwrite).lines()


def _run_run(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.pipeline.run import run

    with stage_progress(args.quiet) as progress:
        outcomes = run(args.run_config, force=args.force, log=lambda line: print(line, flush=True), **progress)
    lines = []
    for o in outcomes:
        lines.extend(o.lines)
    ran = sum(o.status == "ran" for o in outcomes)
    return lines + [f"run {args.run_config.path}: {ran} stage(s) ran, {len(outcomes) - ran} up to date; "
                    f"outputs under {args.run_config.root}"]


def _run_topics(args: argparse.Namespace) -> list[str]:
    from jsmf_dask.io.model_store import topics_path
    from jsmf_dask.pipeline.refine import default_refined_name
    from jsmf_dask.pipeline.run import run

    with warnings.catch_warnings():
        if args.vocab_size is None:  # the default is a cap: a smaller corpus keeps every word, and nobody asked
            warnings.filterwarnings("ignore", r"vocab_size=\d+ exceeds the \d+ eligible words", UserWarning)
        with stage_progress(args.quiet) as progress:
            outcomes = run(args.run_config, force=args.force,
                           log=None if args.quiet else lambda line: print(line, file=sys.stderr, flush=True),
                           **progress)
    refined = default_refined_name(f"k{args.n_topics}-ap")
    lines = [line for o in outcomes if o.stage.startswith("refine-") for line in o.lines]
    if not lines:  # up to date: the topics as written
        from jsmf_dask.io.fs import get_fs

        fs, path = get_fs(topics_path(args.root, refined))
        lines = fs.read_text(path, encoding="utf-8").splitlines()
    ran = sum(o.status == "ran" for o in outcomes)
    return lines + [f"topics of {refined} in {topics_path(args.root, refined)}; {ran} stage(s) ran, "
                    f"{len(outcomes) - ran} up to date (rerun to resume; --force to redo)"]


_COMMANDS = {"ingest": _run_ingest, "cooccur": _run_cooccur, "fit": _run_fit, "refine": _run_refine,
             "synth": _run_synth,
             "evaluate": _run_evaluate, "compare": _run_compare, "choose-k": _run_choose_k,
             "report": _run_report, "infer": _run_infer,
             "transform": _run_transform, "export": _run_export, "run": _run_run, "topics": _run_topics}
_LOCAL_ONLY = {"synth"}


def _warning_printer(args: argparse.Namespace) -> Callable[..., None]:
    """:func:`warnings.showwarning` for ``jsmf <args.command>``: one line on stderr, in the user's words."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"jsmf: warning: {user_words(str(message), args)}", file=sys.stderr)

    return show


#: Commands that read an existing run root (the others create one, or read a config).
_READS_ROOT = {"cooccur", "fit", "refine", "evaluate", "compare", "choose-k", "report", "infer", "transform", "export"}


def _missing_local_path(args: argparse.Namespace) -> str | None:
    """What is missing among the local paths the command reads, in ``jsmf: error:`` words, or None.

    Only plain local paths are checked (``os.path``, before numpy, dask or zarr
    load); URLs are left to the stage, which names what it expected.
    """
    def missing(path: str) -> bool:
        return "://" not in path and not os.path.exists(path)

    if args.command in _READS_ROOT and missing(args.root):
        return f"{args.root}: no such run root; `jsmf ingest {args.root} INPUT` creates one"
    if args.command in ("ingest", "topics", "transform"):
        for path in (*args.inputs, *(getattr(args, key, None) for key in ("vocab", "doc_ids", "labels"))):
            if path and missing(path):
                return f"{path}: no such file or directory"
    if args.command == "run" and missing(args.config):
        return f"{args.config}: no such config file"
    return None


#: The path arguments made absolute before any stage sees them (a worker's working directory is not ours).
_PATH_ARGS = ("root", "output", "vocab", "doc_ids", "labels")


def _absolute_paths(args: argparse.Namespace) -> None:
    """Local paths of ``args`` as absolute paths; URLs unchanged. A task on a worker started in another directory
    then opens what the user meant (a relative root would name a path under the worker's own directory)."""
    def absolute(path):
        return path if path is None or "://" in path else os.path.abspath(path)

    for key in _PATH_ARGS:
        if isinstance(getattr(args, key, None), str):
            setattr(args, key, absolute(getattr(args, key)))
    if getattr(args, "inputs", None):
        args.inputs = [absolute(p) for p in args.inputs]
    if getattr(args, "stopwords", "english") != "english":  # a file (else the built-in list's name)
        args.stopwords = absolute(args.stopwords)


def _worker_paths(args: argparse.Namespace) -> list[str]:
    """The local paths every worker must see: the inputs, and the run root (its nearest existing folder where the
    command creates it)."""
    config = getattr(args, "run_config", None)
    if config is not None:
        root = config.root
        inputs = list((config.stage("ingest") or {}).get("inputs", []))
    else:
        root, inputs = args.root, list(getattr(args, "inputs", None) or [])
    if "://" not in root:
        while not os.path.exists(root) and os.path.dirname(root) != root:  # a root this command creates
            root = os.path.dirname(root)
    return [root, *inputs]


def _quiet_libraries(level: int, *, verbose: bool, quiet: bool) -> None:
    """Set the log levels of distributed and the libraries under it.

    --quiet: results only, so not even distributed's warnings at shutdown ("Worker process still alive ...").
    The client's errors (a lost scheduler's reconnection attempts, with tracebacks; the gather abandoned when a
    frozen one is given up on) reach the command as exceptions that it reports in one line itself; -v shows them.
    distributed is imported only by a command that starts or joins a cluster (0.2 s otherwise spent for nothing),
    and importing it sets its loggers from dask's ``logging`` config: the levels go there too, so that they hold
    whenever it is imported.
    """
    import dask

    shown = logging.ERROR if quiet else logging.WARNING
    levels = {"distributed": shown, "distributed.client": logging.CRITICAL, "asyncio": logging.CRITICAL,
              "bokeh": logging.ERROR, "tornado": logging.ERROR, "tornado.application": logging.ERROR}
    levels = {name: level if verbose else quiet_level for name, quiet_level in levels.items()}
    dask.config.set({"logging": {**dask.config.get("logging", {}), **levels}})
    for name, value in levels.items():
        logging.getLogger(name).setLevel(value)


def _root_flag_hint(command: str, extra: Sequence[str]) -> str:
    """What to write instead when a stage command got ``jsmf topics``'s ``--out ROOT``: its root is positional."""
    if not any(arg == "--out" or arg.startswith("--out=") for arg in extra):
        return ""
    return (f" (the run root is the first argument of `jsmf {command}`: jsmf {command} ROOT ...; "
            "--out ROOT is `jsmf topics`'s)")


def main(argv: Sequence[str] | None = None, *, exit_when_hung: bool = False) -> int:
    """Entry point of ``jsmf``; returns the exit status.

    ``exit_when_hung`` (the ``jsmf`` executable's): a command that gave up on a frozen scheduler
    (``--heartbeat-timeout``) but is still running :data:`~jsmf_dask._heartbeat.HUNG_AFTER` seconds later (its
    exit waits on that scheduler) ends the process with status 1, having said why.
    """
    said = threading.Event()  # an error line was printed (what a hung process's last resort need not repeat)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # the command's own usage, not the top level's
        parser.command_parsers[args.command].error(f"unrecognized arguments: {' '.join(extra)}"
                                                   f"{_root_flag_hint(args.command, extra)}")
    if getattr(args, "workers", None) is not None and args.workers < 1:
        print(f"jsmf: error: --workers must be >= 1, got {args.workers}", file=sys.stderr)
        return 2
    if (problem := _missing_local_path(args)) is not None:
        print(f"jsmf: error: {problem}", file=sys.stderr)
        return 1
    _absolute_paths(args)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    _quiet_libraries(level, verbose=bool(args.verbose), quiet=getattr(args, "quiet", False))
    warnings.showwarning = _warning_printer(args)
    try:
        import dask

        from jsmf_dask.cluster import connect
        from jsmf_dask.pipeline.run_config import load_run_config

        if args.command == "run":  # validate the config before starting any cluster; it may name one
            args.run_config = load_run_config(args.config)
            args.scheduler = args.scheduler or args.run_config.scheduler
            args.workers = args.workers or args.run_config.workers
            args.memory_limit = args.memory_limit or args.run_config.memory_limit
        if args.command == "topics":
            from jsmf_dask.parameters import TOPICS_VOCAB_SIZE
            from jsmf_dask.pipeline.run_config import topics_config

            args.run_config = topics_config(
                args.inputs, args.root, args.n_topics, heldout=args.heldout, iterations=args.iterations,
                anchor_words=args.anchor_words, start=args.start,
                ingest={"vocab_size": args.vocab_size or TOPICS_VOCAB_SIZE, "format": args.format,
                        "encoding": args.encoding, **({"labels": args.labels} if args.labels else {})})
        if args.command in _LOCAL_ONLY:
            lines = _COMMANDS[args.command](args)
        else:
            with dask.config.set({"jsmf.progress": not args.quiet}), connect(
                args.scheduler,
                n_workers=args.workers,
                memory_limit=args.memory_limit,
                connect_timeout=args.connect_timeout,
                wait_for_workers=args.wait_for_workers,
                worker_timeout=args.worker_timeout,
                heartbeat_timeout=args.heartbeat_timeout,
                on_hung=_hung_ender(said) if exit_when_hung else None,
                lazy=True,  # the stage checks its inputs first: a bad one fails without starting a cluster
                on_dashboard=None if args.quiet else lambda link: print(f"dask dashboard: {link}", file=sys.stderr),
                on_engine=None if args.quiet else lambda line: print(line, file=sys.stderr),
            ) as client:
                if client is not None:  # an existing scheduler: its workers must see our paths
                    from jsmf_dask.cluster import check_worker_paths

                    check_worker_paths(client, _worker_paths(args))
                lines = _COMMANDS[args.command](args)
    except JSMFError as err:
        print(f"jsmf: error: {user_words(str(err), args)}", file=sys.stderr)
        said.set()
        return 1
    except KeyboardInterrupt:
        print("jsmf: interrupted", file=sys.stderr)
        return 130
    except BaseException as err:  # distributed's cancellations are BaseExceptions (asyncio.CancelledError)
        from jsmf_dask.cli_errors import one_line

        message = one_line(err, args)
        if message is None:
            raise
        print(f"jsmf: error: {message}", file=sys.stderr)
        said.set()
        return 1
    for line in lines:
        print(line)
    return 0


def _hung_ender(said: threading.Event) -> Callable[[str], None]:
    """``connect``'s ``on_hung`` for the executable: say the give-up message unless an error line was said
    (``said``), and end the process with status 1."""

    def end(message: str) -> None:
        if not said.is_set():
            print(f"jsmf: error: {cli_words(message)}", file=sys.stderr)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
            sys.stdout.flush()
        os._exit(1)

    return end


def console_main() -> None:
    """The ``jsmf`` executable: :func:`main`, then exit without the interpreter's teardown.

    Once a command has finished, the interpreter's teardown (freeing the module state of numba, zarr and
    pyarrow, collecting every object) takes another 0.3–0.6 s, about 5% of a small corpus's whole run. The
    exit handlers still run (clusters, temporary directories, logging) and the output is flushed; only the
    teardown is skipped. An exception that escapes :func:`main` ends the process the usual way.
    """
    import atexit

    status = main(exit_when_hung=True)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``jsmf … | head``): nothing more can be said
            pass
    os._exit(status)


if __name__ == "__main__":  # pragma: no cover
    console_main()
