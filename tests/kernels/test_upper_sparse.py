"""The symmetric matrix from its upper triangle's entries, against a dense reference built entry by entry."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jsmf_dask.kernels.upper_sparse import UpperSparse, symmetric_from_upper


def _entries(seed: int, n: int, density: float):
    """Row-major entries i ≤ j of a random symmetric pattern (the diagonal in it or not), non-zero values."""
    rng = np.random.default_rng(seed)
    rows, cols = np.nonzero(np.triu(rng.random((n, n)) < density))
    return rows, cols, rng.uniform(0.1, 2.0, rows.size) * rng.choice([-1.0, 1.0], rows.size)


def _dense(rows, cols, values, n):
    D = np.zeros((n, n))
    for i, j, v in zip(rows, cols, values, strict=True):
        D[i, j] += v
        if i != j:
            D[j, i] += v
    return D


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), density=st.floats(0.0, 1.0))
def test_symmetric_from_upper_equals_the_dense_mirror_in_any_order(seed, n, density):
    rows, cols, values = _entries(seed, n, density)
    D = _dense(rows, cols, values, n)
    row_major = symmetric_from_upper(rows, cols, values, n)
    order = np.random.default_rng(seed).permutation(rows.size)  # the same entries in another order
    shuffled = symmetric_from_upper(rows[order], cols[order], values[order], n)
    for E in (row_major, shuffled):
        np.testing.assert_array_equal(E.toarray(), D)  # exact: each entry is a value or the sum of two halves
        assert E.has_canonical_format and E.nnz == np.count_nonzero(D)
    # and the same matrix as UpperSparse's algebra on the upper part alone
    V = np.random.default_rng(seed + 1).standard_normal((n, 3))
    np.testing.assert_allclose(UpperSparse.from_upper(rows, cols, values, n) @ V, D @ V, rtol=1e-12, atol=1e-12)


def test_repeated_entries_add_up():
    E = symmetric_from_upper(np.array([0, 0, 1]), np.array([1, 1, 1]), np.array([1.0, 2.0, 5.0]), 2)
    np.testing.assert_array_equal(E.toarray(), [[0.0, 3.0], [3.0, 5.0]])
