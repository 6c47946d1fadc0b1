"""The compiled active set's Cholesky updates against a factorisation from scratch (the recovery of B runs on them)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jsmf_dask.kernels._simplex_loop import _cholesky_append, _cholesky_delete, _cholesky_solve
from tests.conftest import examples


def gram(k: int, seed: int) -> np.ndarray:
    """A positive definite Gram matrix of k random rows, scaled like C̄'s (entries about 1e-4)."""
    S = np.random.default_rng(seed).random((k, 3 * k)) * 1e-2
    return S @ S.T


@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(2, 30), data=st.data())
def test_appends_and_deletes_keep_the_factor_of_the_free_block(seed, k, data):
    """After any sequence of variables joining (at the end) and leaving (anywhere), the leading block of ``L`` is
    the Cholesky factor of ``G`` on the free variables in their order — the unique one with a positive diagonal,
    so equal to numpy's to rounding (1e-10 relative to ``G``'s scale; the updates are backward stable)."""
    G = gram(k, seed)
    L = np.zeros((k, k))
    free = np.zeros(k, dtype=np.int64)
    m = 0
    outside = list(range(k))
    for _ in range(data.draw(st.integers(1, 3 * k))):
        join = m == 0 or (outside and data.draw(st.booleans()))
        if join:
            i = outside.pop(data.draw(st.integers(0, len(outside) - 1)))
            free[m] = i
            assert _cholesky_append(L, m, G, free, i, k)
            m += 1
        else:
            r = data.draw(st.integers(0, m - 1))
            _cholesky_delete(L, m, r)
            outside.append(int(free[r]))
            free[r:m - 1] = free[r + 1:m].copy()
            m -= 1
        sub = G[np.ix_(free[:m], free[:m])]
        np.testing.assert_allclose(np.tril(L[:m, :m]), np.linalg.cholesky(sub), rtol=0,
                                   atol=1e-10 * np.sqrt(G.max()))
        x = np.arange(1.0, m + 1)
        _cholesky_solve(L, m, x)
        np.testing.assert_allclose(sub @ x[:m], np.arange(1.0, m + 1), rtol=1e-8)


def test_a_dependent_variable_is_refused():
    """A variable whose row of ``G`` is a combination of the free ones' (repeated anchor rows) makes the pivot
    vanish to rounding: refused, so the word goes on by pivoted elimination."""
    S = np.random.default_rng(1).random((3, 8))
    S = np.vstack([S, S[0] * 0.5 + S[1] * 0.5])
    G = S @ S.T
    L = np.zeros((4, 4))
    free = np.array([0, 1, 2, 3])
    for m in range(3):
        assert _cholesky_append(L, m, G, free, free[m], 4)
    assert not _cholesky_append(L, 3, G, free, 3, 4)
