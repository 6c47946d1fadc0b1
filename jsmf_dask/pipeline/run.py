"""``run``: every stage of a run from one config, skipping stages already committed from the same inputs.

Stages run in order ingest → cooccur → fit (each model) → refine (each refined
model) → evaluate → report → infer, each only if the config has its table. A nightly config appends
(``[ingest] append = true``), updates C (``[cooccur] update = true``) and refits
from the previous model (``warm_start``); because the ingest marker holds the
day's input files' hash, rerunning the same day never appends twice. A stage is skipped when its
marker (:mod:`jsmf_dask.io.markers`) holds the fingerprint it would be computed
from now — its parameters and its inputs (the input files' contents for
``ingest``, the upstream stages' fingerprints for the others) — and its output
exists; ``force=True`` redoes every stage. Each stage commits its output
atomically before its marker is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jsmf_dask._validation import check_topics_for_vocabulary
from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.fs import get_fs, join
from jsmf_dask.io.markers import fingerprint, input_digest, read_marker, write_marker
from jsmf_dask.io.model_store import chosen_model, model_path
from jsmf_dask.io.parquet import corpus_dir, read_vocabulary
from jsmf_dask.parameters import parameter, refined_fit_iterations
from jsmf_dask.pipeline.anchor_floor import floor_line
from jsmf_dask.pipeline.cooccur import cooccur
from jsmf_dask.pipeline.fit import fit
from jsmf_dask.pipeline.fit_model import default_name
from jsmf_dask.pipeline.ingest import ingest
from jsmf_dask.pipeline.ingest_inputs import uci_vocab_for
from jsmf_dask.pipeline.refine import default_refined_name, refine
from jsmf_dask.pipeline.refine_candidates import choice_line, stored_route
from jsmf_dask.pipeline.run_config import RunConfig, load_run_config

__all__ = ["StageOutcome", "run"]


@dataclass
class StageOutcome:
    """What happened to one stage of a run."""

    stage: str
    status: str  # 'ran' or 'skipped'
    seconds: float
    fingerprint: str
    lines: list[str]

    def line(self) -> str:
        what = "up to date, skipped" if self.status == "skipped" else f"ran in {self.seconds:.1f} s"
        return f"[{self.stage}] {what}"


def _exists(url: str) -> bool:
    fs, path = get_fs(url)
    return fs.exists(path)


_FIT_KEYS = {"topics": "n_topics"}


def _input_files(kwargs: dict[str, Any]) -> list[str]:
    """Every file ingest reads: the inputs, the labels, and the vocabulary beside a UCI docword file (or the one given)."""
    files = list(kwargs["inputs"])
    for extra in (kwargs.get("vocab"), kwargs.get("doc_ids"), kwargs.get("labels")):
        if extra:
            files.append(extra)
    if not kwargs.get("vocab"):
        files += [v for u in kwargs["inputs"] if "docword." in u and _exists(v := uci_vocab_for(u))]
    return files


def run(config: RunConfig | str, *, force: bool = False, log: Callable[[str], None] | None = None,
        on_cycle: Callable | None = None, on_sweep: Callable | None = None) -> list[StageOutcome]:
    """Run the stages of ``config`` (a :class:`RunConfig` or the path of a TOML file).

    Parameters
    ----------
    config : RunConfig or str
    force : bool, default=False
        Redo every stage even when its marker matches, and replace outputs no run of this root wrote
        (without it, such an output is an error: a config never silently replaces a user's work).
    log : callable, optional
        Called with one line as each stage starts and ends.
    on_cycle : callable, optional
        Passed to every ``fit`` stage (its AP or ENN cycles, :class:`~jsmf_dask.pipeline.fit_model.CycleRecord`).
    on_sweep : callable, optional
        Passed to every ``refine`` stage (its sweeps, :class:`~jsmf_dask.pipeline.refine_sweeps.SweepRecord`).

    Returns
    -------
    list of StageOutcome
    """
    cfg = config if isinstance(config, RunConfig) else load_run_config(config)
    root = cfg.root
    say = log or (lambda line: None)
    outcomes: list[StageOutcome] = []

    def stage(name: str, fp: str, output: str, params: dict[str, Any], action: Callable[[], list[str]], *,
              extends: bool = False) -> str:
        marker = read_marker(root, name)
        if not force and marker is not None and marker.get("fingerprint") == fp and _exists(output):
            outcomes.append(StageOutcome(name, "skipped", 0.0, fp, []))
            say(outcomes[-1].line())
            return fp
        if not force and marker is None and not extends and _exists(output):
            raise StoreError(f"{output}: exists, but no `jsmf run` of this root wrote it (stage {name!r} has no "
                             "record): rerun with --force to replace it, or give the config another root")
        say(f"[{name}] running")
        t0 = time.perf_counter()
        lines = action()
        write_marker(root, name, fp, params)
        outcomes.append(StageOutcome(name, "ran", time.perf_counter() - t0, fp, lines))
        say(outcomes[-1].line())
        return fp

    def upstream(name: str) -> str:
        """The fingerprint of a stage this config does not run: its marker's, if any."""
        marker = read_marker(root, name)
        return marker["fingerprint"] if marker else f"unmanaged:{name}"

    ingest_fp = upstream("ingest")
    if (params := cfg.stage("ingest")) is not None:
        kwargs = dict(params)
        if kwargs.get("stopwords") is False:
            kwargs["stopwords"] = None
        digests = [input_digest(u) for u in _input_files(kwargs)]
        ingest_fp = stage("ingest", fingerprint("ingest", kwargs, digests), join(root, "corpus"), kwargs,
                          lambda: ingest(root, overwrite=not kwargs.get("append"), **kwargs).lines(),
                          extends=bool(kwargs.get("append")))
    fits = cfg.stage("fit") or []
    if fits and cfg.stage("cooccur") is not None:
        # K against the vocabulary before C is built (at scale, cooccur is the long stage)
        n_words = read_vocabulary(corpus_dir(root)).num_rows
        for table in fits:
            check_topics_for_vocabulary(table["topics"], n_words)
    cooc_fp = upstream("cooccur")
    if (params := cfg.stage("cooccur")) is not None:
        cooc_fp = stage("cooccur", fingerprint("cooccur", params, ingest_fp), join(root, "cooc.zarr"), params,
                        lambda: cooccur(root, overwrite=not params.get("update"), **params).lines(),
                        extends=bool(params.get("update")))
    fit_fps: dict[str, str] = {}
    refined = {table["model"] for table in cfg.stage("refine") or []}
    for params in fits:
        kwargs = {_FIT_KEYS.get(k, k): v for k, v in params.items()}
        compressed = (cfg.stage("cooccur") or {}).get("rank") is not None
        name = kwargs.setdefault("name", default_name(kwargs["n_topics"],
                                                      kwargs.get("rectifier", "enn" if compressed else "ap")))
        if name in refined:  # refine corrects the topics: the fit needs fewer cycles, and AP only the anchor words
            kwargs.setdefault("iterations", refined_fit_iterations(kwargs["n_topics"]))
            kwargs.setdefault("anchor_words", "auto")  # every word where the fit cannot take a vocabulary

        def fit_action(kwargs=kwargs) -> list[str]:
            result = fit(root, overwrite=True, on_cycle=on_cycle, **kwargs)
            floor = result.attrs.get("anchor_floor")
            return [f"model {result.name}: {result.n_iter} iterations",
                    *([floor_line(floor, kwargs["n_topics"])] if floor else []), *result.lines()]

        fit_fps[name] = stage(f"fit-{name}", fingerprint("fit", kwargs, cooc_fp), model_path(root, name), kwargs,
                              fit_action)
    for params in cfg.stage("refine") or []:
        kwargs = dict(params)
        name = kwargs.setdefault("name", default_refined_name(
            kwargs["model"], kwargs.get("method", parameter("refine", "method").default)))
        source_fp = fit_fps.get(kwargs["model"]) or upstream(f"fit-{kwargs['model']}")

        def refine_action(kwargs=kwargs) -> list[str]:
            result = refine(root, overwrite=True, on_sweep=on_sweep, **kwargs)
            refit = result.attrs.get("refit")
            again = f", then {refit['sweeps']} more with the validation documents in training (refit)" if refit else ""
            if (chosen := choice_line(result.attrs)) is not None:
                again += f"; {chosen}"
            return [f"model {result.name}: refined from {result.source} by {result.n_iter} sweep(s) of "
                    f"{stored_route(result.attrs)}{again}", *result.lines()]

        fit_fps[name] = stage(f"refine-{name}", fingerprint("refine", kwargs, ingest_fp, cooc_fp, source_fp),
                              model_path(root, name), kwargs, refine_action)
    # the later stages' modules are imported only by a config that has them (0.2 s of imports otherwise)
    if (params := cfg.stage("evaluate")) is not None:
        from jsmf_dask.pipeline.evaluate import evaluate, metrics_path

        fp = fingerprint("evaluate", params, cooc_fp, fit_fps)
        stage("evaluate", fp, metrics_path(root), params,
              lambda: [f"metrics of {', '.join(evaluate(root, **params)['models'])}"])
    if (params := cfg.stage("report")) is not None:
        from jsmf_dask.pipeline.report import report, report_dir

        fp = fingerprint("report", params, cooc_fp, fit_fps)
        stage("report", fp, join(report_dir(root), "report.html"), params,
              lambda: [f"report: {report(root, **params)}"])
    if (params := cfg.stage("infer")) is not None:
        from jsmf_dask.pipeline.infer import doc_topics_path, infer

        fp = fingerprint("infer", params, ingest_fp, fit_fps)
        stage("infer", fp, doc_topics_path(root, chosen_model(root, params.get("model"))), params,
              lambda: infer(root, overwrite=True, **params).lines())
    return outcomes
