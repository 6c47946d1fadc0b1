"""The anchor floor: how many documents a word must occur in to anchor a topic, raised when the anchors it allows
leave many topics almost no weight in ``A``.

``fit(min_anchor_df='auto')`` picks the anchors among the words in at least :data:`ANCHOR_DF` documents. When
more than :data:`REPICK_WEIGHTLESS_SHARE` of the topics then have almost no weight in ``A``
(:func:`~jsmf_dask.pipeline.fit_model.weightless_topics`), it picks them again, on the same rectified ``C`` (no
second rectification), among the words in at least :func:`raised_floor` documents, recovers ``B`` and ``A``
again, and keeps the pick that leaves fewer such topics (:func:`raise_floor`). A number keeps its floor.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from jsmf_dask.kernels.factorize import anchors_low_rank
from jsmf_dask.kernels.law import law_anchors
from jsmf_dask.kernels.lowrank import LowRankCooccurrence
from jsmf_dask.pipeline.fit_model import weightless_topics
from jsmf_dask.stages.rectify import RectifiedAnchors, RectifyParams

__all__ = ["ANCHOR_DF", "RAISED_DF_SHARE", "REPICK_WEIGHTLESS_SHARE", "first_floor", "raised_floor",
           "repicked_anchors", "RaisedFloor", "floor_line", "raise_floor"]

#: ``min_anchor_df='auto'``: the first pick's floor, in documents (the README's table on the NIPS papers: 10
#: lowered the recovery error by 15% against none and gave the most distinct topics; 30 traded distinctness for
#: specificity).
ANCHOR_DF = 10

#: The second pick's floor: this share of the documents ``C`` counts (at least :data:`ANCHOR_DF`), where more than
#: :data:`REPICK_WEIGHTLESS_SHARE` of the first pick's topics have almost no weight in ``A``. Measured (sessions
#: 39–40, the benchmarks README; ``fit`` alone, 150 AP cycles, held-out perplexity by the exact fold-in against
#: Gibbs's): a floor of 0.5% of the documents on every corpus helped where many topics were weightless (this
#: machine's man pages at K 50, 19 of 50 topics: +221% → +122%; its docstrings at K 50, 6 of 50: +66% → +50%) and
#: on some with none (lda-short-50k +5.0% → +1.3%), but cost Reuters 2.1% / 3.9% (K 20 / 50), MovieLens 0.5–0.6%
#: and this machine's docstrings at K 20 1.5%, where none was: so it is raised only where the first pick fails.
#: As built (0.5% of C's documents, the second pick kept if it leaves fewer such topics), the man pages at K 50:
#: 87 documents, 19 → 4 weightless topics, +221% → +165%.
RAISED_DF_SHARE = 0.005

#: A second pick is tried when more than this share of the topics have almost no weight in ``A``. Seen (sessions
#: 39–40): 6–19 of 50 topics on the machine's docstrings and man pages after 150 cycles (8 and 47 after 50),
#: where the second pick helped; one of 50 on the NIPS papers cut into pieces (after 50 cycles, where a raised
#: floor made the refined models 0.3 and 0.5 points worse) and on the NIPS bag of words (the spectral model 0.5%
#: better): a topic or two, which refine revives, are not worth a second pick.
REPICK_WEIGHTLESS_SHARE = 0.1


def first_floor(min_anchor_df: int | str) -> int:
    """The floor of the first pick: ``min_anchor_df``, or :data:`ANCHOR_DF` for ``'auto'``."""
    return ANCHOR_DF if min_anchor_df == "auto" else int(min_anchor_df)


def raised_floor(n_docs: int) -> int:
    """The second pick's floor for a ``C`` counted over ``n_docs`` documents (:data:`RAISED_DF_SHARE`)."""
    return max(ANCHOR_DF, math.ceil(RAISED_DF_SHARE * n_docs))


