"""Graph builders for ``refine``: one sweep (CVB0, sampled or VB) as a map over row groups and a tree sum.

A sweep is the same bag-over-row-groups shape as ``cooccur``: each task takes
one row group's :class:`PreparedBlock` (kept in memory from the first sweep when
the corpus fits, :func:`prepare_tasks`; else written to scratch once and read
back each sweep, a group at a time: :func:`spill_tasks`), without
its held-out documents and the validation documents it scores, updates
its training documents from their state of the previous sweep (CVB0:
:func:`jsmf_dask.kernels.collapsed.cvb0_step`, the state ``N_dk``; sampled:
:func:`jsmf_dask.kernels.collapsed.sampled_step`, the same state; VB:
:func:`jsmf_dask.kernels.variational.e_step`, the state ``γ``) and returns the
block's expected word–topic counts (N×K); a tree of sums reduces them, so the
driver receives one N×K array a sweep and no training document's state. The
same task scores the block's validation documents (a sample of them by id
beyond a few thousand) by document completion under the topics entering the sweep
(:func:`jsmf_dask.kernels.heldout.document_completion`, ``evaluate``'s scorer, by its exact fold-in with fewer
passes), so stopping by validation costs no extra pass;
their scores reach the driver one per document (two states compared on the
same documents give a paired error).
CVB0's and sampled sweeps after the first are rounds in one graph: each round's tasks update one
group of training documents by id (:attr:`SweepParams.groups`,
:func:`jsmf_dask.kernels.doc_split.doc_groups`) from a ``W`` that a task between the
rounds forms from every group's latest counts (:func:`sweep_tasks`); a
:class:`PreparedBlock` keeps its documents by group, and the tree sums are per group.
The state stays out of the driver: each task reads its block's state from
``<scratch>/gamma-<s − 1 mod G>/`` and writes the new one to
``gamma-<s mod G>`` (:data:`STATE_GENERATIONS` generations; a file per block
and group of documents), so a task that runs twice (a worker died) reads the
same input and writes the same output.

Memory per task, O(N·K + rows of a block): the block's count matrix (its
non-zeros), its ``γ`` (rows × K), the N×K ``exp(E[log β])`` and expected
counts, and the compiled E-step's buffer of one document (its distinct words
× K). At N = 15,000, K = 100 and 10,000-document row groups: 2 × 12 MB for
the N×K arrays, 8 MB of ``γ``, ~20 MB of counts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import dask
import numpy as np
import pyarrow as pa
from dask.base import tokenize

from jsmf_dask.parameters import parameter
from jsmf_dask.io.fs import join
from jsmf_dask.io.parquet import Block, read_block, shard_name
from jsmf_dask.io.schema import doc_topics_schema
from jsmf_dask.io.scratch import load_array, load_sparse, save_array, save_sparse, write_table
from jsmf_dask.kernels.collapsed import collapsed_theta, collapsed_topics, cvb0_step, draw_seeds, sampled_step
from jsmf_dask.kernels.doc_split import DocumentSplit, doc_groups, doc_hashes, sample_mask
from jsmf_dask.kernels.heldout import document_completion, split_tokens, validation_completion
from jsmf_dask.kernels.variational import dirichlet_expectation, e_step, expected_topic_topic
from jsmf_dask.stages.infer import block_counts

__all__ = ["METHODS", "COLLAPSED_METHODS", "SweepParams", "BlockSums", "PreparedBlock", "prepare_tasks",
           "spill_tasks", "load_tasks", "sweep_tasks", "validation_tasks", "shared_state", "finish_tasks",
           "tree_sum", "add_sums", "gamma_dir", "STATE_GENERATIONS"]

#: Refinement methods: zero-order collapsed variational Bayes, sampled passes, and variational Bayes.
METHODS = parameter("refine", "method").choices
#: The methods of the collapsed model (state ``N_dk``, updating from the expected word–topic counts ``W``).
COLLAPSED_METHODS = ("cvb0", "sampled")


@dataclass(frozen=True)
class SweepParams:
    """What every sweep task needs besides its block and the topics.

    ``alpha`` and ``eta`` are this sweep's priors (learned ones change between sweeps).
    """

    n_words: int
    method: str
    alpha: np.ndarray
    eta: float
    split: DocumentSplit  # the held-out and validation documents, left out of the sweeps
    max_inner: int
    inner_tol: float
    learn_alpha: bool = False  # CVB0 and sampled: also return Minka's statistics for α
    alpha_sample: float = 1.0  # … over this fraction of the training documents (by id)
    validation_sample: float = 1.0  # the validation documents scored: this fraction of them (by id)
    heldout_sample: float = 1.0  # the held-out documents the final pass also scores by the exact fold-in (by id)
    drawn_sweep: int | None = None  # this sweep draws (CVB0's drawn sweeps, every sampled one): its number seeds
    # the draws
    groups: int = 1  # the training documents' groups by id (doc_groups): a sweep can visit them one at a time
    weighting: str = "documents"  # how the last pass's A weighs each document (as the root's C did)


@dataclass
class BlockSums:
    """Sums over the training documents of one or more blocks (they add up over blocks).

    Attributes
    ----------
    counts : ndarray, shape (N, K), or None
        Expected word–topic counts (sweeps only).
    topic_topic : ndarray, shape (K, K), or None
        Unnormalised ``A`` from the documents' expected topic counts (last pass only).
    bound : float
        VB: the documents' part of the evidence lower bound at the incoming
        state; CVB0 and sampled: the training documents' log likelihood at it.
    n_docs, n_tokens, iterations : int
    prior_sums : ndarray, shape (K + 1,), or None
        CVB0 and sampled: Minka's statistics for ``α`` (see :class:`~jsmf_dask.kernels.collapsed.CollapsedPass`).
    heldout_loglik : ndarray, shape (2,), or None
        Last pass only: the held-out documents' completion log likelihood under
        the final topics and under the start's (the source model's ``B`` and document prior).
    heldout_tokens : int
    heldout_sampled : ndarray, shape (3,), or None
        Last pass only: a sample of the held-out documents (:attr:`SweepParams.heldout_sample`) by the exact fold-in
        (:func:`~jsmf_dask.kernels.heldout.sampled_theta`): their log likelihood under the final topics and under
        the start's, and their scored tokens. The VB fold-in understates sharp topics' (a spectral start's) more
        than a refined model's: at 300k documents and K 100 it scored a refined model 2.5% better than its start
        where the exact fold-in scored it 1.7% worse (the benchmarks README, session 45).
    valid_doc_loglik, valid_doc_tokens : ndarray, shape (valid_docs,), or None
        Each scored validation document's log likelihood of its scored half (document completion) and
        that half's tokens, in block order (every sweep lists the same documents in the same order: two
        states' scores pair document by document, :func:`jsmf_dask.kernels.model_selection.paired_gap`);
        :attr:`valid_loglik`, :attr:`valid_tokens` and :attr:`valid_docs` are their totals.
    """

    counts: np.ndarray | None
    topic_topic: np.ndarray | None
    bound: float
    n_docs: int
    n_tokens: int
    iterations: int
    prior_sums: np.ndarray | None = None
    heldout_loglik: np.ndarray | None = None
    heldout_tokens: int = 0
    valid_doc_loglik: np.ndarray | None = None
    valid_doc_tokens: np.ndarray | None = None
    heldout_sampled: np.ndarray | None = None

    @property
    def valid_loglik(self) -> float:
        """The validation documents' log likelihood (their scored halves)."""
        return 0.0 if self.valid_doc_loglik is None else float(self.valid_doc_loglik.sum())

    @property
    def valid_tokens(self) -> int:
        """The validation documents' scored tokens."""
        return 0 if self.valid_doc_tokens is None else int(round(self.valid_doc_tokens.sum()))

    @property
    def valid_docs(self) -> int:
        """The validation documents scored."""
        return 0 if self.valid_doc_loglik is None else self.valid_doc_loglik.size


#: Generations of the documents' states a refine's scratch keeps (sweep ``s`` writes ``gamma-<s mod this>``):
#: two would do for the sweeps, each reading the last; a validation stop returns a state written at most
#: ``PATIENCE + 1`` sweeps before the last (:mod:`jsmf_dask.pipeline.refine_sweeps`), and the final pass
#: reads that state's documents (their topic weights under ``doc_topics/``, the fold-in's start).
STATE_GENERATIONS = 7


def gamma_dir(scratch: str, sweep: int) -> str:
    """Where sweep ``sweep`` writes ``γ`` (:data:`STATE_GENERATIONS` generations in turn)."""
    return join(scratch, f"gamma-{sweep % STATE_GENERATIONS}")


def _gamma_url(directory: str, index: int, group: int) -> str:
    return join(directory, f"block-{index:05d}-{group}.npy")


def split_block(block: Block, params: SweepParams):
    """The block's training documents' (counts, hashes), its scored validation documents' (a sample of
    ``params.validation_sample`` of them) and its held-out documents' (each document's id hashed once), and the
    training documents' table. Validation documents outside the scored sample train: the stop never sees them,
    and a large corpus would otherwise lose most of its validation fraction to nothing."""
    table = read_block(block, params.n_words)
    hashes = doc_hashes(table.column("doc_id"))
    held, valid = params.split.masks(hashes=hashes)
    X = block_counts(table, params.n_words)
    scored = valid & sample_mask(hashes, params.validation_sample)
    train = ~(held | scored)
    return (X[train], hashes[train]), (X[scored], hashes[scored]), (X[held], hashes[held]), \
        table.filter(pa.array(train))


@dataclass(frozen=True)
class PreparedBlock:
    """What a sweep reads of one row group, the same every sweep: its training documents' counts and id hashes
    by group (:attr:`SweepParams.groups`), and its scored validation documents split into observed and scored
    halves (:func:`prepare_tasks`). Read back from scratch (:func:`load_tasks`) it may hold some groups only,
    and the validation halves only with group 0 (the group whose tasks score them)."""

    groups: dict  # group → (scipy.sparse CSR, its training documents × words; their id hashes), block order
    valid_observed: object | None
    valid_scored: object | None
    n_valid: int
    valid_hashes: np.ndarray | None = None  # the scored validation documents' id hashes (their fold-in's seeds)


def _prepare(block: Block, params: SweepParams) -> PreparedBlock:
    (X, hashes), (V, valid_hashes), _, _ = split_block(block, params)
    observed, scored = split_tokens(V, valid_hashes) if V.shape[0] else (None, None)
    group = doc_groups(hashes, params.groups)
    return PreparedBlock({g: (X[group == g], hashes[group == g]) for g in range(params.groups)},
                         observed, scored, V.shape[0], valid_hashes)


def _prepared_key_params(params: SweepParams) -> tuple:
    """What a :class:`PreparedBlock` depends on besides its block (not the priors, which change by sweep)."""
    return params.n_words, params.split, params.validation_sample, params.groups


def prepare_tasks(blocks: list[Block], params: SweepParams) -> list[dask.delayed]:
    """A task per block reading what every sweep reads of it (:class:`PreparedBlock`), to be persisted once
    for every sweep, which then reads no Parquet (a worker that dies recomputes its part from the graph)."""
    token = tokenize(blocks, _prepared_key_params(params))
    return [dask.delayed(_prepare, pure=True)(block, params, dask_key_name=f"refine-prepare-{token}-{i}")
            for i, block in enumerate(blocks)]


def _part_url(directory: str, index: int, part: int | str, what: str) -> str:
    return join(directory, f"block-{index:05d}-{part}-{what}")


def spill_tasks(blocks: list[Block], params: SweepParams, directory: str) -> list[dask.delayed]:
    """A task per block writing what every sweep reads of it (:class:`PreparedBlock`) under ``directory``: a
    CSR file and an array of id hashes per group of documents, and the validation documents' halves; each task
    returns how many validation documents the block scores (:func:`load_tasks` needs it).

    For a corpus whose prepared blocks do not fit in memory: each sweep then reads every block once, each
    group's round only its own documents (:func:`load_tasks`), in place of reading and splitting the Parquet
    row group again in every round (on lda-20k, out of core: 0.86 s a sweep against 0.27 s in memory)."""
    token = tokenize(blocks, _prepared_key_params(params), directory)
    return [dask.delayed(_spill, pure=True)(block, i, params, directory, dask_key_name=f"refine-spill-{token}-{i}")
            for i, block in enumerate(blocks)]


def _spill(block: Block, index: int, params: SweepParams, directory: str) -> int:
    prepared = _prepare(block, params)
    for g, (X, hashes) in prepared.groups.items():
        save_sparse(_part_url(directory, index, g, "counts.npz"), X)
        save_array(_part_url(directory, index, g, "hashes.npy"), hashes)
    if prepared.n_valid:
        save_sparse(_part_url(directory, index, "valid", "observed.npz"), prepared.valid_observed)
        save_sparse(_part_url(directory, index, "valid", "scored.npz"), prepared.valid_scored)
        save_array(_part_url(directory, index, "valid", "hashes.npy"), prepared.valid_hashes)
    return prepared.n_valid


def load_tasks(directory: str, n_valid: list[int], group: int | None, n_groups: int) -> list[dask.delayed]:
    """A task per block reading back what :func:`spill_tasks` wrote of it: the documents of ``group`` (None:
    every group), with the validation halves when that includes group 0; ``n_valid``: the spill tasks'
    results."""
    token = tokenize(directory, group)
    return [dask.delayed(_load, pure=True)(directory, i, range(n_groups) if group is None else (group,), n,
                                           dask_key_name=f"refine-load-{token}-{i}")
            for i, n in enumerate(n_valid)]


def _load(directory: str, index: int, groups, n_valid: int) -> PreparedBlock:
    parts = {g: (load_sparse(_part_url(directory, index, g, "counts.npz")),
                 load_array(_part_url(directory, index, g, "hashes.npy"))) for g in groups}
    if n_valid and 0 in groups:
        return PreparedBlock(parts, load_sparse(_part_url(directory, index, "valid", "observed.npz")),
                             load_sparse(_part_url(directory, index, "valid", "scored.npz")), n_valid,
                             load_array(_part_url(directory, index, "valid", "hashes.npy")))
    return PreparedBlock(parts, None, None, n_valid)


def _vb_scores(docs, topics: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each document of ``docs`` (counts, id hashes): its completion log likelihood by the VB fold-in, and its
    scored tokens."""
    X, hashes = docs
    if X.shape[0] == 0:
        return np.zeros(0), np.zeros(0)
    ll, n_tokens, _ = document_completion(*split_tokens(X, hashes), topics, alpha)
    return ll, n_tokens


def _sampled_check(held, fraction: float, topics: np.ndarray, alpha: np.ndarray, start: tuple) -> np.ndarray:
    """:attr:`BlockSums.heldout_sampled` of a block's held-out documents ``held`` (counts, id hashes)."""
    X, hashes = held
    chosen = sample_mask(hashes, fraction)
    if not chosen.any():
        return np.zeros(3)
    observed, scored = split_tokens(X[chosen], hashes[chosen])
    final, n_tokens, _ = document_completion(observed, scored, topics, alpha, fold_in="sampled", hashes=hashes[chosen])
    begun, _, _ = document_completion(observed, scored, *start, fold_in="sampled", hashes=hashes[chosen])
    return np.array([final.sum(), begun.sum(), n_tokens.sum()])


def _sweep_block(prepared: PreparedBlock, index: int, params: SweepParams,
                 shared: tuple[np.ndarray, np.ndarray | None], state_in: str | None, state_out: str,
                 group: int) -> BlockSums:
    """The block's training documents of one ``group``; group 0's task also scores the validation documents.
    ``shared``: what the method updates from (CVB0 and sampled: ``W``; VB: ``exp(E[log β])``) and the topics
    scored (None after the first round)."""
    X, train_hashes = prepared.groups[group]
    update_from, topics = shared
    state = None if state_in is None else load_array(_gamma_url(state_in, index, group))
    if params.method == "vb":
        res = e_step(X, update_from, params.alpha, state, max_iter=params.max_inner, tol=params.inner_tol)
        new_state, counts, bound, iterations, prior_sums = res.gamma, res.counts, res.bound, res.iterations, None
    else:
        stats = params.learn_alpha and sample_mask(train_hashes, params.alpha_sample)
        seeds = None if params.drawn_sweep is None else draw_seeds(train_hashes, params.drawn_sweep)
        if params.method == "sampled":
            res = sampled_step(X, update_from, params.alpha, params.eta, state, seeds, prior_stats=stats)
        else:
            res = cvb0_step(X, update_from, params.alpha, params.eta, state, max_iter=params.max_inner,
                            tol=params.inner_tol, prior_stats=stats, draw_seeds=seeds)
        new_state, counts, bound, iterations, prior_sums = res.doc_topic, res.counts, res.log_likelihood, \
            res.iterations, res.prior_sums
    save_array(_gamma_url(state_out, index, group), new_state)
    ll, n_valid_tokens = (validation_completion(prepared.valid_observed, prepared.valid_scored,
                                                prepared.valid_hashes, topics, params.alpha)
                          if prepared.n_valid and group == 0 else (np.zeros(0), np.zeros(0)))
    return BlockSums(counts, None, bound, X.shape[0], int(X.sum()), iterations, prior_sums, valid_doc_loglik=ll,
                     valid_doc_tokens=n_valid_tokens)


def _validation_block(prepared: PreparedBlock, topics: np.ndarray, alpha: np.ndarray) -> BlockSums:
    """The block's scored validation documents under ``topics`` (nothing else of the block)."""
    ll, n_tokens = validation_completion(prepared.valid_observed, prepared.valid_scored, prepared.valid_hashes, topics,
                                      alpha)
    return BlockSums(None, None, 0.0, 0, 0, 0, None, valid_doc_loglik=ll, valid_doc_tokens=n_tokens)


def validation_tasks(prepared: Callable[[int | None], list], params: SweepParams, counts: np.ndarray, run: str, *,
                     sweep: int) -> dask.delayed:
    """The validation documents' scores of the topics of ``counts`` alone, as one delayed :class:`BlockSums`:
    the documents a sweep scores, in its order (so they pair with a sweep's scores), without a sweep.

    ``prepared``: as :func:`sweep_tasks`'s. Keys carry a token of ``run`` (the run's own scratch) and ``sweep``
    (the sweeps before this scoring), with the blocks and parameters, as a sweep's do: no N×K array is hashed.
    """
    token = tokenize(prepared(0), params, run, sweep)
    topics = dask.delayed(collapsed_topics(counts, params.eta), name=f"refine-validate-topics{sweep}-{token}")
    tasks = [dask.delayed(_validation_block, pure=True)(block, topics, params.alpha,
                                                        dask_key_name=f"refine-validate{sweep}-{token}-{i}")
             for i, block in enumerate(prepared(0))]
    return tree_sum(tasks, prefix=f"refine-validate-sum{sweep}-{token}")


def _finish_block(block: Block, index: int, params: SweepParams, shared: tuple, start: tuple[np.ndarray, np.ndarray],
                  state_in: str, out_dir: str) -> BlockSums:
    """``start``: the source model's ``B`` and document prior, scored on the held-out documents beside the
    final topics (what the refined model is compared with; no choice of the fit depends on it)."""
    (X, hashes), valid, held, table = split_block(block, params)
    update_from, topics = shared
    group = doc_groups(hashes, params.groups)
    state = np.empty((X.shape[0], update_from.shape[1]))
    for g in range(params.groups):
        state[group == g] = load_array(_gamma_url(state_in, index, g))
    if params.method in COLLAPSED_METHODS:
        bound = cvb0_step(X, update_from, params.alpha, params.eta, state, max_iter=0).log_likelihood
        theta, gamma = collapsed_theta(state, params.alpha), state + params.alpha[None, :]
    else:
        bound = e_step(X, update_from, params.alpha, state, max_iter=0).bound
        theta, gamma = state / state.sum(axis=1, keepdims=True), state
    k = state.shape[1]
    lengths = np.asarray(X.sum(axis=1)).ravel().astype(np.int64)
    out = pa.table([table.column("doc_id"), pa.array(lengths), pa.FixedSizeListArray.from_arrays(
        pa.array(theta.ravel()), k)], schema=doc_topics_schema(k))
    write_table(join(out_dir, shard_name(index)), out)
    V, valid_hashes = valid
    ll, n_valid_tokens = validation_completion(*split_tokens(V, valid_hashes), valid_hashes, topics, params.alpha)
    final_ll, n_held_tokens = _vb_scores(held, topics, params.alpha)
    start_ll, _ = _vb_scores(held, *start)
    return BlockSums(None, expected_topic_topic(gamma, params.alpha, params.weighting), bound, X.shape[0],
                     int(lengths.sum()), 0,
                     None, np.array([final_ll.sum(), start_ll.sum()]), int(round(n_held_tokens.sum())),
                     valid_doc_loglik=ll, valid_doc_tokens=n_valid_tokens,
                     heldout_sampled=_sampled_check(held, params.heldout_sample, topics, params.alpha, start))


def add_sums(*parts: BlockSums) -> BlockSums:
    """The sums of several :class:`BlockSums` (their validation documents' scores joined in order)."""
    def total(name):  # in the parts' order, one after another (as np.sum(values, axis=0), without the stack)
        values = [getattr(p, name) for p in parts if getattr(p, name) is not None]
        return functools.reduce(np.add, values) if values else None

    def joined(name):  # per document, in the parts' order
        values = [getattr(p, name) for p in parts if getattr(p, name) is not None]
        return np.concatenate(values) if values else None

    return BlockSums(total("counts"), total("topic_topic"), float(sum(p.bound for p in parts)),
                     sum(p.n_docs for p in parts), sum(p.n_tokens for p in parts),
                     sum(p.iterations for p in parts), total("prior_sums"), total("heldout_loglik"),
                     sum(p.heldout_tokens for p in parts), joined("valid_doc_loglik"), joined("valid_doc_tokens"),
                     total("heldout_sampled"))


def tree_sum(parts: list, *, split_every: int = 8, prefix: str = "refine-sum") -> dask.delayed:
    """Reduce delayed :class:`BlockSums` by a tree of sums (fixed order, so the result is deterministic)."""
    level = 0
    while len(parts) > 1:
        parts = [
            dask.delayed(add_sums, pure=True)(*parts[i : i + split_every],
                                              dask_key_name=f"{prefix}-{level}-{tokenize(parts[i:i + split_every])}")
            for i in range(0, len(parts), split_every)
        ]
        level += 1
    return parts[0]


def shared_state(method: str, counts: np.ndarray, eta: float) -> tuple[np.ndarray, np.ndarray]:
    """What every task of a sweep reads: what the method updates from (:func:`_update_from`) and the topics the
    validation documents are scored under."""
    return _update_from(method, counts, eta), collapsed_topics(counts, eta)


def _update_from(method: str, counts: np.ndarray, eta: float) -> np.ndarray:
    """CVB0 and sampled: ``W``; VB: ``exp(E[log β])`` of ``λ = η + W``."""
    return counts if method in COLLAPSED_METHODS else np.exp(dirichlet_expectation(eta + counts, axis=0))


def _shared_in_graph(params: SweepParams, counts: np.ndarray, key: str | None = None) -> dask.delayed:
    """:func:`shared_state` of ``counts`` in the graph (a task that must rerun can always get it), under ``key``
    (default: a token of its value)."""
    return dask.delayed(shared_state(params.method, counts, params.eta), pure=True, name=key)


def _round_state(method: str, eta: float, *latest) -> tuple[np.ndarray, None]:
    """What a round after the first updates from (:func:`_update_from`), of ``W``: the sum of every group's latest
    counts (an array, or the :class:`BlockSums` of a round before), in group order. No topics: only the first
    round scores the validation documents."""
    counts = functools.reduce(np.add, [x.counts if isinstance(x, BlockSums) else x for x in latest])
    return _update_from(method, counts, eta), None


def sweep_tasks(prepared: Callable[[int | None], list], params: SweepParams, counts: np.ndarray,
                parts: list[np.ndarray] | None,
                gamma_in: str | None, gamma_out: str, *, sweep: int) -> dask.delayed:
    """One sweep as one delayed list of :class:`BlockSums`, one per group of documents (:attr:`SweepParams.groups`):
    a task per block and group updates the group's training documents and writes their state, and each group's
    tree sum adds them up.

    Without ``parts`` (the first sweep, or one group) every group starts from ``counts``. With them (each
    group's counts from its last visit, summing to ``counts``) the groups go in turn: a group's tasks start from
    ``W`` with every group before it replaced by its new sums, a task between the rounds forming it, so a sweep
    is still one graph. ``prepared(g)``: a task per block giving its :class:`PreparedBlock` with group ``g``
    (None: every group) — persisted once for every sweep (:func:`prepare_tasks`), or read back from scratch
    (:func:`load_tasks`). A corpus of one block has no rounds to spread: its sweep is one task
    (:func:`_sweep_rounds`) with the same arithmetic in the same order, without a task and a barrier per
    round. Group 0's tasks score the validation documents, under the topics of ``counts``.

    Keys carry a token of ``gamma_out`` and ``sweep`` (with the blocks and parameters): a run's scratch is its
    own and each of its sweeps has its number, so concurrent runs on one scheduler never share results, and no
    N×K array is hashed each sweep.
    """
    token = tokenize(prepared(0), params, gamma_in, gamma_out, sweep)
    first = _shared_in_graph(params, counts, f"refine-shared{sweep}-{token}")
    if len(prepared(0)) == 1:
        return dask.delayed(_sweep_rounds, pure=True)(prepared(None)[0], params, first, parts, gamma_in, gamma_out,
                                                     dask_key_name=f"refine-sweep{sweep}-{token}")
    # one node for the parameters every task reads (not a dataclass for dask to search in every task's arguments)
    task_params = dask.delayed(params, name=f"refine-params{sweep}-{token}", traverse=False)
    shared, sums = first, []
    for g in range(params.groups):
        if parts is not None and g > 0:
            shared = dask.delayed(_round_state, pure=True)(params.method, params.eta, *sums, *parts[g:],
                                                           dask_key_name=f"refine-round{sweep}-{token}-{g}")
        tasks = [
            dask.delayed(_sweep_block, pure=True)(block, i, task_params, shared, gamma_in, gamma_out, g,
                                                  dask_key_name=f"refine-sweep{sweep}-{token}-{g}-{i}")
            for i, block in enumerate(prepared(g))
        ]
        sums.append(tree_sum(tasks, prefix=f"refine-sum{sweep}-{token}-{g}"))
    return dask.delayed(list, pure=True)(sums, dask_key_name=f"refine-groups{sweep}-{token}")


def _sweep_rounds(prepared: PreparedBlock, params: SweepParams, shared: tuple[np.ndarray, np.ndarray],
                  parts: list[np.ndarray] | None, state_in: str | None, state_out: str) -> list[BlockSums]:
    """The sweep of a corpus of one block, every round in this task: :func:`sweep_tasks`' graph of rounds
    computed in its order (the tree sum of one task is that task's sums)."""
    sums: list[BlockSums] = []
    for g in range(params.groups):
        if parts is not None and g > 0:
            shared = _round_state(params.method, params.eta, *sums, *parts[g:])
        sums.append(_sweep_block(prepared, 0, params, shared, state_in, state_out, g))
    return sums


def finish_tasks(blocks: list[Block], params: SweepParams, counts: np.ndarray, start, gamma_in: str,
                 out_dir: str) -> dask.delayed:
    """The last pass from the final counts ``counts``: the bound of the final state, ``A``'s sums, the validation
    score of the final topics and ``doc_topics`` parts written to ``out_dir``."""
    shared = _shared_in_graph(params, counts)
    token = tokenize(blocks, params, shared, start, gamma_in, out_dir)
    parts = [
        dask.delayed(_finish_block, pure=True)(block, i, params, shared, start, gamma_in, out_dir,
                                               dask_key_name=f"refine-finish-{token}-{i}")
        for i, block in enumerate(blocks)
    ]
    return tree_sum(parts, prefix=f"refine-finish-sum-{token}")
