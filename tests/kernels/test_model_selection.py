"""Choosing K from per-document scores (:mod:`jsmf_dask.kernels.model_selection`) and NPMI coherence."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jsmf_dask.kernels.metrics import npmi_coherence
from jsmf_dask.kernels.model_selection import paired_gap, perplexity_curve, ratio_se, recommend_k

from ..conftest import examples


def test_perplexity_curve_by_hand():
    # three documents of 2, 3 and 5 scored tokens under two K
    n = np.array([2.0, 3.0, 5.0])
    L = np.array([[-4.0, -6.0, -10.0],    # -2 per token
                  [-4.0, -7.5, -11.0]])   # -22.5 / 10 per token
    curve = perplexity_curve([5, 10], L, n)
    assert curve.loglik_per_token == pytest.approx([-2.0, -2.25])
    assert curve.perplexity == pytest.approx([math.exp(2.0), math.exp(2.25)])
    assert curve.best == 5
    assert curve.gap_to_best == pytest.approx([0.0, 0.25])
    # the paired gap per document a = [0, 1.5, 1], r = 0.25; residuals a - r n = [-0.5, 0.75, -0.25]
    se = math.sqrt(3 / 2 * (0.25 + 0.5625 + 0.0625)) / 10
    assert curve.paired_se == pytest.approx([0.0, se], rel=1e-12)
    assert (curve.n_docs, curve.n_tokens) == (3, 10)


def test_ratio_se_and_paired_gap_by_hand():
    n = np.array([2.0, 3.0, 5.0])
    L_best, L = np.array([-4.0, -6.0, -10.0]), np.array([-4.0, -7.5, -11.0])
    gap, se = paired_gap(L_best, L, n)
    assert gap == pytest.approx(0.25)
    assert se == pytest.approx(math.sqrt(3 / 2 * (0.25 + 0.5625 + 0.0625)) / 10, rel=1e-12)  # as above
    # one model alone: a = L_best, r = -2, residuals a - r n = [0, 0, 0]: every document scores -2 per token
    assert ratio_se(L_best, n) == 0.0
    # residuals of L: r = -2.25, a - r n = [0.5, -0.75, 0.25]
    assert ratio_se(L, n) == pytest.approx(math.sqrt(3 / 2 * (0.25 + 0.5625 + 0.0625)) / 10, rel=1e-12)
    assert math.isnan(ratio_se(np.array([-3.0]), np.array([2.0])))  # one document: no spread to measure


@given(seed=st.integers(0, 2**32 - 1), n_docs=st.integers(2, 60), shift=st.floats(-1.0, 1.0))
def test_a_per_token_shift_is_a_gap_without_error(seed, n_docs, shift):
    """A model whose every document scores ``shift`` per token below another's: the gap is ``shift`` exactly
    and its paired error 0, however noisy either model's own score is."""
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 50, n_docs).astype(np.float64)
    L = -rng.gamma(5.0, 1.0, n_docs) * n
    gap, se = paired_gap(L, L - shift * n, n)
    assert gap == pytest.approx(shift, abs=1e-12)
    assert se == pytest.approx(0.0, abs=1e-12)
    assert ratio_se(L, n) >= 0


def test_documents_without_scored_tokens_are_ignored():
    n = np.array([2.0, 0.0, 5.0])
    L = np.array([[-4.0, 0.0, -10.0], [-5.0, 0.0, -9.0]])
    curve = perplexity_curve([2, 3], L, n)
    assert curve.n_docs == 2
    assert curve.loglik_per_token == pytest.approx([-2.0, -2.0])


def test_recommend_the_smallest_k_within_one_paired_standard_error():
    rng = np.random.default_rng(0)
    n = rng.integers(20, 60, size=400).astype(float)
    base = -6.0 * n + rng.normal(0, 3, size=400)
    e = rng.normal(0, 0.05, size=400)
    e -= e.sum() / n.sum() * n  # K=20 differs from K=10 by noise that sums to no gain ...
    se = math.sqrt(400 / 399 * np.sum(e**2)) / n.sum()
    # ... plus a gain of half its paired standard error: the best by a margin the documents cannot resolve
    L = np.vstack([base - 0.3 * n, base, base + e + 0.5 * se * n])
    curve = perplexity_curve([5, 10, 20], L, n)
    assert curve.best == 20 and curve.gap_to_best[1] == pytest.approx(0.5 * se)
    assert recommend_k(curve) == 10
    # a gain of three standard errors is resolved: 20 it is
    L[2] = base + e + 3 * se * n
    assert recommend_k(perplexity_curve([5, 10, 20], L, n)) == 20


@given(st.integers(2, 6), st.integers(2, 40), st.integers(0, 2**32 - 1))
def test_curve_properties(n_k, n_docs, seed):
    examples(60)
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 50, size=n_docs).astype(float)
    L = -rng.uniform(1, 10, size=(n_k, n_docs)) * n
    topics = sorted(rng.choice(np.arange(2, 200), size=n_k, replace=False).tolist())
    curve = perplexity_curve(topics, L, n)
    assert (curve.gap_to_best >= -1e-15).all()
    assert curve.gap_to_best.min() == 0.0 and curve.loglik_per_token.max() == curve.loglik_per_token[topics.index(curve.best)]
    assert np.allclose(curve.perplexity, np.exp(-curve.loglik_per_token))
    assert (curve.paired_se >= 0).all()
    assert recommend_k(curve) <= curve.best and recommend_k(curve) in topics


def _npmi_by_hand(top, D1, D2, M):
    out = []
    for words in top:
        vals = []
        for a in range(len(words)):
            for b in range(a + 1, len(words)):
                x, y = words[a], words[b]
                pxy = D2[x, y] / M
                if pxy == 0:
                    vals.append(-1.0)
                    continue
                px, py = D1[x] / M, D1[y] / M
                vals.append(math.log(pxy / (px * py)) / -math.log(pxy))
        out.append(sum(vals) / len(vals))
    return sum(out) / len(out)


def test_npmi_by_hand():
    # 10 documents; words 0..3; D2 symmetric with D2[x, x] = D1[x]
    M = 10
    D1 = np.array([5.0, 4.0, 2.0, 6.0])
    D2 = np.array([[5, 3, 0, 2], [3, 4, 1, 2], [0, 1, 2, 1], [2, 2, 1, 6]], dtype=float)
    top = np.array([[0, 1, 2], [3, 1, 0]])
    D2_top = D2[top[:, :, None], top[:, None, :]]
    assert npmi_coherence(top, D1, D2_top, M) == pytest.approx(_npmi_by_hand(top, D1, D2, M), rel=1e-12)


def test_npmi_extremes():
    top = np.array([[0, 1]])
    D1 = np.array([3.0, 3.0])
    always_together = np.array([[[3.0, 3.0], [3.0, 3.0]]])
    never = np.array([[[3.0, 0.0], [0.0, 3.0]]])
    assert npmi_coherence(top, D1, always_together, 9) == pytest.approx(1.0)
    assert npmi_coherence(top, D1, never, 9) == -1.0


def test_a_degenerate_model_is_never_recommended():
    n = np.array([2.0, 3.0, 5.0])
    L = np.array([[np.nan, np.nan, np.nan], [-4.0, -6.0, -10.0], [-4.0, -7.0, -11.0]])
    curve = perplexity_curve([2, 5, 10], L, n)
    assert curve.best == 5 and np.isnan(curve.gap_to_best[0]) and np.isnan(curve.paired_se[0])
    assert recommend_k(curve) == 5
    with pytest.raises(ValueError, match="no candidate K"):
        perplexity_curve([2], L[:1], n)