def repicked_anchors(anchored: RectifiedAnchors, params: RectifyParams,
                     candidates: np.ndarray) -> RectifiedAnchors | None:
    """The anchors of the same rectified ``C`` among other ``candidates`` (N booleans), and what recovery needs of
    them; None where that ``C`` is not at hand: the Baseline's and DC's (read in their task) and an anchor
    vocabulary's block (its anchors' shares of their rows are read with it)."""
    if anchored.Z is not None:  # ENN: the LAW coordinates
        anchors, pivots = law_anchors(anchored.Z, anchored.p_word, params.n_topics, candidates)
        return dataclasses.replace(anchored, anchors=anchors, pivots=pivots,
                                   C_SS=anchored.rectified.rows(anchors)[:, anchors])
    if anchored.columns is not None or not isinstance(anchored.rectified, LowRankCooccurrence):
        return None
    _, anchors, pivots, Cbar_S, C_SS = anchors_low_rank(anchored.rectified, params.n_topics, candidates=candidates,
                                                        nonnegative=params.end_with == "nonnegative")
    return dataclasses.replace(anchored, anchors=anchors, pivots=pivots, Cbar_S=Cbar_S, C_SS=C_SS)


class RaisedFloor(NamedTuple):
    """What :func:`raise_floor` tried: the floor kept, its candidates, anchors and recovery, and what to record
    (``attrs['anchor_floor']``)."""

    floor: int
    candidates: np.ndarray
    anchored: RectifiedAnchors
    recovered: object  # fit's recovery: Recovered, and the least-squares solves left unconverged
    record: dict


def floor_line(record: dict, n_topics: int) -> str:
    """What ``jsmf fit`` prints about a second pick (a model's ``attrs['anchor_floor']``)."""
    first, second = record["tried"]
    kept = "kept" if record["kept"] == second["min_anchor_df"] else "not kept (no fewer)"
    return (f"anchors picked again among the words in at least {second['min_anchor_df']} documents "
            f"({RAISED_DF_SHARE:.1%} of C's documents), {kept}: {first['weightless']} of {n_topics} topics had "
            f"almost no weight in A with the floor of {first['min_anchor_df']}, {second['weightless']} with it")


def raise_floor(min_anchor_df: int | str, n_docs: int, doc_freq, params: RectifyParams,
                anchored: RectifiedAnchors, A: np.ndarray,
                recover: Callable[[RectifiedAnchors], tuple]) -> RaisedFloor | None:
    """The second pick of ``min_anchor_df='auto'`` (see the module), or None where none is tried.

    Parameters
    ----------
    min_anchor_df : int or 'auto'
        As asked; a number is never raised.
    n_docs : int
        The documents ``C`` counts.
    doc_freq : array-like, shape (N,)
        Each word's document frequency (the store's ``D1``), read only when a second pick is tried.
    params : RectifyParams
    anchored : RectifiedAnchors
        The first pick.
    A : ndarray, shape (K, K)
        The first pick's ``A``.
    recover : callable
        Recovery of ``B`` and ``A`` from a :class:`RectifiedAnchors`: ``(recovered, unconverged)``, the recovered
        topics having ``A``.
    """
    k = params.n_topics
    first = weightless_topics(A).size
    if min_anchor_df != "auto" or params.rectifier not in ("ap", "enn") or first <= REPICK_WEIGHTLESS_SHARE * k:
        return None
    floor = raised_floor(n_docs)
    doc_freq = np.asarray(doc_freq[:])
    candidates = doc_freq >= floor
    if floor <= ANCHOR_DF or candidates.sum() < k:
        return None
    again = repicked_anchors(anchored, params, candidates)
    if again is None:
        return None
    recovered = recover(again)
    second = weightless_topics(recovered[0].A).size
    record = {"rule": "auto", "kept": floor if second < first else ANCHOR_DF,
              "tried": [{"min_anchor_df": ANCHOR_DF, "weightless": int(first)},
                        {"min_anchor_df": floor, "weightless": int(second)}]}
    if second >= first:
        return RaisedFloor(ANCHOR_DF, doc_freq >= ANCHOR_DF, anchored, None, record)
    return RaisedFloor(floor, candidates, again, recovered, record)
