"""The sweep loop of ``refine``: sweeps until a stop, the priors learned between them, the blocks kept for them.

Each sweep is one pass over the Parquet row groups (:mod:`jsmf_dask.stages.refine`) whose tree sum is the
next word–topic counts ``W``; between sweeps the driver updates learned priors (Minka's fixed points) and
checks the stops (``tol``, the validation documents' perplexity); CVB0's sweeps after the first visit the
documents in groups, ``W`` refreshed after each (:data:`SWEEP_GROUPS`), and its soft sweeps are over-relaxed
(:class:`Overrelaxation`). :func:`run_sweeps` runs the loop twice
in a refine with a refit: once to choose a state, then a few sweeps on from it on the training and
validation documents;
:func:`run_together` runs several candidates' loops in lockstep, each step's sweeps computed together (a
small corpus's sweep is a task or two: together they keep every core busy).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace

import numpy as np

from jsmf_dask import _progress
from jsmf_dask.cluster import total_memory
from jsmf_dask.io.fs import check_free_space, get_fs
from jsmf_dask.kernels.collapsed import collapsed_topics, learn_eta, minka_alpha_step, overrelaxed_counts
from jsmf_dask.kernels.variational import topic_bound
from jsmf_dask.stages.refine import SweepParams, add_sums, gamma_dir, load_tasks, prepare_tasks, spill_tasks, \
    sweep_tasks, validation_tasks

__all__ = ["SweepRecord", "SweepRun", "DroppedRun", "Overrelaxation", "run_sweeps", "run_together", "sweep_loop",
           "validation_perplexity", "prepared_blocks", "PATIENCE", "IMPROVEMENT", "SAMPLED_PATIENCE", "AUTO_SWEEPS",
           "AUTO_SWEEPS_UNVALIDATED", "max_sweeps", "stopped_improving", "OVERRELAX_GROWTH",
           "OVERRELAX_MAX_STEP", "SWEEP_GROUPS", "SAMPLED_AVERAGED_STATES"]


#: Refine stops when ``PATIENCE`` sweeps improve the best validation perplexity before them by less than
#: ``IMPROVEMENT`` (relative). On the NIPS papers (K = 20) CVB0's curve falls 1891 → 1805 → 1789 → 1785 → 1780
#: at sweeps 0 / 10 / 20 / 30 / 50. Until session 26 it was 0.1%, which stopped the NIPS papers cut into 300-word
#: documents (18k documents, K 50) after 34 sweeps at +1.7% above Gibbs's held-out perplexity, while 100 plain
#: sweeps reach +0.1%: the curve creeps on at 0.03% a sweep. With the over-relaxed sweeps, 0.05% against 0.1%
#: (the benchmarks README, session 26): −0.55% there (19.8 s against 12.1 s), −0.22% on the 600-word cut at K 20,
#: within ±0.05% on the other eleven (corpus, K) measured; lda-100k ran 10 sweeps instead of 8 (+3.6 s).
#: 0.05% over three sweeps until session 27: with the sweeps in groups (:data:`SWEEP_GROUPS`) the curve can rest
#: for three sweeps after an over-relaxation reset and then fall on (the 600-word NIPS cut, K 50: stopped after 16
#: sweeps, +0.52% against the ungrouped default; with 0.05% over three it also stopped the 300-word cut at K 50
#: after 24–30 sweeps, +0.16–0.39%). Over four sweeps at the same rate (0.0167% a sweep) it ran 42 sweeps there,
#: −0.37%, and the 300-word cut level. The price is at 100k documents: lda-100k runs 10–12 sweeps instead of 10
#: (0.05% over four: 12–14), and `jsmf topics` there took 56.3 s against 47.6 s, 13.6× Gibbs's time instead of
#: 16× (the benchmarks README, session 27). Over five sweeps at that rate since session 28, when the CVB0 loop became
#: 1.6× faster (against four, on the same starts; changes against session 26's default): the 300-word cut at K 50
#: −0.27% instead of +0.00% in 38 sweeps instead of 36 (+0.08% ± 0.36% against Gibbs's median chain instead of
#: +0.35%), the NIPS papers at K 20 −0.10% (−0.06%), the NIPS bag of words at K 50 −0.42% (−0.40%), the 300-word
#: cut at K 20 −0.40% (−0.39%), lda-100k −0.07% (−0.06%) in 11 sweeps instead of 10, the other nine the same to
#: every printed digit. Over six: the 300-word cut at K 50 the same, the others within 0.04%, lda-100k 12 sweeps.
#: Measured again in session 47, with the validation documents scored by the exact fold-in (session 46), at the same
#: rate on the seven corpora where CVB0 is kept: over three sweeps the man pages +0.35% / +1.10% (K 20 / 50), the
#: others within 0.13%; over eight, all within 0.12% (the man pages −0.08% / −0.01%). Five stays.
PATIENCE = 5
IMPROVEMENT = PATIENCE * 5e-4 / 3

#: A sampled run's validation stop looks back over this many sweeps, at the same rate (:data:`IMPROVEMENT` over
#: :data:`PATIENCE` sweeps, 0.0167% a sweep): each of its scores is of one sweep's draws, and its curve can rest
#: for five sweeps and then fall on (the docstrings at K 50: 551.6, 551.4, 551.3, 551.5, 552.8, 551.8, 551.4
#: after 30 sweeps, then 545.3 after 65). Measured (session 42, the benchmarks README; held-out perplexity by the
#: exact fold-in against Gibbs seed 0, the same starts) on the eight (corpus, K) where the sampled method is tried:
#: where it is kept, lower on six of seven by 0.03–0.92 points (the docstrings at K 50 +1.09% → +0.17%, the
#: 300-word NIPS pieces at K 50 +0.87% → +0.45%) and +0.07 ± 0.37 on the seventh, in 3–36 more sweeps; where
#: CVB0 is kept (lda-short-50k) the model is the same. Fifteen since session 46, when the validation documents came
#: to be scored by the exact fold-in (its curves rest longer before they fall on): on the six (corpus, K) of the
#: docstrings and the NIPS pieces, where the sampled method is kept, held-out perplexity −0.01% to −0.31% against
#: ten (the 100-word pieces at K 20 +0.36% → +0.04% against Gibbs's median chain), in 0–18 more sweeps and at most
#: 7 s more end to end.
SAMPLED_PATIENCE = 15

#: ``sweeps='auto'``: refine's sweeps at most where validation documents stop it (:data:`PATIENCE`,
#: :data:`IMPROVEMENT`), and where none do. With them the stop, not the cap, should end a run: at 50, CVB0 on this
#: machine's man pages at K 50 was still gaining 0.05% a sweep when the cap ended it (336.0 → 335.3 over its last
#: five); with 100 it stopped by the validation documents after 72 sweeps, 0.7 points lower held out (−1.86% →
#: −2.52% against Gibbs, by the exact fold-in; refine 19.6 → 27.4 s), while every other (corpus, K) measured stops
#: before 50 and is unchanged (the benchmarks README, session 42). Without them the cap is the stop, and 50 sweeps
#: already overfit a small corpus (MovieLens at K 50: +3.7% held out against the validation stop, session 33).
AUTO_SWEEPS = 100
AUTO_SWEEPS_UNVALIDATED = 50


def max_sweeps(sweeps: int | str, validation: float | None) -> int:
    """Refine's sweeps at most: ``sweeps``, or for ``'auto'`` :data:`AUTO_SWEEPS` with validation documents (a
    non-zero ``validation`` fraction) and :data:`AUTO_SWEEPS_UNVALIDATED` without."""
    if sweeps != "auto":
        return int(sweeps)
    return AUTO_SWEEPS if validation else AUTO_SWEEPS_UNVALIDATED


#: :class:`Overrelaxation`'s step grows by this factor after each soft sweep, up to :data:`OVERRELAX_MAX_STEP`.
#: Measured (session 26, the benchmarks README; the same starts, held-out documents and scorer, the 0.1% stop):
#: against plain sweeps, held-out perplexity −0.03% to −0.81% on eleven of thirteen (corpus, K) (six real
#: corpora at K 20 and 50, lda-20k), MovieLens +0.12% ± 0.11% / +0.11% ± 0.24%, in about as many sweeps. On the
#: 300-word NIPS cut at K 50, 1.2 / 5 reaches in 10 / 20 / 30 sweeps the training likelihood of 19 / 40 / 62
#: plain sweeps; 1.3 / 8 and 1.5 / 10, tried there only, fell back more often (a fall-back's validation score
#: ended one run after 18 sweeps, +1.7% above Gibbs) and one corpus did not choose between 1.5 and 1.2.
OVERRELAX_GROWTH = 1.2
OVERRELAX_MAX_STEP = 5.0

#: CVB0's sweeps after the first visit the training documents in this many groups by id
#: (:func:`~jsmf_dask.kernels.doc_split.doc_groups`), one after another, ``W`` refreshed after each: the
#: incremental EM of Neal & Hinton (1998, "A view of the EM algorithm that justifies incremental, sparse, and
#: other variants"), the batch counterpart of stochastic CVB0's frequent updates (Foulds et al. 2013). A group's
#: counts from its last visit are replaced by its new ones, so ``W`` is always the sum of every document's
#: latest expected counts; the groups depend on the documents' ids alone, so the model does not depend on the
#: row groups or the cluster. Measured (session 27, the benchmarks README): on the NIPS papers cut into 300-word
#: documents (K 50) 40 grouped sweeps reach the held-out perplexity of 65 whole ones; with session 27's stop over
#: four sweeps, against session 26's one group and three sweeps, held-out perplexity −0.05% to
#: −0.79% on ten of fourteen (corpus, K), level on two, Reuters +0.13% / +0.42% (± 0.6%).
SWEEP_GROUPS = 4

#: A sampled run returns the mean of the word–topic counts of its last this many states (the start is never
#: averaged in): each state is one noisy draw of a chain that has settled, and their mean estimates where it
#: settled better than any one of them (Polyak–Ruppert averaging; Gibbs's chain averaged over 30 states scores
#: 0.7% better than its last, the benchmarks README, session 17). Measured (session 36, the benchmarks README;
#: `quality.py`, the same starts, held-out documents and scorer): held-out perplexity −0.12% to −0.36% on all
#: seven sampled models of the short-document cuts and lda-short-50k (its B L1 0.155 → 0.147), −0.01% to −0.37%
#: on three samples of 3k–8k documents where the draws overfit. In a probe the mean of the last 3 or 10 states'
#: topics did about as well as of 5, of 20 worse on one (its states still moving). CVB0's and VB's runs are
#: deterministic: one state.
SAMPLED_AVERAGED_STATES = 5


@dataclass
class SweepRecord:
    """One sweep as reported to ``on_sweep`` and stored in the trace."""

    sweep: int
    of: int
    bound_per_word: float  # VB: bound; CVB0: training log likelihood, per token, of the state entering the sweep
    relative_change: float
    inner_iterations: float  # mean per document
    seconds: float
    validation_perplexity: float  # of the state entering this sweep (NaN without validation documents)
    alpha_sum: float  # α₀ used in this sweep
    eta: float  # η used in this sweep
    topics: np.ndarray | None = None  # B after this sweep, N×K
    phase: str = "refine"  # or 'refit': on from the chosen state, with the validation documents in training
    drawn: bool = False  # its counts were drawn from the responsibilities (refine's ``drawn_sweeps``)
    candidate: str = ""  # which of several candidates run together ('eta 0.05, 20 drawn'), else empty
    step: float = 1.0  # the over-relaxation step the next counts took along this sweep's update

    def line(self) -> str:
        valid = "" if math.isnan(self.validation_perplexity) else \
            f"validation perplexity {self.validation_perplexity:.1f} before it, "
        drawn = " (drawn counts)" if self.drawn else ""
        which = f" [{self.candidate}]" if self.candidate else ""
        step = "" if self.step == 1.0 else f", over-relaxed x{self.step:.2g}"
        return (f"{self.phase} sweep {self.sweep}/{self.of}{drawn}{which}: {valid}"
                f"relative change {self.relative_change:.3g}{step}, "
                f"alpha sum {self.alpha_sum:.3g}, eta {self.eta:.3g}, "
                f"{self.inner_iterations:.1f} inner iterations per document, {self.seconds:.1f} s")


@dataclass
class SweepRun:
    """What :func:`run_sweeps` ends with: its records, the state it returns and the last sweep's sums."""

    records: list[SweepRecord]
    counts: np.ndarray
    params: SweepParams
    stopped: str  # 'sweeps', 'tol', 'validation' or 'dropped' (by run_together: never kept)
    best_sweep: int  # the state returned: entering this sweep (len(records) + 1: after the last one)
    best_score: float  # its validation perplexity (NaN when no validation document scored it)
    best_seen: float  # the lowest validation perplexity of a state it could return (a sampled run: its mean's;
    # NaN: none was scored)
    total: object  # the last sweep's BlockSums
    averaged: int  # how many states ``counts`` is the mean of (1: one state; a sampled run: its last ones)
    best_seen_scores: tuple[np.ndarray, np.ndarray] | None = None  # that state's per-document validation log
    # likelihoods and scored tokens (BlockSums.valid_doc_loglik, valid_doc_tokens), or None


