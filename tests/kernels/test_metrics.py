"""The paper's six metrics: hand-computed examples and slow loop references written here."""

import math

import numpy as np
import pytest

from jsmf_dask.kernels.metrics import (
    approximation,
    coherence,
    dissimilarity,
    dominancy,
    fit_partials,
    recovery,
    specificity,
    top_words,
)

B = np.array([[0.5, 0.0], [0.0, 0.5], [0.25, 0.25], [0.25, 0.25]])
A = np.array([[0.3, 0.1], [0.1, 0.5]])


def test_hand_computed_values():
    # dominancy: (0.3/0.4 + 0.5/0.6) / 2
    assert dominancy(A) == (pytest.approx((0.75 + 5 / 6) / 2, abs=1e-15), None)
    # specificity: each topic puts 1/2 on a word of p = 1/4 (1 bit) and 1/4+1/4 on words at p = 1/4 (0 bits)
    assert specificity(B, np.full(4, 0.25)) == pytest.approx(0.5, abs=1e-15)
    # top-2: topic 0 → words 0, 2 (tie 2/3 broken by id); topic 1 → 1, 2; each has one word of its own
    top = top_words(B, 2)
    assert top.tolist() == [[0, 2], [1, 2]]
    assert dissimilarity(top) == 1.0
    D1 = np.array([4.0, 3.0, 2.0, 5.0])
    D2 = np.array([[4, 0, 1, 2], [0, 3, 2, 1], [1, 2, 2, 0], [2, 1, 0, 5]], dtype=float)
    D2_top = np.stack([D2[np.ix_(t, t)] for t in top])
    # paper: ordered pairs; topic 0: log(1.01/2) + log(1.01/4); topic 1: log(2.01/2) + log(2.01/3)
    paper = (math.log(1.01 / 2) + math.log(1.01 / 4) + math.log(2.01 / 2) + math.log(2.01 / 3)) / 2
    assert coherence(top, D1, D2_top, form="paper") == pytest.approx(paper, abs=1e-14)
    # Mimno: the pair (x_2, x_1) with D1 of the higher-ranked word x_1 only
    mimno = (math.log(1.01 / 4) + math.log(2.01 / 3)) / 2
    assert coherence(top, D1, D2_top, form="mimno") == pytest.approx(mimno, abs=1e-14)


def test_exact_model_has_zero_recovery_and_approximation():
    C = B @ A @ B.T
    anchors = np.array([0, 1])
    p = C.sum(axis=1)
    Cbar = C / p[:, None]
    W = B * A.sum(axis=1) / p[:, None]  # p(z = k | x = i) = B_ik p(k) / p(i)
    parts = fit_partials(C * 7.0, B, B @ A, W, Cbar[anchors])  # any overall scale of C
    assert recovery(parts) == pytest.approx(0.0, abs=1e-14)
    assert approximation(parts, B, A) == pytest.approx(0.0, abs=1e-9)


def test_zero_row_of_A_is_nan_with_reason():
    value, why = dominancy(np.array([[0.5, 0.0], [0.0, 0.0]]))
    assert math.isnan(value) and "topics [1]" in why


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_against_slow_references(seed):
    rng = np.random.default_rng(seed)
    n, k, top_n = 40, 4, 6
    C = rng.random((n, n))
    C = C + C.T
    Bm = rng.dirichlet(np.full(n, 0.3), size=k).T
    Am = rng.random((k, k))
    Am = (Am + Am.T) / (Am + Am.T).sum()
    W = rng.dirichlet(np.ones(k), size=n)
    anchors = rng.choice(n, size=k, replace=False)
    Cbar = C / C.sum(axis=1, keepdims=True)
    # blocks of rows summed, as the stage does
    parts = fit_partials(C[:17], Bm[:17], Bm @ Am, W[:17], Cbar[anchors]) + \
        fit_partials(C[17:], Bm[17:], Bm @ Am, W[17:], Cbar[anchors])
    slow_rec = sum(math.sqrt(sum((Cbar[i, j] - sum(W[i, t] * Cbar[anchors[t], j] for t in range(k))) ** 2
                                 for j in range(n))) for i in range(n)) / n
    assert recovery(parts) == pytest.approx(slow_rec, rel=1e-12)
    M = Bm @ Am @ Bm.T
    slow_apx = math.sqrt(sum((C[i, j] / C.sum() - M[i, j]) ** 2 for i in range(n) for j in range(n)))
    assert approximation(parts, Bm, Am) == pytest.approx(slow_apx, rel=1e-8)
    p = C.sum(axis=1) / C.sum()
    slow_spec = sum(sum(Bm[i, t] * math.log2(Bm[i, t] / p[i]) for i in range(n) if Bm[i, t] > 0)
                    for t in range(k)) / k
    assert specificity(Bm, C.sum(axis=1)) == pytest.approx(slow_spec, rel=1e-12)
    top = top_words(Bm, top_n)
    slow_top = [sorted(range(n), key=lambda i: (-Bm[i, t], i))[:top_n] for t in range(k)]
    assert top.tolist() == slow_top
    slow_dis = sum(sum(1 for w in slow_top[t] if all(w not in slow_top[u] for u in range(k) if u != t))
                   for t in range(k)) / k
    assert dissimilarity(top) == slow_dis
    D1 = rng.integers(1, 50, size=n).astype(float)
    D2 = rng.integers(0, 20, size=(n, n)).astype(float)
    D2 = D2 + D2.T
    D2_top = np.stack([D2[np.ix_(t, t)] for t in top])
    slow_paper = sum(math.log((D2[a, b] + 0.01) / D1[b]) for t in slow_top for a in t for b in t if a != b) / k
    slow_mimno = sum(math.log((D2[t[j], t[i]] + 0.01) / D1[t[i]]) for t in slow_top
                     for j in range(top_n) for i in range(j)) / k
    assert coherence(top, D1, D2_top, form="paper") == pytest.approx(slow_paper, rel=1e-12)
    assert coherence(top, D1, D2_top, form="mimno") == pytest.approx(slow_mimno, rel=1e-12)
    Arow = Am.sum(axis=1)
    assert dominancy(Am)[0] == pytest.approx(sum(Am[t, t] / Arow[t] for t in range(k)) / k, rel=1e-12)


def test_word_topic_entropy_by_hand():
    """Two topics over three words: the middle word (half the tokens) is in both, the others in one. Even shares
    split it 1:1 (1 bit, weighted by 1/2: 0.5); shares 3:1 split it 0.75:0.25 (0.8113 bits: 0.4056). A word no
    topic holds is left out, and p need not be normalised."""
    from jsmf_dask.kernels.metrics import word_topic_entropy

    B = np.array([[0.5, 0.0], [0.5, 0.5], [0.0, 0.5]])
    p = np.array([0.25, 0.5, 0.25])
    assert word_topic_entropy(B, np.array([0.5, 0.5]), p) == pytest.approx(0.5, abs=1e-15)
    split = -(0.75 * np.log2(0.75) + 0.25 * np.log2(0.25))  # 0.811278...
    assert word_topic_entropy(B, np.array([0.75, 0.25]), p) == pytest.approx(0.5 * split, abs=1e-15)
    B0 = np.vstack([B, np.zeros((1, 2))])
    assert word_topic_entropy(B0, np.array([0.5, 0.5]), 4 * np.append(p, 0.1)) == pytest.approx(0.5, abs=1e-15)
    assert word_topic_entropy(np.eye(3), np.full(3, 1 / 3), np.ones(3)) == 0.0  # every word in one topic
