"""What ``fit`` returns and records: :class:`FitResult`, the model's attrs and arrays, the topic lines.

Also the progress records of its cycles (:class:`CycleRecord`), the
convergence checks it runs on what its tasks report (:func:`convergence_issues`)
and the check of the topics' weights in ``A`` (:func:`weightless_topics_message`).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sps

from jsmf_dask.exceptions import ConvergenceWarning
from jsmf_dask.io.fs import write_file
from jsmf_dask.io.model_store import topics_path
from jsmf_dask.io.provenance import library_versions, provenance
from jsmf_dask.io.schema import SCHEMA_VERSION
from jsmf_dask.kernels.lowrank import LowRankCooccurrence
from jsmf_dask.stages.rectify import RectifyParams

__all__ = ["FitResult", "CycleRecord", "cycle_records", "topic_labels", "word_separator", "change_line", "default_name",
           "convergence_issues", "weightless_topics", "weightless_topics_message", "WEIGHTLESS_SHARE", "model_attrs", "low_rank_arrays",
           "low_rank_attrs", "write_topics", "topics_json", "outside_anchors_message"]


def default_name(n_topics: int, rectifier: str) -> str:
    """``k20-ap`` for K = 20 with AP."""
    return f"k{n_topics}-{rectifier}"


def word_separator(words: list[str]) -> str:
    """What separates words in a line: a space, or `` | `` when a word of the vocabulary as shown holds a space
    (item labels such as film titles, which spaces alone would run together)."""
    return " | " if any(" " in w for w in words) else " "


def change_line(k: int, gained: list[int], lost: list[int], words: list[str], *, sep: str | None = None) -> str:
    """``  3 +[gained words] -[lost words]`` or ``  3 unchanged``; ``sep``: :func:`word_separator` of ``words``
    (given by a caller that writes every topic's line, so that the vocabulary is scanned once)."""
    if not gained and not lost:
        return f"{k:3d} unchanged"
    sep = word_separator(words) if sep is None else sep
    return f"{k:3d} +[{sep.join(words[i] for i in gained)}] -[{sep.join(words[i] for i in lost)}]"


def topic_labels(B: np.ndarray, anchors: np.ndarray, words: list[str], n: int = 3) -> list[str]:
    """A name per topic: its anchor word in brackets (a model with anchors), then its ``n`` most probable words
    (:func:`word_separator`).

    ``words`` are the words as shown (:func:`~jsmf_dask.io.parquet.display_words`: with item labels,
    ``ingest(labels=...)``, those labels, e.g. film titles).
    """
    order = np.argsort(-B, axis=0, kind="stable")[:n]
    sep = word_separator(words)
    return [(f"[{words[anchors[k]]}] " if k < len(anchors) else "") + sep.join(words[i] for i in order[:, k])
            for k in range(B.shape[1])]


@dataclass
class FitResult:
    """A fitted model's outputs (also in ``<root>/model.zarr/<name>``)."""

    name: str
    anchors: np.ndarray
    B: np.ndarray
    A: np.ndarray
    A_least_squares: np.ndarray
    words: list[str]
    trace: dict[str, np.ndarray]
    eigenvalues: np.ndarray
    n_iter: int
    url: str
    attrs: dict = field(default_factory=dict)

    def top_words(self, n: int = 20) -> list[list[str]]:
        """Each topic's ``n`` most probable words."""
        order = np.argsort(-self.B, axis=0, kind="stable")[:n]
        return [[self.words[i] for i in order[:, k]] for k in range(self.B.shape[1])]

    def labels(self, n: int = 3) -> list[str]:
        """A short name per topic (:func:`topic_labels`)."""
        return topic_labels(self.B, self.anchors, self.words, n)

    def lines(self, n: int = 20) -> list[str]:
        """One line per topic: its number, then :meth:`labels` with the ``n`` top words."""
        return [f"{k:3d} {label}" for k, label in enumerate(self.labels(n))]


@dataclass
class CycleRecord:
    """One AP or ENN cycle as reported to ``fit``'s ``on_cycle``."""

    cycle: int
    of: int
    relative_change: float
    seconds: float
    eta: float  # seconds left if every cycle up to ``of`` runs, at the pace of the cycles after the first (NaN at it)
    rectifier: str = "ap"

    def line(self) -> str:
        eta = "after the next cycle" if math.isnan(self.eta) else f"{self.eta:.0f} s"
        return (f"fit: {self.rectifier.upper()} cycle {self.cycle}/{self.of}, relative change "
                f"{self.relative_change:.3g}, {self.seconds:.2f} s/cycle, ETA {eta}")


def cycle_records(on_cycle: Callable[[CycleRecord], None], rectifier: str = "ap") -> Callable[[dict], None]:
    """A :func:`_progress.listen` callback turning cycle messages into :class:`CycleRecord` calls.

    The first cycle holds the cold eigensolve on C (on the NIPS papers several times a later cycle, and the
    ETA it gave was 215 s for a fit that took 25 s), so the pace is measured on the cycles after it.
    """
    spent: list[float] = []

    def receive(message: dict) -> None:
        spent.append(float(message["seconds"]))
        left = message["of"] - message["cycle"]
        eta = 0.0 if left == 0 else (math.nan if len(spent) < 2 else left * sum(spent[1:]) / (len(spent) - 1))
        on_cycle(CycleRecord(int(message["cycle"]), int(message["of"]), float(message["relative_change"]),
                             float(message["seconds"]), eta, rectifier))

    return receive


def convergence_issues(trace: dict, eig, n_topics: int, eig_tol: float, solver: str, unconverged: int,
                       n_words: int) -> list[dict]:
    """What stopped short of its tolerance, each as a :class:`ConvergenceWarning` and a record for the attrs.

    The steps run in tasks (where a warning would stay in the worker's log), so
    the driver checks what they report: every eigensolve's relative residual
    against ``eig_tol``, the number of eigenpairs, and the words whose B solver
    stopped at its iteration cap.
    """
    issues: list[dict] = []
    residuals = np.append(np.asarray(trace.get("eig_residual", []), dtype=float), eig.residual)
    above = residuals > eig_tol
    if above.any():
        issues.append({"step": "eigensolve", "tol": eig_tol, "solves_above_tol": int(above.sum()),
                       "of": int(residuals.size), "max_residual": float(residuals.max()),
                       "message": f"{int(above.sum())} of {residuals.size} eigensolves stopped above the relative "
                                  f"residual {eig_tol:g} (largest {residuals.max():.2e}); anchors are sensitive to "
                                  "eigenvector error"})
    if len(eig.values) < n_topics:
        issues.append({"step": "eigensolve", "pairs": int(len(eig.values)), "expected": n_topics,
                       "message": f"the eigensolver returned {len(eig.values)} of the {n_topics} eigenpairs"})
    if unconverged:
        issues.append({"step": "recover", "solver": solver, "words": int(unconverged), "of": n_words,
                       "message": f"the {solver!r} B solver stopped at its iteration cap for {unconverged} of "
                                  f"{n_words} words"})
    for issue in issues:
        warnings.warn(issue["message"], ConvergenceWarning, stacklevel=3)
    return issues


#: A spectral topic has "almost no weight" when its row of ``A`` sums to less than this share of an even one
#: (``1/K``). Seen (session 39) on the man pages of this machine (20,268 documents, 82% of them one command
#: line tool's pages) at K 50: 47 topics of 50 with a row sum under 0.001 after 50 AP cycles (19 after 150; 4
#: and 0 with anchors in at least 100 and 500 documents); the spectral model's held-out perplexity was 5.8× Gibbs's.
#: Of the 20 other (corpus, K) of the quality benchmark's spectral fits: 8 topics of 50 on the docstrings of this
#: machine's Python packages (56,587 documents), one of 50 (2.4–2.6% of an even share) on the NIPS papers cut into
#: 100- and 300-word pieces, none elsewhere (the lowest share mostly above 20% of an even one).
WEIGHTLESS_SHARE = 0.05


def weightless_topics(A: np.ndarray) -> np.ndarray:
    """The topics (indices) whose row of ``A`` sums to less than :data:`WEIGHTLESS_SHARE` of an even share."""
    return np.flatnonzero(A.sum(axis=1) < WEIGHTLESS_SHARE / A.shape[0])


def weightless_topics_message(legality: float, A: np.ndarray, anchors: np.ndarray, words: list[str],
                              min_anchor_df: int, rectifier: str, iterations: int) -> str | None:
    """What to say when some spectral topics have almost no weight in ``A`` (:data:`WEIGHTLESS_SHARE`), else None.

    ``A``'s rows come from the anchors' block of the rectified ``C``: anchors that seldom co-occur with the other
    anchors (rare words, often) leave their topics almost no documents, whatever ``B`` says of them.
    AP's later cycles fill their rows in (``iterations``: the cycles run). ``legality`` is ``ΣA`` before
    normalisation: 0 when no two anchors co-occur at all. The Baseline's ``A``
    (``rectifier='none'``) is only checked for that: without rectification its topics' weights are known to be
    poor (the paper's point), and it is fitted to be compared.
    """
    k = A.shape[0]
    if legality < 0:  # an ε-non-negative C (ENN) whose anchors' block sums below zero
        return (f"the {k} anchors' block of the rectified C gives A a sum of {legality:.3g}, below zero, so A "
                f"cannot be formed and is zero: the rectification has not converged; run more cycles (now "
                f"iterations={iterations}) or use rectifier='ap'")
    if legality == 0:
        return (f"the {k} anchors never co-occur in C (C_SS is zero), so A is zero; this happens without "
                "rectification when rare words are anchors: raise min_anchor_df or use rectifier='ap'")
    if rectifier == "none":
        return None
    weightless = weightless_topics(A)
    if weightless.size == 0:
        return None
    named = ", ".join(repr(words[anchors[t]]) for t in weightless[:3]) + (", ..." if weightless.size > 3 else "")
    cycles = f"more cycles (now iterations={iterations}) or " if rectifier in ("ap", "enn") else ""
    return (f"{weightless.size} of {k} topics have almost no weight in A (under {WEIGHTLESS_SHARE:.0%} of an even "
            f"share; anchors {named}): their anchors seldom co-occur with the others, so the spectral model gives "
            f"them almost no documents; refine repairs this (it weighs each topic by the words it explains); for "
            f"the spectral model itself try {cycles}a higher anchor floor (now min_anchor_df={min_anchor_df})")


def outside_anchors_message(shares: np.ndarray, anchors: np.ndarray, words: list[str], n_vocabulary: int,
                            min_anchor_df: int) -> str | None:
    """What to say when an anchor vocabulary's fit cannot recover some topics, else None.

    ``shares`` are the anchors' ``ρ_k`` (:func:`~jsmf_dask.kernels.anchor_words.column_shares`): where one is 0
    the anchor's row of C has nothing in the vocabulary's columns, the restricted rows say nothing of its topic,
    and ``p(z | i) ∝ ỹ / ρ`` would divide by 0 (a rare word made an anchor by AP's cycles on the vocabulary's block).
    """
    lost = np.flatnonzero(~(shares > 0))
    if lost.size == 0:
        return None
    named = ", ".join(repr(words[anchors[k]]) for k in lost[:3]) + (", ..." if lost.size > 3 else "")
    many = lost.size > 1
    return (f"the anchor{'s' if many else ''} {named} never co-occur{'' if many else 's'} in C with the anchor "
            f"vocabulary's {n_vocabulary} words (a rare word, an anchor after AP's cycles on that vocabulary's "
            f"block), so {'their topics' if many else 'its topic'} cannot be recovered from those words' columns: "
            f"raise min_anchor_df (now {min_anchor_df}), or pass anchor_words=None to fit on every word")


def model_attrs(name, params: RectifyParams, solver, min_anchor_df, path, warm_start, path_reason, n_iter,
                 convergence, legality, final_residual, store) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "params": {"n_topics": params.n_topics, "rectifier": params.rectifier, "iterations": params.iterations,
                   "tol": params.tol, "end_with": params.end_with, "solver": solver, "min_anchor_df": min_anchor_df,
                   "seed": params.seed, "path": path, "eig_tol": params.eig_tol, "warm_start": warm_start,
                   "anchor_words": None if params.anchor_words is None else int(params.anchor_words.size)},
        "path": {"chosen": path, "reason": path_reason},
        "n_iter": n_iter,
        "convergence": convergence,
        "legality": legality,
        "final_eig_residual": final_residual,
        "n_words": store.n_words,
        "tile_size": int(store.attrs["tile_size"]),
        "vocab_hash": store.attrs["vocab_hash"],
        "heldout_fraction": float(store.attrs.get("heldout_fraction", 0.0)),
        "cooccurrence": provenance(store.attrs),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "versions": library_versions(),
    }


