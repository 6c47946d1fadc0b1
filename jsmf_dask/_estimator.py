"""``RectifiedAnchorWords``: the scikit-learn-style estimator over the fit stages."""

from __future__ import annotations

import inspect
import os
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from jsmf_dask._validation import check_int
from jsmf_dask.exceptions import InvalidParameterError, NotFittedError
from jsmf_dask.kernels.factorize import find_anchors, recover, recover_low_rank, rectify
from jsmf_dask.kernels.enn import enn_rectify
from jsmf_dask.kernels.law import law_anchors, law_coordinates
from jsmf_dask.kernels.eigen import top_eigenpairs
from jsmf_dask.parameters import PARAMETERS, parameter
from jsmf_dask.stages.rectify import in_task_blas_threads

__all__ = ["RectifiedAnchorWords"]

_OWNER = "RectifiedAnchorWords"


class RectifiedAnchorWords:
    """Topic model by Rectified Anchor Words (Lee, Bindel & Mimno, NIPS 2015).

    Parameters
    ----------
    n_topics : int, default=10
        K, the number of topics (``2 <= K < N``).
    rectifier : {'ap', 'dc', 'enn', 'none'} or None, default=None
        Alternating projection, diagonal completion, ε-non-negative
        rectification with low-rank anchor inference (O(N·K) memory; the only
        one a compressed store, ``cooccur(rank=...)``, supports), or none (the
        Baseline of Arora et al. 2013). None: :func:`jsmf_dask.fit`'s choice
        (AP where its in-task path fits the workers, else ENN; ENN on a
        compressed store); AP in :meth:`fit_cooccurrence`.
    max_iter : int, default=150
        AP or ENN cycles.
    tol : float or None, default=None
        AP (ENN) stops when ``‖C_t − C_{t−1}‖_F / ‖C_t‖_F`` falls below it; None
        runs all ``max_iter`` cycles (see the README on 1e-6).
    end_with : {'nonnegative', 'psd'}, default='nonnegative'
        AP's last projection.
    solver : {'exact', 'eg'}, default='exact'
        Simplex least-squares solver for B.
    min_anchor_df : int, default=10
        Document-frequency floor of anchor words (:meth:`fit_cooccurrence`: applied when ``doc_freq`` is given).
    random_state : int, default=0
        Seed of the eigensolver's start block and of DC's permutations.
    refine_sweeps : int or None, default=None
        Sweeps of refinement (CVB0, :func:`jsmf_dask.refine`'s default method) over
        the documents after the spectral fit (:func:`jsmf_dask.refine`), which
        bring held-out perplexity below Gibbs sampling's (see README,
        "refine"). None: at most refine's default sweeps (50), stopped earlier
        by its tolerance or the store's validation documents, when fitting a
        run root; 0 keeps the spectral model. :meth:`fit_cooccurrence` has no
        documents, so it does not refine (and refuses ``refine_sweeps > 0``).

    Attributes
    ----------
    components_ : ndarray, shape (n_topics, n_words)
        ``p(word | topic)``; rows sum to 1 (``Bᵀ`` in the paper); the refined
        topics when the fit refined.
    topic_topic_ : ndarray, shape (n_topics, n_topics)
        ``A``: joint topic–topic probabilities, sums to 1 (of the refined model
        when the fit refined).
    spectral_components_ : ndarray, shape (n_topics, n_words)
        The spectral model's topics (equal to ``components_`` without refinement).
    refine_history_ : dict of str to ndarray
        The refinement's per-sweep trace (``bound_per_word``,
        ``relative_change``, ``inner_iterations``, ``seconds``,
        ``validation_perplexity``, ``alpha_sum``, ``eta``); empty without.
    doc_topic_prior_ : ndarray, shape (n_topics,) or None
        The refined model's (learned) document–topic prior ``α``, which
        :meth:`transform` folds documents in with; None without refinement.
    topic_topic_least_squares_ : ndarray, shape (n_topics, n_topics)
        The Baseline's least-squares ``A`` (may have negative entries).
    anchors_ : ndarray of int, shape (n_topics,)
        Anchor word of each (spectral) topic; refined topic k starts from spectral topic k.
    rectification_history_ : dict of str to ndarray
        AP's per-iteration trace (``delta``, ``relative_change``, ``dist_psd``, ``dist_normalized``,
        ``dist_nonnegative``, ``eig_residual``, ``n_matmat``, ``seconds``), or
        ENN's (:class:`~jsmf_dask.kernels.enn.ENNTrace`).
    eigenvalues_ : ndarray, shape (n_topics,)
        Top eigenvalues of the rectified ``C``.
    n_iter_ : int
    vocabulary_ : list of str or None
        Words (set by :meth:`fit` on a run root).

    Examples
    --------
    >>> import numpy as np
    >>> from jsmf_dask import RectifiedAnchorWords
    >>> B = np.array([[.5, 0], [0, .5], [.25, .25], [.25, .25]])
    >>> A = np.array([[.3, .1], [.1, .5]])
    >>> model = RectifiedAnchorWords(n_topics=2, rectifier="none").fit_cooccurrence(B @ A @ B.T)
    >>> model.anchors_.tolist()
    [1, 0]
    """

    def __init__(self, n_topics: int = 10, *, rectifier: str | None = None, max_iter: int = 150,
                 tol: float | None = None, end_with: str = "nonnegative", solver: str = "exact",
                 min_anchor_df: int = 10, random_state: int = 0, refine_sweeps: int | None = None):
        self.n_topics = n_topics
        self.rectifier = rectifier
        self.max_iter = max_iter
        self.tol = tol
        self.end_with = end_with
        self.solver = solver
        self.min_anchor_df = min_anchor_df
        self.random_state = random_state
        self.refine_sweeps = refine_sweeps

    # -------------------------------------------------------------- params
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Parameters as passed to ``__init__``."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> RectifiedAnchorWords:
        """Set parameters (validated at fit time); returns self."""
        for name, value in params.items():
            if name not in self._param_names():
                raise InvalidParameterError(f"Invalid parameter {name!r} for {_OWNER}; valid: {self._param_names()}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        shown = [f"{k}={v!r}" for k, v in self.get_params().items() if defaults.get(k) != v or k == "n_topics"]
        return f"{_OWNER}({', '.join(shown)})"

    def _validate_params(self, n_words: int | None = None) -> None:
        """Each parameter against :data:`jsmf_dask.parameters.PARAMETERS` (``refine_sweeps`` also takes 0 and
        None: no refinement, the stage's default)."""
        for entry in PARAMETERS:
            if entry.estimator and entry.estimator != "refine_sweeps":
                entry.check(getattr(self, entry.estimator), _OWNER, name=entry.estimator)
        if n_words is not None:
            check_int(self.n_topics, "n_topics", _OWNER, low=2, high=n_words - 1)
        if self.rectifier == "enn" and self.end_with != "nonnegative":
            raise InvalidParameterError(f"{_OWNER}: rectifier='enn' always ends with its non-negativity correction; "
                                        f"end_with={self.end_with!r} is for 'ap'")
        check_int(self.refine_sweeps, "refine_sweeps", _OWNER, low=0, allow_none=True)

    # ----------------------------------------------------------------- fit
    def fit(self, X: str | os.PathLike, y: None = None, *, name: str | None = None,
            overwrite: bool = False) -> RectifiedAnchorWords:
        """Fit on a run root holding ``cooc.zarr`` (see ``jsmf cooccur``); writes the model there.

        Parameters
        ----------
        X : str or path-like
            Run root (local path or fsspec URL).
        y : None
            Ignored.
        name : str, optional
            Model name under ``<root>/model.zarr`` (default ``k<K>-<rectifier>``);
            the refined model is stored beside it as ``<name>-cvb0``.
        overwrite : bool, default=False
            Replace models of the same names.

        Returns
        -------
        self
        """
        from jsmf_dask.pipeline.fit import fit as fit_stage
        from jsmf_dask.io.model_store import open_model
        from jsmf_dask.pipeline.refine import default_refined_name, refine

        self._validate_params()
        sweeps = parameter("refine", "sweeps").default if self.refine_sweeps is None else self.refine_sweeps
        root = os.fspath(X)
        result = fit_stage(
            root, n_topics=self.n_topics, rectifier=self.rectifier, iterations=self.max_iter,
            tol=self.tol, end_with=self.end_with, solver=self.solver, min_anchor_df=self.min_anchor_df,
            seed=self.random_state, name=name, overwrite=overwrite,
        )
        self._set_fitted(result.B, result.A, result.A_least_squares, result.anchors, result.trace,
                         result.eigenvalues, result.n_iter)
        if sweeps:
            refined = refine(root, model=result.name, sweeps=sweeps,
                             name=default_refined_name(result.name), overwrite=overwrite)
            self.components_ = np.ascontiguousarray(refined.B.T)
            self.topic_topic_ = refined.A
            self.doc_topic_prior_ = open_model(root, refined.name).arrays["alpha"]
            self.refine_history_ = dict(refined.trace)
        self.vocabulary_ = result.words
        return self

    def fit_cooccurrence(self, C: np.ndarray, doc_freq: np.ndarray | None = None) -> RectifiedAnchorWords:
        """Fit on a co-occurrence matrix held in memory (the same steps, without Dask or stores).

        Parameters
        ----------
        C : ndarray, shape (N, N)
            Symmetric, non-negative.
        doc_freq : ndarray, shape (N,), optional
            Document frequencies, for the ``min_anchor_df`` floor.

        Returns
        -------
        self
        """
        if self.refine_sweeps:
            raise InvalidParameterError(
                f"refine_sweeps={self.refine_sweeps} needs the documents, which fit_cooccurrence does not have; "
                "fit a run root with fit(root) to refine, or set refine_sweeps=0"
            )
        C = np.asarray(C, dtype=np.float64)
        if C.ndim != 2 or C.shape[0] != C.shape[1]:
            raise InvalidParameterError(f"C must be a square matrix; got shape {C.shape}")
        if not np.isfinite(C).all() or C.min() < 0:
            raise InvalidParameterError("C must be finite and non-negative")
        self._validate_params(C.shape[0])
        floor = self.min_anchor_df
        candidates = None if doc_freq is None else np.asarray(doc_freq) >= floor
        # BLAS threads by the rule of the in-task path: at small N, one thread is several times faster
        # (NIPS, N = 3,000, K = 20: 10.4 s on the default threads, 2.4 s on one)
        with threadpool_limits(limits=in_task_blas_threads(C.shape[0]), user_api="blas"):
            self._fit_in_memory(C, candidates, np.random.default_rng(self.random_state))
        self.vocabulary_ = None
        return self

    def _fit_in_memory(self, C: np.ndarray, candidates: np.ndarray | None, rng: np.random.Generator) -> None:
        if self.rectifier == "enn":
            start = top_eigenpairs(lambda V: C @ V, C.shape[0], self.n_topics, rng=rng, cold="auto")
            low, eig, trace, n_iter = enn_rectify(start, self.n_topics, iterations=self.max_iter, tol=self.tol,
                                                  rng=rng)
            Z, p = law_coordinates(low)
            anchors, _ = law_anchors(Z, p, self.n_topics, candidates)
            rec = recover_low_rank(low, Z, p, anchors, solver=self.solver)
            self._set_fitted(rec.B, rec.A, rec.A_least_squares, anchors, trace.as_arrays(), eig.values, n_iter)
        else:
            rect = rectify(C, self.n_topics, rectifier=self.rectifier or "ap", iterations=self.max_iter, tol=self.tol,
                           end_with=self.end_with, rng=rng)
            anchors, _ = find_anchors(rect.C, self.n_topics, candidates=candidates)
            rec = recover(rect.C, anchors, solver=self.solver)
            self._set_fitted(rec.B, rec.A, rec.A_least_squares, anchors, rect.trace, rect.eig.values, rect.n_iter)

    def _set_fitted(self, B, A, A_ls, anchors, trace, eigenvalues, n_iter) -> None:
        self.components_ = np.ascontiguousarray(B.T)
        self.spectral_components_ = self.components_
        self.refine_history_ = {}
        self.doc_topic_prior_ = None
        self.topic_topic_ = A
        self.topic_topic_least_squares_ = A_ls
        self.anchors_ = np.asarray(anchors)
        self.rectification_history_ = dict(trace)
        self.eigenvalues_ = np.asarray(eigenvalues)
        self.n_iter_ = int(n_iter)

    def _check_fitted(self) -> None:
        if not hasattr(self, "components_"):
            raise NotFittedError(
                f"This {_OWNER} instance is not fitted yet. Call 'fit' or 'fit_cooccurrence' first."
            )

    def transform(self, X) -> np.ndarray:
        """Topic compositions of documents under the fitted topics.

        A refined estimator (``doc_topic_prior_`` set) folds each document in
        by LDA's variational inference under its topics and learned prior; a
        spectral one fits each document's word distribution ``w_d`` (its counts
        over its length) by ``θ_d = argmin ‖w_d − Bθ‖²`` over the simplex
        (:func:`jsmf_dask.kernels.infer.document_topics`).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_docs, n_words)
            Word counts (or any non-negative weights) per document.

        Returns
        -------
        ndarray, shape (n_docs, n_topics)
            Rows on the simplex (uniform for an empty document).
        """
        import scipy.sparse as sps

        from jsmf_dask.kernels.infer import document_topics

        self._check_fitted()
        n_words = self.components_.shape[1]
        X = X if sps.issparse(X) else np.atleast_2d(np.asarray(X, dtype=np.float64))
        if X.ndim != 2 or X.shape[1] != n_words:
            raise InvalidParameterError(
                f"X must have shape (n_docs, {n_words}) (one column per word of the fitted vocabulary); "
                f"got {X.shape}"
            )
        data = X.data if sps.issparse(X) else X
        if not np.isfinite(data).all() or (data.size and data.min() < 0):
            raise InvalidParameterError("X must hold finite, non-negative word counts")
        return document_topics(self.components_.T, X, self.doc_topic_prior_)

    def top_words(self, n: int = 20) -> list[list[str]] | list[list[int]]:
        """Each topic's ``n`` most probable words (strings when the vocabulary is known)."""
        self._check_fitted()
        order = np.argsort(-self.components_, axis=1, kind="stable")[:, :n]
        if self.vocabulary_ is None:
            return order.tolist()
        return [[self.vocabulary_[i] for i in row] for row in order]