class DroppedRun(Exception):
    """Thrown into a :func:`sweep_loop` by :func:`run_together` to stop it where it is (``stopped`` 'dropped')."""


class Overrelaxation:
    """Adaptive over-relaxation of CVB0's soft sweeps (after Salakhutdinov & Roweis 2003, "Adaptive overrelaxed
    bound optimization methods", for EM).

    A sweep maps the word–topic counts ``W`` to ``W'``; from a spectral start,
    on real text, that map creeps along one direction for dozens of sweeps.
    The next sweep starts from ``W + s (W' − W)``
    (:func:`~jsmf_dask.kernels.collapsed.overrelaxed_counts`); ``s`` is 1 after
    the first sweep, and grows by :data:`OVERRELAX_GROWTH` after each later
    one, up to :data:`OVERRELAX_MAX_STEP`, unless the sweep's incoming state was
    extrapolated and its training log likelihood fell below the state's
    before it: then the next sweep starts from that sweep's own ``W'`` and
    ``s`` grows from 1 again. (Going back to the update the bad state was
    extrapolated from instead measured worse: the benchmarks README, session
    26.) All of it is the driver's arithmetic on the tree-summed counts: the
    same on any cluster.
    """

    def __init__(self, growth: float, max_step: float):
        self.growth, self.max_step = growth, max_step
        self.step = 1.0
        self.previous: float | None = None  # training log likelihood of the last sweep's incoming state

    def next_counts(self, counts: list[np.ndarray], updated: list[np.ndarray],
                    entering: float) -> tuple[list[np.ndarray], float]:
        """The counts the next sweep starts from, group by group (:data:`SWEEP_GROUPS`: their sum is ``W``),
        after a sweep took ``counts`` (whose training log likelihood per token is ``entering``) to
        ``updated``; and the step taken (1: ``updated`` itself)."""
        if self.previous is None or (self.step > 1.0 and entering < self.previous):
            self.step = 1.0
        else:
            self.step = min(self.step * self.growth, self.max_step)
        self.previous = entering
        if self.step == 1.0:
            return list(updated), 1.0
        return [overrelaxed_counts(c, u, self.step) for c, u in zip(counts, updated, strict=True)], self.step


