"""Every user-facing algorithm parameter of ``ingest``'s curation, ``cooccur``, ``fit`` and ``refine``, in one table.

Each :class:`Parameter` holds a parameter's name, type, default, range and
help text. From this table the ``jsmf`` command line builds its options and
their help (:func:`cli_options`), the estimator checks its constructor
arguments (:meth:`Parameter.check`), and the tests check that the Python
functions' signatures, the estimator's and ``jsmf run``'s config keys agree
with it. Execution tuning (tile sizes, shard sizes, progress bars) is not
here: it lives in ``jsmf.yaml`` (:mod:`jsmf_dask.config`).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace
from typing import Any

from jsmf_dask._validation import check_int, check_option
from jsmf_dask.exceptions import InvalidParameterError

__all__ = ["Parameter", "PARAMETERS", "parameter", "stage_parameters", "cli_options", "INPUT_FORMATS",
           "STRIPS", "SYNTH_PRIORS", "SYNTH_TOPICS_FROM", "compare_methods", "REFINED_FIT_ITERATIONS", "refined_fit_iterations", "AUTO_ANCHOR_WORDS_PER_TOPIC", "AUTO_ANCHOR_WORDS_MIN", "AUTO_ANCHOR_WORDS_MAX_DOCS", "auto_anchor_words", "CHOOSE_K_ITERATIONS", "CHOOSE_K_SWEEPS", "CHOOSE_K_EIG_TOL", "TOPICS_VOCAB_SIZE",
           "CONNECT_TIMEOUT", "HEARTBEAT_TIMEOUT", "WORKER_TIMEOUT", "WEIGHTINGS", "DEFAULT_WEIGHTING"]

#: AP/ENN cycles of a fit that ``refine`` corrects afterwards (``jsmf run`` when a refine table names the
#: fit, ``jsmf topics``, the estimator), in place of the paper's 150 where the spectral model is the result:
#: :func:`refined_fit_iterations`. Measured by ``pipelines/benchmarks/cycles.py`` (held-out perplexity of the
#: refined model against 150 cycles): at K = 20, 20 cycles are within +0.1% on all six corpora measured (the
#: shipped and plain-LDA ones; MovieLens −0.6%), as good as 50 (whose spread is −0.2…+0.2%); at K = 50, 20
#: cycles were 2% worse than 50 on MovieLens (+0.8% against −1.2%), so above K = 20 the fit keeps 50.
#: No tolerance stops it earlier (measured and rejected, sessions 16–17: the benchmarks README): AP's iterate
#: settles long before the topic–topic A read off it. On a 5-topic corpus AP's change fell to 6e-6 after 2
#: cycles, with the anchors and B of 20 cycles, but an A with two empty topics, which refine (then weighing
#: its start by A) could not revive. Refine's start now weighs topics by their shares of the words (session
#: 18), which that A cannot empty, but the tolerance stays off: at K = 20 the real corpora never reach 1e-4
#: within 20 cycles (only the plain-LDA ones would stop sooner), and at K = 50 it cost MovieLens 1%.
REFINED_FIT_ITERATIONS = 50
REFINED_FIT_ITERATIONS_SMALL_K = 20
REFINED_FIT_SMALL_K = 20


#: ``fit(anchor_words='auto')`` (what ``jsmf topics``, ``jsmf run`` and the estimator pass where refine follows):
#: AP and the anchors on the block of C of this many words per topic of highest tf·idf, at least
#: :data:`AUTO_ANCHOR_WORDS_MIN`, on corpora of fewer than :data:`AUTO_ANCHOR_WORDS_MAX_DOCS` documents (C's rows of
#: all but the commonest words are noise there); every word above. Measured (session 25, the benchmarks README,
#: refined held-out perplexity against every word, ± the paired error): MovieLens +0.32% ± 1.2% / −0.07% ± 0.6%
#: (K 20 / 50), Reuters −0.04% ± 1.8% / −4.6% ± 2.3%, NIPS papers +0.40% ± 0.34% / +0.03% ± 0.35%, NIPS bag of
#: words −0.33% ± 0.38% / −0.58% ± 0.32%, lda-3k +0.03% ± 0.05%, for a fit 3–20 times faster; at 20,000
#: documents +0.05% ± 0.02% and at 100,000 (K 50) +0.19% ± 0.01% with refine's sweeps doubled. Then, on a corpus
#: not chosen on (the NIPS papers as 9,118 documents of 600 words): −1.18% ± 0.27% / −1.12% ± 0.32%.
AUTO_ANCHOR_WORDS_PER_TOPIC = 20
AUTO_ANCHOR_WORDS_MIN = 1000
AUTO_ANCHOR_WORDS_MAX_DOCS = 10_000


def auto_anchor_words(n_topics: int, n_docs: int) -> int | None:
    """``fit(anchor_words='auto')`` of ``n_topics`` topics on a C of ``n_docs`` documents: the words of the
    anchor vocabulary, or None (every word). A vocabulary no larger is fitted on every word anyway."""
    if n_docs >= AUTO_ANCHOR_WORDS_MAX_DOCS:
        return None
    return max(AUTO_ANCHOR_WORDS_MIN, AUTO_ANCHOR_WORDS_PER_TOPIC * n_topics)


def refined_fit_iterations(n_topics: int) -> int:
    """AP/ENN cycles of a fit of ``n_topics`` topics that refine corrects afterwards (see above)."""
    return REFINED_FIT_ITERATIONS_SMALL_K if n_topics <= REFINED_FIT_SMALL_K else REFINED_FIT_ITERATIONS


#: ``choose-k``: AP cycles of each candidate K's spectral fit and CVB0 sweeps of its refine at most (it stops
#: earlier by the validation documents). Measured on the NIPS papers (K = 5…100, 10 values) and plain-LDA corpora
#: (K = 5, 10, 20): (50 cycles, 10 sweeps) 145 s, (10, 10) 70 s, (5, 5) 50 s, (1, 5) 43 s, every one with the same
#: picks (the true K on the synthetic corpora; on the NIPS papers the same lowest-perplexity, coherence and NPMI K)
#: and validation perplexities within 1.5% of each other. Session 16, with the K fitted two at a time: 5 cycles
#: 30.9 s, 2 cycles 25.5 s, the same picks and every K's validation perplexity within 0.4%. The models are for
#: choosing K: fit the chosen K with the default route.
CHOOSE_K_ITERATIONS = 2
CHOOSE_K_SWEEPS = 5
#: Relative residual of choose-k's one eigensolve of C (its scree plot, and every K's first AP projection,
#: which each fit's first solve refines to its own ``eig_tol``): 1e-4 takes 1.9 s where 1e-6 takes 3.0 s at
#: N = 5,000 for the top 101 (NIPS papers); an eigenvalue's error is of the order of the residual squared.
CHOOSE_K_EIG_TOL = 1e-4
#: ``jsmf topics``'s vocabulary size (words kept by tf-idf rank), where ``ingest`` keeps every word.
TOPICS_VOCAB_SIZE = 5000

#: The defaults of the command's cluster options and of :func:`jsmf_dask.cluster.connect`'s: seconds a scheduler
#: address has to complete the Dask handshake (``--connect-timeout``), to go without answering before the command
#: gives up (``--heartbeat-timeout``), and for its workers to register (``--worker-timeout``).
CONNECT_TIMEOUT = 10.0
HEARTBEAT_TIMEOUT = 60.0
WORKER_TIMEOUT = 300.0

#: ``ingest``'s input formats (``auto``: by file name and content).
INPUT_FORMATS = ("auto", "uci", "text", "ratings", "baskets")

#: How ``cooccur`` weighs each document's contribution to ``C``: once (``'documents'``, the paper's eq. 1) or by its
#: tokens (``'tokens'``); :mod:`jsmf_dask.kernels.cooccurrence` says what each means.
WEIGHTINGS = ("documents", "tokens")
#: A new store's weighting (an update keeps the store's). Measured (session 51, the benchmarks README): see
#: :data:`WEIGHTINGS`' section there.
DEFAULT_WEIGHTING = "tokens"
#: What ``ingest --strip`` removes from raw text before tokenising (:func:`jsmf_dask.io.sources.tokenize.strip_email`).
STRIPS = ("email",)
#: ``synth``'s document-topic priors and the ways it draws B's columns.
SYNTH_PRIORS = ("dirichlet", "correlated")
SYNTH_TOPICS_FROM = ("separable", "dirichlet")


@dataclass(frozen=True)
class Parameter:
    """One user-facing parameter.

    Attributes
    ----------
    stage : str
        The function it belongs to (``'fit'``, ``'refine'``).
    name : str
        Its keyword in the Python API (``fit(n_topics=...)``); the CLI flag is
        ``--name`` with dashes unless ``flag`` says otherwise.
    kind : {'int', 'count', 'float', 'choice', 'prior', 'priors', 'str'}
        ``count`` is an int or ``'auto'``; ``prior`` is a float > 0 or ``'auto'``; ``priors`` also a list of two or
        more distinct floats > 0 (candidates; on the command line separated by
        commas).
    default : object
        None where the default depends on the input (then ``default_text`` says how).
    help : str
        What it does (the CLI adds the default).
    choices : tuple
        For ``choice``.
    low, high : float, optional
        Inclusive bounds of a number (``low_open``: ``low`` excluded).
    flag : str, optional
    metavar : str, optional
    default_text : str, optional
        How the CLI states the default when it is not ``default`` itself.
    estimator : str, optional
        The :class:`~jsmf_dask.RectifiedAnchorWords` parameter that sets it, if any.
    required : bool
    nullable : bool
        None is a valid value with its own meaning (``refine(tol=None)``: no such stop).
    """

    stage: str
    name: str
    kind: str
    default: Any
    help: str
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    flag: str | None = None
    metavar: str | None = None
    default_text: str | None = None
    estimator: str | None = None
    required: bool = False
    nullable: bool = False

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def config_key(self) -> str:
        """Its key in a ``jsmf run`` config table: the flag's words (``topics`` for ``--topics``)."""
        return self.cli_flag[2:].replace("-", "_")

    def check(self, value: Any, owner: str, *, name: str | None = None) -> None:
        """Raise :class:`~jsmf_dask.exceptions.InvalidParameterError` unless ``value`` is valid (None is the
        default's stand-in where the default is None)."""
        name = name or self.name
        if value is None and (self.default is None or self.default_text is not None or self.nullable) \
                and not self.required:
            return
        if self.kind == "choice":
            check_option(value, name, owner, self.choices)
        elif self.kind == "count":
            if value == "auto":
                return
            try:
                check_int(value, name, owner, low=None if self.low is None else int(self.low))
            except InvalidParameterError:
                raise InvalidParameterError(f"The {name!r} parameter of {owner} must be {self.describe_range()}. "
                                            f"Got {value!r} instead.") from None
        elif self.kind == "int":
            check_int(value, name, owner, low=None if self.low is None else int(self.low),
                      high=None if self.high is None else int(self.high))
        elif self.kind == "priors" and isinstance(value, list | tuple):
            if len(value) < 2 or len(set(value)) < len(value):
                raise InvalidParameterError(f"The {name!r} parameter of {owner} lists candidates: it needs two or "
                                            f"more distinct values. Got {list(value)!r} instead.")
            for v in value:
                if v == "auto":
                    raise InvalidParameterError(f"The {name!r} parameter of {owner} lists candidates: 'auto' "
                                                f"(learned) cannot be one of them. Got {list(value)!r} instead.")
                try:
                    replace(self, kind="float").check(v, owner, name=name)
                except InvalidParameterError:
                    raise InvalidParameterError(f"The {name!r} parameter of {owner} must be "
                                                f"{self.describe_range()}. Got {list(value)!r} instead.") from None
        elif self.kind in ("float", "prior", "priors"):
            if self.kind in ("prior", "priors") and value == "auto":
                return
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and \
                (self.low is None or (value > self.low if self.low_open else value >= self.low)) and \
                (self.high is None or value <= self.high)
            if not ok:
                raise InvalidParameterError(f"The {name!r} parameter of {owner} must be {self.describe_range()}. "
                                            f"Got {value!r} instead.")

    def describe_range(self) -> str:
        """The valid values in words (for errors and help)."""
        if self.kind == "choice":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        what = {"int": "an int", "count": "'auto' or an int", "float": "a float", "prior": "'auto' or a float",
                "priors": "'auto', a float or a list of floats"}.get(self.kind, "a str")
        if self.low is not None and self.high is not None:
            return f"{what} in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"{what} {'>' if self.low_open else '>='} {self.low:g}"
        return what if self.high is None else f"{what} <= {self.high:g}"

    def parse(self, text: str) -> Any:
        """The CLI's reading of ``text`` (an :class:`argparse.ArgumentTypeError` names what was expected)."""
        if self.kind in ("prior", "priors", "count") and text == "auto":
            return "auto"
        try:
            if self.kind == "priors" and "," in text:
                value = [float(v) for v in text.split(",")]
            else:
                value = int(text) if self.kind in ("int", "count") else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.describe_range()}, got {text!r}") from None
        try:
            self.check(value, "jsmf")
        except InvalidParameterError:
            repeated = isinstance(value, list) and len(set(value)) < len(value)
            raise argparse.ArgumentTypeError(f"expected {self.describe_range()}, got {text!r}"
                                             f"{' (a value repeated: candidates are distinct)' if repeated else ''}"
                                             ) from None
        return value

    def help_text(self) -> str:
        """The help with its default, as the CLI shows it."""
        if self.required:
            return self.help
        default = self.default_text or (f"{self.default:g}" if isinstance(self.default, float) else
                                        str(self.default))
        return f"{self.help} (default: {default})"


