"""The anchor floor's second pick (pipeline.anchor_floor): when it is tried, what it picks, what it keeps.

The end-to-end case (a fit whose first pick leaves rare anchors weightless) is in ``test_fit.py``; here the rule
by hand, on a small rectified C in LAW form (ENN's): topic ``t``'s anchor is word ``t``, a rare word ``5 + t``
has the same column, and the floor decides which of the two is picked.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from jsmf_dask.pipeline import anchor_floor
from jsmf_dask.pipeline.anchor_floor import (
    ANCHOR_DF,
    RAISED_DF_SHARE,
    REPICK_WEIGHTLESS_SHARE,
    first_floor,
    floor_line,
    raise_floor,
    raised_floor,
    repicked_anchors,
)
from jsmf_dask.pipeline.fit_model import WEIGHTLESS_SHARE
from jsmf_dask.stages.rectify import RectifiedAnchors, RectifyParams


class _Rows:
    """A rectified C that only hands out rows (what the LAW form's second pick reads: C_SS)."""

    def __init__(self, C):
        self.C = C

    def rows(self, index):
        return self.C[np.asarray(index)]


def _law_form(k: int = 5):
    """Z (K × N): word t and word 5 + t are topic t's pure words (the rare one a little longer, so the greedy pick
    prefers it when it may), then mixed words; C = Zᵀ Z."""
    rng = np.random.default_rng(0)
    pure = np.eye(k)
    Z = np.hstack([pure, 1.2 * pure, rng.dirichlet(np.ones(k), size=20).T * 0.5])
    C = Z.T @ Z
    anchored = RectifiedAnchors(rectified=_Rows(C), eig=None, trace={}, n_iter=1, p_word=C.sum(axis=1),
                                anchors=np.arange(k, 2 * k), pivots=np.arange(k, 2 * k), C_SS=C[k:2 * k, k:2 * k],
                                Z=Z)
    doc_freq = np.full(Z.shape[1], 1000)
    doc_freq[k:2 * k] = 12  # the rare words
    return anchored, doc_freq


def _A(weightless: int, k: int = 5) -> np.ndarray:
    """An A whose first ``weightless`` rows sum to 1% of an even share (under WEIGHTLESS_SHARE's 5%)."""
    shares = np.full(k, 1.0)
    shares[:weightless] = 0.01
    shares /= shares.sum()
    return np.diag(shares)


class _Recovered:
    def __init__(self, A):
        self.A = A


PARAMS = RectifyParams(n_topics=5, rectifier="enn", iterations=10, tol=None, end_with="nonnegative", eig_tol=1e-6,
                       seed=0)


def test_the_floors_by_hand():
    assert first_floor("auto") == ANCHOR_DF == 10 and first_floor(0) == 0 and first_floor(30) == 30
    assert RAISED_DF_SHARE == 0.005
    assert raised_floor(1000) == 10  # 5 documents: never below the first floor
    assert raised_floor(2001) == 11  # 10.005, rounded up
    assert raised_floor(17_300) == 87
    assert raised_floor(17_400) == 87 and raised_floor(17_401) == 88


def test_the_second_pick_reads_the_same_rectified_C_with_the_new_candidates():
    anchored, doc_freq = _law_form()
    again = repicked_anchors(anchored, PARAMS, doc_freq >= 100)
    np.testing.assert_array_equal(np.sort(again.anchors), np.arange(5))  # the common pure words now
    C = anchored.rectified.C
    np.testing.assert_array_equal(again.C_SS, C[np.ix_(again.anchors, again.anchors)])
    assert again.Z is anchored.Z and again.rectified is anchored.rectified
    # with every word a candidate the rare, longer columns win, as in the first pick
    np.testing.assert_array_equal(np.sort(repicked_anchors(anchored, PARAMS, doc_freq >= 0).anchors), np.arange(5, 10))


def test_a_second_pick_is_tried_only_beyond_a_tenth_of_the_topics_weightless(monkeypatch):
    anchored, doc_freq = _law_form()
    monkeypatch.setattr(anchor_floor, "RAISED_DF_SHARE", 0.01)  # 10,000 documents: a floor of 100
    calls = []

    def recover(again):
        calls.append(np.sort(again.anchors))
        return _Recovered(_A(0)), 0

    assert REPICK_WEIGHTLESS_SHARE == 0.1
    assert _A(1).sum(axis=1)[0] < WEIGHTLESS_SHARE / 5 <= _A(1).sum(axis=1)[1]
    # one of 5 topics (20%) is more than a tenth: tried
    raised = raise_floor("auto", 10_000, doc_freq, PARAMS, anchored, _A(1), recover)
    assert raised.floor == 100 and raised.recovered[0].A is not None
    np.testing.assert_array_equal(calls[0], np.arange(5))
    np.testing.assert_array_equal(raised.candidates, doc_freq >= 100)
    assert raised.record == {"rule": "auto", "kept": 100, "tried": [{"min_anchor_df": 10, "weightless": 1},
                                                                    {"min_anchor_df": 100, "weightless": 0}]}
    assert floor_line(raised.record, 5) == ("anchors picked again among the words in at least 100 documents (1.0% "
                                            "of C's documents), kept: 1 of 5 topics had almost no weight in A with "
                                            "the floor of 10, 0 with it")
    monkeypatch.setattr(anchor_floor, "REPICK_WEIGHTLESS_SHARE", 0.2)  # one of 5 is not more than a fifth
    assert raise_floor("auto", 10_000, doc_freq, PARAMS, anchored, _A(1), recover) is None
    assert raise_floor("auto", 10_000, doc_freq, PARAMS, anchored, _A(0), recover) is None
    assert len(calls) == 1


@pytest.mark.parametrize("case", ["a number", "the baseline", "dc", "a small corpus", "too few candidates",
                                  "an anchor vocabulary"])
def test_no_second_pick(case, monkeypatch):
    """A floor given as a number is the user's; the Baseline and DC have no rectified C at hand (nor are their
    weights in A the point); 0.5% of 2,000 documents is the first floor already; fewer candidates than topics
    cannot be picked from; an anchor vocabulary's block holds only its words' rows."""
    anchored, doc_freq = _law_form()
    given, params, n_docs = "auto", PARAMS, 100_000
    if case == "a number":
        given = 10
    elif case in ("the baseline", "dc"):
        params = RectifyParams(5, "none" if case == "the baseline" else "dc", 1, None, "nonnegative", 1e-6, 0)
    elif case == "a small corpus":
        n_docs = 2000
    elif case == "too few candidates":
        doc_freq = np.where(np.arange(doc_freq.size) < 4, 10**6, 12)  # 4 words above 500 documents, 5 topics
    else:
        monkeypatch.setattr(anchored, "Z", None)
        monkeypatch.setattr(anchored, "columns", object())

    def recover(again):
        raise AssertionError("no second recovery")

    assert raise_floor(given, n_docs, doc_freq, params, anchored, _A(3), recover) is None


def test_a_second_pick_that_leaves_no_fewer_weightless_topics_is_not_kept():
    anchored, doc_freq = _law_form()
    raised = raise_floor("auto", 100_000, doc_freq, PARAMS, anchored, _A(2), lambda again: (_Recovered(_A(2)), 0))
    assert raised.floor == ANCHOR_DF and raised.recovered is None and raised.anchored is anchored
    np.testing.assert_array_equal(raised.candidates, doc_freq >= ANCHOR_DF)
    assert raised.record["kept"] == 10 and raised.record["tried"][1] == {"min_anchor_df": math.ceil(500),
                                                                         "weightless": 2}
    assert "not kept (no fewer): 2 of 5 topics" in floor_line(raised.record, 5)