def run_sweeps(prepared, params: SweepParams, counts: np.ndarray, scratch: str, **kwargs) -> SweepRun:
    """One :func:`sweep_loop` (its parameters) run to its end."""
    (run,) = run_together([sweep_loop(prepared, params, counts, scratch, **kwargs)])
    return run


def run_together(loops: list[Generator], drop: Callable[[list[int]], list[int]] | None = None) -> list[SweepRun]:
    """Run :func:`sweep_loop` generators in lockstep: each step computes the next sweep of every loop still
    running in one graph, then hands each its sums. Each loop's result is what it gives alone (its own
    state, scratch, stops and keys); only its records' ``seconds`` are the shared step's. After each step
    ``drop`` (given the loops still running) names those to stop there (:class:`DroppedRun`)."""
    results: list[SweepRun | None] = [None] * len(loops)
    pending: dict[int, object] = {}
    for j, loop in enumerate(loops):
        try:
            pending[j] = next(loop)
        except StopIteration as stop:
            results[j] = stop.value
    while pending:
        with _progress.data_in_graph():
            totals = _progress.compute(*pending.values())
        following = {}
        for j, total in zip(pending, totals, strict=True):
            try:
                following[j] = loops[j].send(total)
            except StopIteration as stop:
                results[j] = stop.value
        pending = following
        for j in drop(list(pending)) if drop is not None else []:
            try:
                loops[j].throw(DroppedRun())
                raise RuntimeError(f"run_together: loop {j} went on after it was dropped")
            except StopIteration as stop:
                results[j] = stop.value
            del pending[j]
    return results