PARAMETERS: tuple[Parameter, ...] = (
    # ------------------------------------------------------------------ ingest (the vocabulary's curation)
    Parameter("ingest", "vocab_size", "int", None, "words kept by tf-idf rank", low=1, metavar="N",
              default_text="all"),
    Parameter("ingest", "min_doc_tokens", "int", None, "drop documents with fewer tokens", low=1, metavar="T",
              default_text="5 for text and bag of words, 2 for ratings and baskets"),
    Parameter("ingest", "min_doc_words", "int", None, "drop documents with fewer distinct words", low=1,
              metavar="W", default_text="3 for text and bag of words, 2 for ratings and baskets"),
    Parameter("ingest", "min_word_length", "int", 3, "shortest token kept from text", low=1, metavar="L"),
    # ------------------------------------------------------------------ cooccur
    Parameter("cooccur", "heldout", "float", None,
              "leave out of C the documents whose doc_id hashes below FRACTION, for held-out perplexity in "
              "`jsmf evaluate` (e.g. 0.1)", low=0.0, low_open=True, high=0.5, metavar="FRACTION",
              default_text="none"),
    Parameter("cooccur", "validation", "float", None,
              "also leave out of C the documents whose doc_id hashes at or above 1 - FRACTION (never held-out "
              "ones): `jsmf refine` scores them (about 2,000, a sample by id; it trains on the rest) each sweep "
              "and stops when they stop improving (e.g. 0.05, what `jsmf topics` runs; without them refine runs to "
              "its tolerance or its sweeps, and on a small corpus its sweeps can overfit)",
              low=0.0, low_open=True, high=0.5, metavar="FRACTION", default_text="none"),
    Parameter("cooccur", "weighting", "choice", None,
              "each document's weight in C: 'tokens' (by its tokens: C's row sums are the corpus's word "
              "frequencies, and a few long documents among many short ones weigh what their tokens do) or "
              "'documents' (each once, the paper's eq. 1)", choices=WEIGHTINGS,
              default_text=f"{DEFAULT_WEIGHTING}; an update keeps the store's"),
    Parameter("cooccur", "rank", "int", None,
              "write the compressed store instead: the top R eigenpairs of C computed by passes over the corpus, "
              "no N x N array (for large vocabularies; fit it with --rectifier enn and any --topics up to R; no "
              "D2, no --update)", low=2, metavar="R",
              default_text="dense unless C (and D2) would exceed jsmf.cooccur.dense-max-bytes (16 GiB): then "
              "compressed, rank jsmf.cooccur.compressed-rank (100)"),
    Parameter("cooccur", "eig_tol", "float", 1e-6, "with --rank: relative residual asked of the eigenpairs",
              low=0.0, low_open=True, metavar="T"),
    # ------------------------------------------------------------------ fit
    Parameter("fit", "n_topics", "int", None, "number of topics", low=2, flag="--topics", metavar="K",
              required=True, estimator="n_components"),
    Parameter("fit", "rectifier", "choice", None,
              "ap: alternating projection; dc: diagonal completion; enn: epsilon-non-negative rectification and "
              "low-rank anchors in O(N*K) memory; none: the Baseline", choices=("ap", "dc", "enn", "none"),
              default_text="ap on a dense store where its in-task path fits the workers, else enn; enn on a "
              "compressed store (`cooccur --rank`)", estimator="rectifier"),
    Parameter("fit", "iterations", "int", 150, "AP or ENN cycles (at most, with --tol; where refine follows the "
              f"fit, `jsmf topics` and `jsmf run` run {REFINED_FIT_ITERATIONS_SMALL_K} up to {REFINED_FIT_SMALL_K} "
              f"topics, {REFINED_FIT_ITERATIONS} above)", low=1, metavar="N", estimator="max_iter"),
    Parameter("fit", "tol", "float", None,
              "stop AP or ENN when its relative change falls below this (1e-6, the eigensolver's accuracy, is "
              "several times faster: see the README); ENN also stops when its change is below what it can "
              "measure, 1e-7", low=0.0, low_open=True, metavar="T", default_text="run all --iterations",
              estimator="tol"),
    Parameter("fit", "end_with", "choice", "nonnegative", "AP's last projection", choices=("nonnegative", "psd"),
              estimator="end_with"),
    Parameter("fit", "solver", "choice", "exact", "simplex least-squares solver of B", choices=("exact", "eg"),
              estimator="solver"),
    Parameter("fit", "min_anchor_df", "count", "auto",
              "document-frequency floor of anchor words; auto: 10 (chosen by measurement: see the README), and "
              "where more than a tenth of the topics then have almost no weight in A, the anchors picked again "
              "among the words in at least 0.5%% of C's documents, kept if fewer topics are left so", low=0,
              metavar="auto|D", estimator="min_anchor_df"),
    Parameter("fit", "seed", "int", 0, "seed of the eigensolver's random start and DC's permutations", low=0,
              estimator="random_state"),
    Parameter("fit", "path", "choice", "auto",
              "rectification path; auto: in one task where the dense C and the rectified C (about 2.5*8*N^2 "
              "bytes) fit 80%% of the largest worker's memory limit; else, with the default --rectifier, ENN and "
              "low-rank anchors in O(N*K) memory (model k<K>-enn), with --rectifier ap the tiled path",
              choices=("auto", "in-task", "tiled")),
    Parameter("fit", "eig_tol", "float", 1e-6, "relative eigen-residual of every PSD step", low=0.0, low_open=True,
              metavar="T"),
    Parameter("fit", "anchor_words", "count", None,
              "rectify and pick anchors on the block of C of the n words of highest tf-idf only, and recover "
              "every word against those words' columns (AP in one task, a cycle O(n^2) instead of O(N^2)); auto: "
              "max(1000, 20 K) words below 10,000 documents, else every word (what `jsmf topics` and `jsmf run` "
              "pass when refine follows: see the README)", low=2, metavar="n", nullable=True,
              default_text="every word"),
    # ------------------------------------------------------------------ refine
    Parameter("refine", "method", "choice", "auto",
              "cvb0: collapsed variational Bayes, zero order; sampled: each document's topic assignments drawn "
              "by Gibbs sampling under the sweep's topics and averaged (broader topics, slower); vb: variational "
              "Bayes; auto: cvb0, and on a million training tokens or more of short documents (150 tokens or "
              "fewer on average) sampled too, the one the validation documents score lower kept (model "
              "<source>-refined; chosen by measurement: see the README)",
              choices=("auto", "cvb0", "sampled", "vb"), estimator="refine"),
    Parameter("refine", "start", "choice", "auto",
              "where the runs start: spectral (the model given), chain (the topics of a collapsed Gibbs chain on "
              "a sample of about 400,000 training tokens, its topics in the order of the model's they match), or "
              "auto (spectral, and where --method auto tries sampled, sampled from a chain too; see the README), or "
              "both (every run from each, the validation documents choosing: slower, better on some real text)",
              choices=("auto", "spectral", "chain", "both"), estimator="refine_start"),
    Parameter("refine", "sweeps", "count", "auto", "passes over the corpus at most (tol or the validation documents "
              "usually stop it earlier); auto: 100 with validation documents (their stop ends a run where it stops "
              "improving), 50 without (the cap is the stop: longer runs overfit a small corpus)", low=1,
              metavar="auto|S", estimator="refine_sweeps"),
    Parameter("refine", "tol", "float", 1e-4,
              "stop earlier when the relative change of the word-topic counts falls below T", low=0.0,
              low_open=True, metavar="T", nullable=True),
    Parameter("refine", "alpha", "prior", "auto",
              "document-topic prior: a symmetric value, or auto (asymmetric, one value per topic, learned by "
              "Minka's fixed point between sweeps)", low=0.0, low_open=True, metavar="auto|FLOAT",
              estimator="doc_topic_prior"),
    Parameter("refine", "eta", "priors", 0.05,
              "topic-word prior: a symmetric value, auto (learned by Minka's fixed point), or candidates "
              "separated by commas (e.g. 0.01,0.05), each refined to its stop and the one the validation documents "
              "score best kept (needs `cooccur --validation`)", low=0.0,
              low_open=True, metavar="auto|FLOAT[,FLOAT...]", estimator="topic_word_prior"),
    Parameter("refine", "inner_iterations", "int", 3, "cvb0 and vb: updates per document and sweep at most",
              low=1, metavar="I"),
    Parameter("refine", "refit", "choice", "auto",
              "once the validation documents have chosen a state, a few soft sweeps (5 at most) on from it on "
              "the training and validation documents together (held-out ones stay unseen): always, never, or "
              "auto (below 2,500 training documents, where the extra documents measurably help); without held-out "
              "documents, the start is checked against the state the validation documents chose, before the refit",
              choices=("auto", "always", "never")),
    Parameter("refine", "drawn_sweeps", "count", "auto",
              "cvb0: the first D sweeps add counts drawn from the responsibilities (seeded by document id and "
              "sweep) instead of their expectations, so the topics can leave the spectral start's basin; the "
              "soft sweeps after them return the model; auto: below 2,500 training documents (where the "
              "sampler's search beat CVB0 from the spectral start), with validation documents and --sweeps "
              "leaving as many soft ones, none and 20 side by side, the drawn run kept unless the validation "
              "documents score the other better beyond their paired error; else 0 (see the README)",
              low=0, metavar="auto|D", estimator="refine_drawn_sweeps"),
    Parameter("refine", "start_check", "choice", "heldout",
              "what checks the refined model against its start (a warning when it ends worse): heldout (about 2,000 "
              "held-out documents by the exact fold-in under both; on long documents it can cost as much as a few "
              "sweeps) or validation (the validation documents' scores, computed anyway; needs them)",
              choices=("heldout", "validation")),
    Parameter("refine", "validation", "float", None,
              "stop when the perplexity of the validation documents (by doc_id hash, never held-out ones) has "
              "not improved by 0.083%% over 5 sweeps (a sampled run's: 0.25%% over 15); 0: off", low=0.0,
              high=0.5, metavar="FRACTION",
              default_text="the fraction `cooccur --validation` left out of C, none without it"),
)


