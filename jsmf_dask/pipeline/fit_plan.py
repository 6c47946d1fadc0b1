"""Where ``fit`` runs its rectification: the execution path and the worker, from the memory each needs.

The in-task path needs about ``2.5 · 8N²`` bytes in one task
(:func:`in_task_memory`), the low-rank path
(ENN + LAW) O(N·K) (:func:`~jsmf_dask.kernels.enn.enn_min_memory`), the
tiled path one tile per task. :func:`choose_path` picks one for
``path='auto'`` from the largest worker's memory limit (or the planned limit
of a LocalCluster not started yet); the others check that the worker chosen
holds what its task needs, before anything runs. A fit on an anchor vocabulary
(:func:`plan_anchor_vocabulary`) runs in one task of :func:`anchor_words_memory`.
"""

from __future__ import annotations

import numpy as np
import psutil

from jsmf_dask.cluster import registered_workers
from jsmf_dask.exceptions import ClusterError, InvalidParameterError, StoreError
from jsmf_dask.io.parquet import corpus_dir, list_blocks, read_vocabulary
from jsmf_dask.kernels.anchor_words import anchor_vocabulary
from jsmf_dask.kernels.eigen import cold_start_memory
from jsmf_dask.kernels.enn import enn_min_memory

__all__ = ["in_task_memory", "anchor_words_memory", "plan_anchor_vocabulary", "IN_TASK_SHARE", "largest_memory", "fat_worker", "concurrent_in_task_fits", "check_low_rank_memory", "dense_start_fits",
           "choose_path"]


def plan_anchor_vocabulary(root: str, store, n_topics: int, anchor_words: int, min_anchor_df: int, *,
                           rectifier: str | None, path: str, warm_start, auto: bool) -> tuple | None:
    """The anchor vocabulary of a fit (its ``anchor_words`` words of highest tf·idf, sorted) and the anchor
    candidates (every word's ``D1 >= min_anchor_df``), each request checked; None where ``auto`` fits every word
    instead: the fit asked for cannot take one (a compressed store, another rectifier, the tiled path, a warm
    start), or fewer than K of those words may be anchors (an explicit ``anchor_words`` raises)."""
    refused = [why for asked, why in (
        (store.compressed, f"{store.url} is compressed (no dense C to take the block from)"),
        (rectifier not in (None, "ap"), f"rectifier={rectifier!r} was asked for (it needs AP)"),
        (path == "tiled", "path='tiled' was asked for (the block is rectified in one task)"),
        (warm_start is not None, "a warm start was given (its eigenvectors span every word)"),
    ) if asked]
    if refused and auto:
        return None
    if refused:
        raise InvalidParameterError(f"The 'anchor_words' parameter of fit ({anchor_words}) cannot be used: "
                                    f"{'; '.join(refused)}. Leave it unset to fit on every word")
    if anchor_words <= n_topics:
        raise InvalidParameterError(f"The 'anchor_words' parameter of fit must be above n_topics={n_topics} (the "
                                    f"block holds the {n_topics} anchors and the words they are told apart by). "
                                    f"Got {anchor_words} instead.")
    counts = read_vocabulary(corpus_dir(root))
    vocabulary = anchor_vocabulary(np.asarray(counts.column("df")), np.asarray(counts.column("tf")),
                                   sum(b.n_rows for b in list_blocks(corpus_dir(root))), anchor_words)
    candidates = store.D1[:] >= min_anchor_df
    if candidates[vocabulary].sum() < n_topics:
        if auto:  # a tiny corpus whose highest tf·idf words are mostly in few documents
            return None
        raise InvalidParameterError(
            f"only {int(candidates[vocabulary].sum())} of the {anchor_words} anchor words occur in at least "
            f"min_anchor_df={min_anchor_df} documents; need at least n_topics={n_topics}. Lower min_anchor_df.")
    return vocabulary, candidates


def anchor_words_memory(n_words: int, anchor_words: int) -> int:
    """Bytes a fit on an anchor vocabulary of ``anchor_words`` words needs in its task: C's columns of those words
    (8·N·n) and :func:`in_task_memory` of their block (whose slack holds the chunk of C's rows being read)."""
    return 8 * n_words * anchor_words + in_task_memory(anchor_words)


def in_task_memory(n_words: int) -> int:
    """Bytes the in-task path needs: C and a dense rectified C (2 · 8N²), plus 1/2 · 8N² of slack.

    DC and the Baseline form the dense rectified C. AP's iterates are
    factored (:class:`~jsmf_dask.kernels.ap.DenseAP`; in one N×N buffer
    where the clip is not sparse) and so is its result
    (:func:`~jsmf_dask.kernels.factorize.rectify_low_rank`); measured at
    N = 8,000 on a sampled corpus when AP still formed the dense result, the
    peak of ``rectify`` and the anchors was 2.14 · 8N² including C (3% of the
    entries clipped in the first cycle; the dense iterates took 4.1 · 8N²).
    """
    return int(2.5 * 8 * n_words * n_words) + (256 << 20)


def largest_memory(client) -> tuple[str | None, int, str]:
    """The worker with the most memory: (address or None when running locally, its limit in bytes, a label)."""
    if client is None:
        return None, psutil.virtual_memory().available, "this process (available memory)"
    workers = registered_workers(client)
    if not workers:  # connect() waited for them: they left since
        raise ClusterError(f"no worker is registered with the scheduler at {client.scheduler.address} (they left "
                           "since the command started): the fit needs one to plan where it runs; start workers "
                           "and rerun (committed stages are kept)")
    addr, info = max(workers.items(), key=lambda kv: kv[1].get("memory_limit") or 0)
    return addr, info.get("memory_limit") or psutil.virtual_memory().total, f"the largest worker ({addr})"