def sweep_loop(prepared, params: SweepParams, counts: np.ndarray, scratch: str, *, alpha, eta, sweeps: int,
               tol: float | None, stop_by_validation: bool, drawn: int = 0, first: int = 1,
               phase: str = "refine", candidate: str = "",
               on_sweep: Callable[[SweepRecord], None] | None = None) -> Generator[object, object, SweepRun]:
    """A generator of each sweep's graph (sent back its computed sums), returning the :class:`SweepRun`
    (:func:`run_together` drives it; ``candidate`` labels its records).

    Up to ``sweeps`` sweeps from ``counts``: the documents' states go to ``gamma_dir(scratch, first + i)``
    (the first sweep starts every document afresh). Stops on ``tol`` and, with ``stop_by_validation``, when the
    validation documents stop improving (then returns the best state they saw). ``alpha``, ``eta``: refine's
    own (``'auto'`` learns that prior between sweeps; anything else keeps ``params``' value of it). The first
    ``drawn`` sweeps (CVB0) add counts drawn from the responsibilities instead of their expectations (seeded by
    the document and the sweep's number in this run: the same draws on any cluster); the stops apply after them,
    to the states from the drawn phase's last on (the validation stop's patience counts from there too), and the
    state returned is the start or one of those. CVB0's soft sweeps are over-relaxed (:class:`Overrelaxation`).
    A sampled run returns the mean of its last :data:`SAMPLED_AVERAGED_STATES` states, however it stopped (its
    validation stop ends the run where the chain has settled), and scores that mean on the validation documents
    (one more graph, :func:`~jsmf_dask.stages.refine.validation_tasks`): the score it is chosen by."""
    method = params.method
    records: list[SweepRecord] = []
    stopped = "sweeps"
    best = (math.inf, 0, counts, params, None)  # validation perplexity, sweep entering it, the state it scored,
    # and its per-document scores
    best_sweep = None
    total = None
    relaxation = Overrelaxation(OVERRELAX_GROWTH, OVERRELAX_MAX_STEP)
    n_groups = params.groups
    parts = None  # each group's counts from its last visit (their sum is ``counts``); none before the first sweep
    recent = deque(maxlen=SAMPLED_AVERAGED_STATES)  # a sampled run's last states (the sweeps made them)
    for i in range(sweeps):
        t0 = time.perf_counter()
        s = first + i
        if method == "sampled":  # every sweep draws, seeded by its number in the refine (a refit's go on)
            swept = replace(params, drawn_sweep=s)
        else:
            swept = replace(params, drawn_sweep=i + 1) if i < drawn else params
        # the first sweep visits every group from the start's W (no group has counts of its own yet), each later
        # one visits them in turn, W refreshed after each
        try:
            got = yield sweep_tasks(prepared, swept, counts, parts if n_groups > 1 else None,
                                    None if i == 0 else gamma_dir(scratch, s - 1), gamma_dir(scratch, s), sweep=s)
        except DroppedRun:  # run_together stopped it: another run leads it by far
            stopped = "dropped"
            break
        visited = [part.counts for part in got]
        total = add_sums(*got)
        if total.n_docs == 0:
            break
        if method == "vb":
            lam = params.eta + counts
            entering = math.nan if i == 0 else (total.bound + topic_bound(lam, params.eta)) / total.n_tokens
        else:
            entering = total.bound / total.n_tokens
        change = float(np.linalg.norm(total.counts - counts) / np.linalg.norm(counts))
        scored = validation_perplexity(total)  # of the state this sweep entered with
        if (i == 0 or i >= drawn) and scored < best[0]:  # the start, or a soft state: never a drawn one
            best = (scored, i + 1, counts, params, (total.valid_doc_loglik, total.valid_doc_tokens))
        step = 1.0
        if method == "cvb0" and i >= drawn:
            parts, step = relaxation.next_counts(parts if parts is not None else [counts], visited, entering)
        else:
            parts = visited
        counts = parts[0] if n_groups == 1 else np.sum(parts, axis=0)
        if method == "sampled":
            recent.append(counts)
        rec = SweepRecord(i + 1, sweeps, entering, change, total.iterations / total.n_docs,
                          time.perf_counter() - t0, scored, float(params.alpha.sum()), params.eta,
                          collapsed_topics(total.counts, params.eta), phase, i < drawn, candidate, step)
        records.append(rec)
        if on_sweep is not None:
            on_sweep(rec)
        params = learned_priors(params, total, counts, alpha, eta)
        if i < drawn:
            continue
        if tol is not None and change < tol:
            stopped = "tol"
            break
        if stop_by_validation and stopped_improving([r.validation_perplexity for r in records[drawn:]],
                                                    SAMPLED_PATIENCE if method == "sampled" else PATIENCE):
            stopped = "validation"
            if method != "sampled":  # a sampled run's states since its best are the settled chain's: its end
                # the sweeps since the best state only made the validation documents worse: return that state
                _, best_sweep, counts, params, _ = best
            break
    best_score = best[0] if best_sweep is not None else math.nan
    best_seen, best_scores, averaged = best[0], best[4], 1
    if best_sweep is None:
        best_sweep = len(records) + 1
        if len(recent) > 1:
            counts, averaged = np.mean(np.stack(recent), axis=0), len(recent)
            if total.valid_docs and stopped != "dropped":  # the mean is the state returned: its own score is
                # what the candidates compare
                try:
                    scored = yield validation_tasks(prepared, params, counts, scratch, sweep=first + len(records))
                    best_score = best_seen = validation_perplexity(scored)
                    best_scores = (scored.valid_doc_loglik, scored.valid_doc_tokens)
                except DroppedRun:
                    stopped = "dropped"
    return SweepRun(records, counts, params, stopped, best_sweep, best_score,
                    best_seen if math.isfinite(best_seen) else math.nan, total, averaged, best_scores)