def low_rank_arrays(rect: LowRankCooccurrence, vectors: np.ndarray | None = None,
                     values: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The model arrays of a rectified C ``Y Yᵀ + E + r·11ᵀ``: its factor as eigenpairs and E's upper triangle.

    ``Y Yᵀ = vectors · diag(max(values, 0)) · vectorsᵀ``. Without them (AP,
    whose ``Y`` is orthonormal eigenvectors times ``√(λ/s)``) each column is
    split into its squared norm and its direction: entry by entry, so a row
    that is zero (a word the clip emptied) stays exactly zero, which a
    re-orthogonalisation (an SVD) would not keep.
    """
    if vectors is None:
        values = np.einsum("ik,ik->k", rect.Y, rect.Y)
        vectors = rect.Y / np.sqrt(np.where(values > 0, values, 1.0))
    E = sps.triu(rect.E).tocoo()
    return {"Y": vectors, "eigenvalues": values, "correction/rows": E.row.astype(np.int64),
            "correction/cols": E.col.astype(np.int64), "correction/values": E.data}


def low_rank_attrs(rect: LowRankCooccurrence) -> dict:
    return {"shift": rect.r, "correction_nnz": int(rect.E.nnz), "correction_sum": float(rect.E.sum()),
            "form": "C_rect = Y diag(max(eigenvalues, 0)) Y^T + E + shift (E: correction/*, upper triangle)"}


def write_topics(root: str, name: str, fitted: FitResult, n: int = 20) -> None:
    """Write ``fitted.lines()`` to ``<root>/topics/<name>.txt`` and its machine-readable sibling
    ``<root>/topics/<name>.json`` (:func:`topics_json`), each atomically."""
    write_file(topics_path(root, name), "\n".join(fitted.lines(n)) + "\n", root=root)
    write_file(topics_path(root, name)[:-len(".txt")] + ".json", topics_json(name, fitted, n), root=root)


def topics_json(name: str, fitted: FitResult, n: int = 20) -> str:
    """The topics as JSON: ``{"model", "n_topics", "topics": [{"topic", "anchor", "words", "probabilities"}]}``,
    each topic's ``n`` most probable words in order (labels with spaces, e.g. film titles, stay whole)."""
    order = np.argsort(-fitted.B, axis=0, kind="stable")[:n]
    topics = [{"topic": k, "anchor": fitted.words[fitted.anchors[k]] if k < len(fitted.anchors) else None,
               "words": [fitted.words[i] for i in order[:, k]],
               "probabilities": [float(fitted.B[i, k]) for i in order[:, k]]} for k in range(fitted.B.shape[1])]
    return json.dumps({"model": name, "n_topics": int(fitted.B.shape[1]), "topics": topics}, ensure_ascii=False)