def parameter(stage: str, name: str) -> Parameter:
    """The table's entry for ``stage``'s parameter ``name``."""
    for p in PARAMETERS:
        if p.stage == stage and p.name == name:
            return p
    raise KeyError(f"{stage}.{name}")


def stage_parameters(stage: str) -> list[Parameter]:
    """The table's entries of one stage, in order."""
    return [p for p in PARAMETERS if p.stage == stage]


def cli_options(parser: argparse.ArgumentParser, stage: str) -> None:
    """Add ``stage``'s options to ``parser``: flag, type, choices and help (with the default) from the table.

    Options left out keep the value None, which the stage reads as its default.
    """
    for p in stage_parameters(stage):
        kwargs: dict[str, Any] = {"help": p.help_text(), "dest": p.name, "required": p.required}
        if p.kind == "choice":
            kwargs["choices"] = p.choices
        else:
            kwargs["type"] = p.parse
        if p.metavar:
            kwargs["metavar"] = p.metavar
        parser.add_argument(p.cli_flag, **kwargs)


def compare_methods() -> tuple[str, ...]:
    """``compare``'s methods: every rectifier of ``fit``, AP followed by each refine method, and Gibbs sampling."""
    return (*parameter("fit", "rectifier").choices,
            *(f"ap+{m}" for m in parameter("refine", "method").choices), "gibbs")
