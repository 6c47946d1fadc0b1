"""The compiled loop of the exact simplex least squares (numba; no dask, no I/O).

:func:`jsmf_dask.kernels.recover.simplex_least_squares` is a primal active-set
method on a K×K problem per word; in Python its per-step overhead dominates (about
0.55 ms a word at K = 20). This is the same algorithm, step for step, over a whole
block of words. Its KKT solves are Gaussian elimination with partial pivoting;
where a system is (nearly) singular — the case the Python version hands to least
squares — the word is flagged and left to that version.
"""

from __future__ import annotations

import numpy as np
from numba import njit

CONVERGED, CAPPED, FALLBACK = 0, 1, 2


@njit(cache=True)
def _solve(kkt, rhs, m):
    """Solve the leading (m+1)×(m+1) system in place by partial pivoting; False when it is (nearly) singular."""
    n = m + 1
    a = kkt[:n, :n].copy()
    x = rhs[:n].copy()
    for c in range(n):
        p = c
        for r in range(c + 1, n):
            if abs(a[r, c]) > abs(a[p, c]):
                p = r
        if a[p, c] == 0.0:
            return x, False
        if p != c:
            for q in range(n):
                a[c, q], a[p, q] = a[p, q], a[c, q]
            x[c], x[p] = x[p], x[c]
        for r in range(c + 1, n):
            f = a[r, c] / a[c, c]
            if f != 0.0:
                for q in range(c, n):
                    a[r, q] -= f * a[c, q]
                x[r] -= f * x[c]
    for c in range(n - 1, -1, -1):
        s = x[c]
        for q in range(c + 1, n):
            s -= a[c, q] * x[q]
        x[c] = s / a[c, c]
    # the Python version's test for a trustworthy solve: finite, and a small residual
    big_k = 0.0
    big_x = 0.0
    big_r = 0.0
    res = 0.0
    for r in range(n):
        s = -rhs[r]
        for q in range(n):
            s += kkt[r, q] * x[q]
            big_k = max(big_k, abs(kkt[r, q]))
        res += s * s
        big_x = max(big_x, abs(x[r]))
        big_r = max(big_r, abs(rhs[r]))
        if not np.isfinite(x[r]):
            return x, False
    return x, np.sqrt(res) <= 1e-9 * (big_k * big_x + big_r)


@njit(cache=True)
def active_set_block(G, B, max_iter, out, status):
    """Each row ``b`` of ``B``: the minimiser of ``yᵀGy − 2bᵀy`` over the simplex into ``out``; ``status`` per row."""
    k = G.shape[0]
    eps = np.finfo(np.float64).eps
    g_max = np.abs(G).max()
    kkt = np.zeros((k + 1, k + 1))
    rhs = np.zeros(k + 1)
    free = np.zeros(k, dtype=np.int64)
    y = np.zeros(k)
    z = np.zeros(k)
    mu = np.zeros(k)
    half_diag = np.empty(k)
    for a in range(k):
        half_diag[a] = 0.5 * G[a, a]
    for w in range(B.shape[0]):
        b = B[w]
        scale = g_max + np.abs(b).max()
        if scale == 0.0:
            scale = 1.0
        tol = 1e3 * eps * k * scale
        j = np.argmin(half_diag - b)
        y[:] = 0.0
        y[j] = 1.0
        free[0] = j
        m = 1
        status[w] = CAPPED
        for _ in range(max_iter):
            for r in range(m):
                for q in range(m):
                    kkt[r, q] = G[free[r], free[q]]
                kkt[r, m] = 1.0
                kkt[m, r] = 1.0
                rhs[r] = b[free[r]]
            kkt[m, m] = 0.0
            rhs[m] = 1.0
            sol, ok = _solve(kkt, rhs, m)
            if not ok:
                status[w] = FALLBACK
                break
            positive = True
            for r in range(m):
                if not sol[r] > 0:
                    positive = False
            if positive:
                y[:] = 0.0
                for r in range(m):
                    y[free[r]] = sol[r]
                nu = sol[m]
                for a in range(k):
                    s = -b[a] + nu
                    for q in range(k):
                        s += G[a, q] * y[q]
                    mu[a] = s
                for r in range(m):
                    mu[free[r]] = np.inf
                i = np.argmin(mu)
                if mu[i] >= -tol:
                    status[w] = CONVERGED
                    break
                free[m] = i
                m += 1
                continue
            # step from y toward z until the first free variable reaches zero, and drop it
            first = -1
            best = np.inf
            for r in range(m):
                z[r] = y[free[r]]
                if sol[r] <= 0:
                    ratio = z[r] / (z[r] - sol[r])
                    if ratio < best:
                        best = ratio
                        first = r
            for r in range(m):
                z[r] = z[r] + best * (sol[r] - z[r])
            z[first] = 0.0
            kept = 0
            for r in range(m):
                y[free[r]] = max(z[r], 0.0)
            for r in range(m):
                if z[r] > 0:
                    free[kept] = free[r]
                    kept += 1
            m = kept
            if m == 0:  # numerical corner: restart at the best vertex
                j = np.argmin(half_diag - b)
                y[:] = 0.0
                y[j] = 1.0
                free[0] = j
                m = 1
        out[w] = y