def validation_perplexity(total) -> float:
    return math.exp(-total.valid_loglik / total.valid_tokens) if total.valid_tokens else math.nan


def learned_priors(params: SweepParams, total, counts: np.ndarray, alpha, eta) -> SweepParams:
    """The next sweep's priors: one Minka step for ``α`` (CVB0's statistics), Minka's fixed point for ``η``."""
    new_alpha, new_eta = params.alpha, params.eta
    if alpha == "auto" and total.prior_sums is not None:
        new_alpha = minka_alpha_step(params.alpha, total.prior_sums)
    if eta == "auto":
        new_eta = learn_eta(counts, params.eta, max_iter=100, tol=1e-6)
    return replace(params, alpha=new_alpha, eta=new_eta)


#: Share of the memory the graphs can hold (:func:`~jsmf_dask.cluster.total_memory`) that the corpus's prepared
#: blocks may take to be kept between sweeps; bytes a non-zero of the corpus takes there, with room (measured on
#: lda-20k: 16, the CSR's int64 counts and columns, the ids' hashes and the validation documents' halves).
PREPARED_MEMORY_SHARE = 0.25
PREPARED_BYTES_PER_NONZERO = 24


@contextlib.contextmanager
def prepared_blocks(blocks: list, params: SweepParams, nnz: int,
                    scratch: str) -> Iterator[Callable[[int | None], list]]:
    """Yield what gives each sweep its blocks' :class:`~jsmf_dask.stages.refine.PreparedBlock` tasks, by the
    group of documents that reads them (None: every group; :func:`~jsmf_dask.stages.refine.sweep_tasks`).

    When the corpus's prepared blocks fit in :data:`PREPARED_MEMORY_SHARE` of
    the memory the graphs can hold, they are computed once and kept (persisted)
    for every sweep: no sweep reads Parquet, splits documents or hashes their ids
    again (12–15% of a sweep at 20k documents). Otherwise they are written once
    under ``scratch`` (:func:`~jsmf_dask.stages.refine.spill_tasks`, about
    :data:`PREPARED_BYTES_PER_NONZERO` bytes a non-zero) and each round of a sweep
    reads back its group's documents only, out of core: no block is held
    between the rounds (a file system without that room is an error before
    any sweep). The results are the same either way.
    """
    if nnz * PREPARED_BYTES_PER_NONZERO > PREPARED_MEMORY_SHARE * total_memory(_progress.active_client()):
        check_free_space(scratch, nnz * PREPARED_BYTES_PER_NONZERO,
                         f"refine out of core (the corpus's prepared row groups, {nnz} non-zeros, written once to "
                         f"scratch: the corpus does not fit in a quarter of the workers' memory)")
        fs, path = get_fs(scratch)
        fs.makedirs(path, exist_ok=True)
        n_valid = list(_progress.compute(*spill_tasks(blocks, params, scratch)))
        yield lambda group: load_tasks(scratch, n_valid, group, params.groups)
        return
    kept = list(_progress.persist(*prepare_tasks(blocks, params)))
    try:
        yield lambda group: kept
    finally:
        kept.clear()  # released on the workers when no reference remains


def stopped_improving(curve: list[float], patience: int = PATIENCE) -> bool:
    """True when the last ``patience`` validation scores improved on the best before them by less than
    ``patience`` sweeps at the rate of :data:`IMPROVEMENT` over :data:`PATIENCE` (relative)."""
    if len(curve) <= patience or math.isnan(curve[0]):
        return False
    best_before = min(curve[:-patience])
    return min(curve[-patience:]) > best_before * (1.0 - IMPROVEMENT * patience / PATIENCE)
