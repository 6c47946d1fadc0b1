"""Tiled AP: the AP loop in the runner, each product and pass over C a graph of row-block tasks.

:class:`TiledAP` is the :class:`~jsmf_dask.kernels.ap.APOperator` whose
products and comparisons are the graphs of :mod:`jsmf_dask.stages.tiled`,
computed through :func:`jsmf_dask._progress.compute`; :func:`rectify_tiled`
drives :func:`~jsmf_dask.kernels.ap.alternating_projection` with it (or the
Baseline's eigensolve and anchors) and returns the same
:class:`~jsmf_dask.stages.rectify.RectifiedAnchors` as the in-task path.
"""

from __future__ import annotations

import numpy as np

from jsmf_dask import _progress
from jsmf_dask.exceptions import InvalidParameterError
from jsmf_dask.io.stored_rows import StoredRows
from jsmf_dask.io.zarr_store import check_entries
from jsmf_dask.kernels.ap import Comparison, LowRankIterate, alternating_projection
from jsmf_dask.kernels.eigen import top_eigenpairs
from jsmf_dask.kernels.factorize import anchors_from_rows, anchors_low_rank
from jsmf_dask.kernels.lowrank import from_iterate
from jsmf_dask.pipeline.fit_model import cycle_records
from jsmf_dask.stages.rectify import RectifiedAnchors, RectifyParams
from jsmf_dask.stages.tiled import clipped_entry_tasks, row_block_tasks

__all__ = ["TiledAP", "check_matrix", "rectify_tiled"]


class TiledAP:
    """The AP operator applied row block by row block as Dask tasks (the tiled path)."""

    cold_start = "lobpcg"  # every product is a pass over the tiles: vectors travel in blocks

    def __init__(self, cooc_url: str, edges: np.ndarray):
        self.source = (cooc_url, "C")
        self.edges = edges

    def _src(self, iterate):
        return self.source if iterate is None else iterate

    def matmat(self, iterate, V):
        return np.vstack(_progress.compute(*row_block_tasks("matmat", self.edges, self._src(iterate), V)))

    def frobenius(self, iterate):
        stats = np.vstack(_progress.compute(*row_block_tasks("rowstats", self.edges, self._src(iterate))))
        return float(np.sqrt(stats[:, 1].sum()))

    def compare(self, previous, current, V=None):
        parts = _progress.compute(*row_block_tasks("compare", self.edges, self._src(previous), current, V))
        acc = np.sum([a for a, _ in parts], axis=0)
        CV = None if V is None else np.vstack([p for _, p in parts])
        return Comparison(float(np.sqrt(acc[0])), float(acc[1]), float(np.sqrt(acc[2])), CV, float(np.sqrt(acc[3])))


def check_matrix(cooc_url: str, edges: np.ndarray) -> np.ndarray:
    """Row statistics of the store's C (sum, sum of squares, minimum, all finite), checked by
    :func:`~jsmf_dask.io.zarr_store.check_entries`: one pass over the tiles. (A task that reads the whole C
    checks it there instead.)"""
    stats = np.vstack(_progress.compute(*row_block_tasks("rowstats", edges, (cooc_url, "C"))))
    check_entries(cooc_url, stats[:, 3].astype(bool), stats[:, 2])
    return stats


def rectify_tiled(cooc_url: str, params: RectifyParams, edges: np.ndarray,
                   candidates: np.ndarray | None, c_stats: np.ndarray, on_cycle=None) -> RectifiedAnchors:
    """The tiled path; ``c_stats`` are the row statistics of C from :func:`check_matrix`."""
    relay = None
    if on_cycle is not None:
        records = cycle_records(on_cycle)

        def relay(cycle, of, change, seconds):
            records({"cycle": cycle, "of": of, "relative_change": change, "seconds": seconds})

    n = int(edges[-1])
    rng = np.random.default_rng(params.seed)
    op = TiledAP(cooc_url, edges)
    trace: dict[str, np.ndarray] = {}
    n_iter = 0
    if params.rectifier == "ap":
        iterate, eig, ap_trace, n_iter = alternating_projection(
            op, n, params.n_topics, iterations=params.iterations, tol=params.tol, eig_tol=params.eig_tol, rng=rng,
            start=params.start(), on_cycle=relay,
        )
        trace = ap_trace.as_arrays()
        if params.end_with == "psd":
            iterate = LowRankIterate(eig.vectors, np.maximum(eig.values, 0.0), 0.0, clip=False)
        parts = _progress.compute(*clipped_entry_tasks(iterate, edges))
        rectified = from_iterate(iterate, None, tuple(np.concatenate(x) for x in zip(*parts, strict=True)))
        p, anchors, pivots, Cbar_S, C_SS = anchors_low_rank(rectified, params.n_topics, candidates=candidates,
                                                             nonnegative=params.end_with == "nonnegative")
    elif params.rectifier == "none":  # C itself divided by its sum, read from the store (no copy)
        scale = float(c_stats[:, 0].sum())
        eig = top_eigenpairs(lambda V: op.matmat(None, V) / scale, n, params.n_topics, tol=params.eig_tol, rng=rng)
        rectified = StoredRows(cooc_url, "C", scale)
        p = c_stats[:, 0] / scale

        def product(q: np.ndarray) -> np.ndarray:
            return np.vstack(_progress.compute(*row_block_tasks("matmat", edges, (cooc_url, "C"), q[:, None])))[:, 0] / scale

        anchors, pivots, Cbar_S, C_SS = anchors_from_rows(params.n_topics, p, c_stats[:, 1] / scale**2,
                                                          rectified.rows, product, candidates=candidates)
    else:
        raise InvalidParameterError("rectifier='dc' runs on the in-task path only (it needs the whole C); "
                                    "use path='in-task' or rectifier='ap'")
    return RectifiedAnchors(rectified, eig, trace, n_iter, p, anchors, pivots, C_SS, Cbar_S=Cbar_S)
