"""The compiled accumulation of a tile of ``H̃ᵀH̃`` (numba; no dask, no I/O).

See :func:`jsmf_dask.kernels.cooccurrence.tile_products`. Releases the GIL, so
tiles run in parallel on the threads scheduler too.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True)
def accumulate_tile(lt_indptr, lt_indices, lt_data, r_indptr, r_indices, r_data, cooc, counts, with_counts,
                    upper):
    """``cooc[i, j] += Σ_d L[d, i] R[d, j]`` (and ``counts[i, j] += Σ_d 1``), row ``i`` of the tile at a time.

    ``Lᵀ`` (rows: the tile's row words; columns: documents) and ``R`` (rows:
    the same documents; columns: the tile's column words, sorted in each row)
    are CSR. Row ``i`` gathers, for each document containing word ``i``, that
    document's row of ``R`` (Gustavson's order), so the writes stay in one
    contiguous row of the dense tile. ``upper``: only ``j >= i`` (a diagonal
    tile, ``L`` = ``R``; the caller mirrors it).
    """
    for i in range(lt_indptr.shape[0] - 1):
        row = cooc[i]
        count_row = counts[i if with_counts else 0]
        for a in range(lt_indptr[i], lt_indptr[i + 1]):
            d = lt_indices[a]
            x = lt_data[a]
            start = r_indptr[d]
            if upper:  # the row's indices are sorted: skip those below i
                lo, hi = start, r_indptr[d + 1]
                while lo < hi:
                    mid = (lo + hi) // 2
                    if r_indices[mid] < i:
                        lo = mid + 1
                    else:
                        hi = mid
                start = lo
            for b in range(start, r_indptr[d + 1]):
                j = r_indices[b]
                row[j] += x * r_data[b]
                if with_counts:
                    count_row[j] += 1