#: Share of a worker's memory limit the in-task path may plan to use (dask pauses a worker at 80%).
IN_TASK_SHARE = 0.8


def fat_worker(client, need: int) -> str | None:
    """The worker a task of ``need`` bytes must run on, after checking the largest holds it: the one with the
    most memory, or None when any worker would do (every worker's limit holds it) or dask runs locally.

    Unpinned, the scheduler places the task on a free worker, so fits submitted side by side (``choose-k``,
    two drivers) spread over the workers instead of queueing on one.
    """
    addr, limit, where = largest_memory(client)
    _check_fits(need, limit, f"the in-task rectification needs about {need / 2**30:.1f} GiB in one task; {where} "
                f"has a memory limit of {limit / 2**30:.1f} GiB", ", or use path='tiled'.", digits=1)
    if client is not None and all(need <= IN_TASK_SHARE * _limit(info) for info in registered_workers(client).values()):
        return None
    return addr


def concurrent_in_task_fits(client, need: int) -> int:
    """How many in-task fits of ``need`` bytes the cluster holds at once when the scheduler places them freely:
    the workers' threads, if every worker holds ``need`` for each of its threads; else 1 (a fit could land
    where a second one does not fit)."""
    workers = registered_workers(client)
    if not workers or any(need * max(int(info.get("nthreads") or 1), 1) > IN_TASK_SHARE * _limit(info)
                          for info in workers.values()):
        return 1
    return sum(max(int(info.get("nthreads") or 1), 1) for info in workers.values())


def _limit(info: dict) -> int:
    return int(info.get("memory_limit") or psutil.virtual_memory().total)


def _check_fits(need: int, limit: int, figures: str, advice: str = "", *, digits: int = 2) -> None:
    """Raise :class:`StoreError` (``figures``, then the --memory-limit that would do) unless ``need`` bytes fit
    the share :data:`IN_TASK_SHARE` of ``limit``."""
    if need > IN_TASK_SHARE * limit:
        raise StoreError(f"{figures}. Start a worker with --memory-limit of at least "
                         f"{need / IN_TASK_SHARE / 2**30:.{digits}f}GiB{advice}")


def check_low_rank_memory(client, n_words: int, n_topics: int, dense_start: bool) -> tuple[str | None, int]:
    """The worker to run ENN + LAW on and the bytes its cycles may use, after checking it holds the least they need.

    The least is :func:`~jsmf_dask.kernels.enn.enn_min_memory` (every
    eigensolve exact), plus the dense C and its first eigensolve's basis
    (:func:`~jsmf_dask.kernels.eigen.cold_start_memory`) when the task loads it; the budget is
    the worker's share :data:`IN_TASK_SHARE` of its limit.
    """
    need = _low_rank_need(n_words, n_topics, dense_start)
    addr, limit, where = largest_memory(client)
    _check_fits(need, limit, f"the low-rank rectification (ENN + LAW) needs about {need / 2**30:.2f} GiB in one task "
                f"for N = {n_words}, K = {n_topics} (O(N·K)); {where} has a memory limit of {limit / 2**30:.2f} GiB")
    return addr, int(IN_TASK_SHARE * limit)


def choose_path(client, n_words: int, rectifier: str, *, low_rank: bool = False,
                planned: int | None = None) -> tuple[str, str]:
    """``path='auto'``: the in-task path where its dense C and iterates fit the largest worker, else the
    low-rank path (ENN + LAW, when the rectifier was left to the default: ``low_rank``) or the tiled one.

    ``planned`` is the workers' memory limit of a LocalCluster not started yet
    (so that the choice, and the model name it implies, are known before it starts).
    Returns the path and the reason (stored in the model's attrs and printed).
    """
    need = in_task_memory(n_words)
    if planned is not None:
        limit, where = planned, "each worker of the LocalCluster"
    else:
        _, limit, where = largest_memory(client)
    figures = (f"the in-task path needs about {need / 2**30:.2f} GiB for N = {n_words}; {where} has "
               f"{limit / 2**30:.2f} GiB")
    if need <= IN_TASK_SHARE * limit:
        return "in-task", f"{figures}: it fits"
    if low_rank:
        return "low-rank", (f"{figures}: too little, so ENN + LAW in O(N·K) memory (rectifier='ap' with "
                            "path='tiled' keeps AP, C in tiles)")
    if rectifier == "dc":
        raise StoreError(f"{figures}, and rectifier='dc' runs only in one task (it needs the whole C): start a "
                         f"worker with --memory-limit of at least {need / IN_TASK_SHARE / 2**30:.1f}GiB")
    return "tiled", f"{figures}: too little, so C stays in tiles"


def dense_start_fits(client, n_words: int, n_topics: int) -> bool:
    """Whether ENN's task can load the dense C and take its top-K eigenpairs itself (else the runner computes
    them by tiled products), besides what its cycles need at least."""
    return _low_rank_need(n_words, n_topics, True) <= IN_TASK_SHARE * largest_memory(client)[1]


def _low_rank_need(n_words: int, n_topics: int, dense_start: bool) -> int:
    """Bytes ENN + LAW's task needs at least: its cycles, plus the dense C and its first eigensolve's basis
    when it loads them."""
    dense = 8 * n_words * n_words + cold_start_memory(n_words, n_topics) if dense_start else 0
    return enn_min_memory(n_words, n_topics) + dense
