"""``RectifiedAnchorWords``: the scikit-learn estimator over the stages (documents × words in, topics out)."""

from __future__ import annotations

import os
import tempfile
import uuid
import dask
import numpy as np
import scipy.sparse as sps
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_non_negative, validate_data
from threadpoolctl import threadpool_limits

from jsmf_dask._validation import check_int, check_option
from jsmf_dask.estimator.stored import fitted_state, save_model, unrefined
from jsmf_dask.exceptions import InvalidParameterError
from jsmf_dask.io.fs import get_fs, is_local, join
from jsmf_dask.kernels.enn import enn_rectify
from jsmf_dask.kernels.eigen import top_eigenpairs
from jsmf_dask.kernels.factorize import find_anchors, recover, recover_low_rank, rectify
from jsmf_dask.kernels.infer import document_topics, model_prior
from jsmf_dask.kernels.law import law_anchors, law_coordinates
from jsmf_dask.kernels.variational import document_bound, e_step
from jsmf_dask.parameters import PARAMETERS, parameter, refined_fit_iterations
from jsmf_dask.pipeline.anchor_floor import first_floor
from jsmf_dask.pipeline.matrix import is_dask_array
from jsmf_dask.stages.rectify import in_task_blas_threads

__all__ = ["RectifiedAnchorWords"]

_OWNER = "RectifiedAnchorWords"
#: Parameters the table does not check the way the estimator reads them: None or 0 have a meaning here.
_OWN_RULES = ("n_components", "max_iter", "refine", "validation_fraction")


class RectifiedAnchorWords(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Topic model by Rectified Anchor Words (Lee, Bindel & Mimno, NIPS 2015), refined by CVB0.

    ``fit(X)`` writes the document–term matrix ``X`` as a corpus into a
    temporary run root and runs the same out-of-core stages as the ``jsmf``
    command (co-occurrence ``C``, rectification, anchors, recovery of ``B``
    and ``A``, then refinement over the documents), on the Dask client in use
    if there is one, else on threads in this process; the run root is
    removed afterwards. A Dask array ``X`` is written one block of rows at a
    time, so it may be larger than memory. :meth:`fit_root` fits a run root
    the command line made; :meth:`fit_cooccurrence` a ``C`` held in memory.

    The spectral fit costs O(N²) per AP cycle in the number of columns of
    ``X``: prune rare words first (``CountVectorizer(min_df=5)`` or
    ``max_features``); on MovieLens, keeping the films of at least 5 of its
    610 users (3,650 of 9,724, 89.5% of the ratings) took the fit from 23.8 s
    to 3.1 s.

    Parameters
    ----------
    n_components : int, default=10
        K, the number of topics (``K < n_features``). ``K = 1`` is the unigram
        model (the words' frequencies in ``X``; :meth:`fit` only: anchors need ``K >= 2``).
    rectifier : {'ap', 'dc', 'enn', 'none'} or None, default=None
        Alternating projection, diagonal completion, ε-non-negative rectification with low-rank anchors (O(N·K)
        memory), or none (the Baseline of Arora et al. 2013). None: :func:`jsmf_dask.fit`'s choice (AP where it fits
        in one task, else ENN); AP in :meth:`fit_cooccurrence`. When the model is refined afterwards, AP (None or
        'ap') rectifies the anchor vocabulary only below 10,000 documents (:func:`jsmf_dask.fit`'s
        ``anchor_words='auto'``; measured in the README).
    max_iter : int or None, default=None
        AP or ENN cycles. None: when the model is refined afterwards, 20 up to 20 topics and 50 above (measured as
        good as 150 after refinement: :func:`jsmf_dask.parameters.refined_fit_iterations`), else 150.
    tol : float or None, default=None
        Stop AP (ENN) when its relative change falls below it; None runs all cycles.
    end_with : {'nonnegative', 'psd'}, default='nonnegative'
        AP's last projection.
    solver : {'exact', 'eg'}, default='exact'
        Simplex least-squares solver of ``B``.
    min_anchor_df : int or 'auto', default='auto'
        Anchor words occur in at least this many documents; 'auto': :func:`jsmf_dask.fit`'s (10 in fit_cooccurrence).
    refine : {'auto', 'cvb0', 'sampled', 'vb'} or None, default='auto'
        Refinement of the spectral topics over the documents: zero-order collapsed variational Bayes, sampled
        passes or variational Bayes (:func:`jsmf_dask.refine`); ``'auto'``: CVB0, and on a million training tokens
        or more of short documents the sampled passes too, the one the validation documents score lower kept
        (``refine_method_``); None keeps the spectral model.
    refine_sweeps : 'auto' or int, default='auto'
        Passes over the documents at most; 'auto': 100 with validation documents (their stop ends it first), else 50.
    doc_topic_prior : 'auto' or float, default='auto'
        α of the refinement: ``'auto'`` learns an asymmetric α by Minka's fixed point.
    topic_word_prior : 'auto', float or list of float, default=0.05
        η of the refinement: ``'auto'`` learns it by Minka's fixed point; a list is candidates, the one the
        validation documents score best kept (each costs a refinement).
    refine_drawn_sweeps : 'auto' or int, default='auto'
        CVB0 sweeps whose counts are drawn from the responsibilities before the soft ones (``refine``'s
        ``drawn_sweeps``): ``'auto'``, below 2,500 training documents, runs none and 20 side by side and keeps the
        drawn refinement unless the validation documents score the other better by more than their paired error;
        0 never draws.
    refine_start : {'auto', 'spectral', 'chain', 'both'}, default='auto'
        Where the refinement's runs start (:func:`jsmf_dask.refine`'s ``start``): the spectral model, a Gibbs chain's
        topics, both (the validation documents choose) or ``'auto'`` (a chain for the sampled passes where tried).
    validation_fraction : float, default=0.05
        Documents (by the hash of their row number) left out of ``C`` and of the refinement's sweeps, scored each
        sweep; refinement stops when they stop improving and then, below 2,500 documents, runs a few sweeps on from
        the state they chose with them in training (``refine``'s refit). 0: no validation documents (refinement runs
        ``refine_sweeps`` or stops by its tolerance).
    random_state : int or None, default=0
        Seed of the eigensolver's start block and DC's permutations (None: 0; the fit is deterministic either way).
    work_dir : str or None, default=None
        Where :meth:`fit` writes its temporary run root (a directory or fsspec URL the Dask workers can read;
        default: the system's temporary directory).
    verbose : int, default=0
        0: silent; 1: the stages' progress bars on stderr.

    Attributes
    ----------
    components_ : ndarray, shape (n_components, n_features)
        ``p(word | topic)``, rows sum to 1 (``Bᵀ`` in the paper); refined when ``refine`` is set.
    topic_topic_ : ndarray, shape (n_components, n_components)
        ``A``, the joint topic–topic probabilities (sums to 1).
    spectral_components_ : ndarray, shape (n_components, n_features)
        The spectral model's topics (equal to ``components_`` without refinement).
    topic_topic_least_squares_ : ndarray, shape (n_components, n_components)
        The Baseline's least-squares ``A`` (may have negative entries; NaN after loading a refined root model).
    doc_topic_prior_ : ndarray, shape (n_components,) or None
        The refined model's (learned) ``α``, which :meth:`transform` folds documents in with; None without.
    topic_word_prior_ : float or None
        The refined model's (learned or chosen) ``η``.
    anchors_ : ndarray of int, shape (n_components,)
        Anchor word (column) of each spectral topic; refined topic k starts from spectral topic k.
    eigenvalues_ : ndarray, shape (n_components,)
        Top eigenvalues of the rectified ``C``.
    rectification_history_, refine_history_ : dict of str to ndarray
        Per-cycle trace of AP/ENN, per-sweep trace of the refinement (empty without).
    n_iter_ : int
        Passes over the documents of the refinement; AP/ENN cycles without refinement.
    refit_ : dict or None
        When the refinement went on from its chosen state with the validation documents in training
        (``refine``'s refit, below 2,500 training documents): ``{"sweeps", "n_docs", "seconds"}``; else None.
        ``refine_history_`` and ``n_iter_`` describe the run that chose the sweeps.
    drawn_sweeps_ : int or None
        The refinement's sweeps of drawn counts (chosen by the validation documents with
        ``refine_drawn_sweeps='auto'``); None without refinement.
    refine_method_ : str or None
        The refinement's method ('cvb0', 'sampled' or 'vb': ``refine='auto'`` chooses); None without refinement.
    refine_start_ : str or None
        Where the kept refinement started ('spectral' or 'chain'); None without refinement.
    vocabulary_ : list of str
        The words of the columns (``feature_names_in_`` when ``X`` had them, else ``w0``, ``w1``, …).
    provenance_ : dict
        Where the model comes from: the count matrix's size; or the run root, model names and how the root's
        corpus was read and tokenised (``jsmf transform`` reads new documents the same way).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` had column names (a pandas DataFrame).

    Examples
    --------
    >>> import numpy as np
    >>> from jsmf_dask import RectifiedAnchorWords
    >>> B = np.array([[.5, 0], [0, .5], [.25, .25], [.25, .25]])
    >>> A = np.array([[.3, .1], [.1, .5]])
    >>> model = RectifiedAnchorWords(n_components=2, rectifier="none", refine=None).fit_cooccurrence(B @ A @ B.T)
    >>> model.anchors_.tolist()
    [1, 0]
    """

    def __init__(self, n_components: int = 10, *, rectifier: str | None = None, max_iter: int | None = None,
                 tol: float | None = None, end_with: str = "nonnegative", solver: str = "exact",
                 min_anchor_df: int | str = "auto", refine: str | None = "auto", refine_sweeps: int | str = "auto",
                 doc_topic_prior: float | str = "auto", topic_word_prior: float | str | list[float] = 0.05,
                 refine_drawn_sweeps: int | str = "auto", refine_start: str = "auto",
                 validation_fraction: float = 0.05, random_state: int | None = 0, work_dir: str | None = None,
                 verbose: int = 0):
        self.n_components = n_components
        self.rectifier = rectifier
        self.max_iter = max_iter
        self.tol = tol
        self.end_with = end_with
        self.solver = solver
        self.min_anchor_df = min_anchor_df
        self.refine = refine
        self.refine_sweeps = refine_sweeps
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.refine_drawn_sweeps = refine_drawn_sweeps
        self.refine_start = refine_start
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.work_dir = work_dir
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        # word counts: scikit-learn's checks give integer data to estimators that say "categorical"
        tags.input_tags.categorical = True
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags

    # ------------------------------------------------------------------ parameters
    def _validate_params(self, n_words: int | None = None) -> None:
        """Each parameter against :data:`jsmf_dask.parameters.PARAMETERS`, plus the estimator's own rules."""
        for entry in PARAMETERS:
            if entry.estimator and entry.estimator not in _OWN_RULES:
                entry.check(getattr(self, entry.estimator), _OWNER, name=entry.estimator)
        check_int(self.max_iter, "max_iter", _OWNER, low=1, allow_none=True)
        check_int(self.n_components, "n_components", _OWNER, low=1,
                  high=None if n_words is None else n_words - 1)
        check_int(self.random_state, "random_state", _OWNER, low=0, allow_none=True)
        check_int(self.verbose, "verbose", _OWNER, low=0)
        if self.refine is not None:
            check_option(self.refine, "refine", _OWNER, parameter("refine", "method").choices + (None,))
        fraction = self.validation_fraction
        if not (isinstance(fraction, int | float) and not isinstance(fraction, bool) and 0 <= fraction <= 0.5):
            raise InvalidParameterError(f"The 'validation_fraction' parameter of {_OWNER} must be a float in "
                                        f"[0, 0.5]. Got {fraction!r} instead.")
        if self.rectifier == "enn" and self.end_with != "nonnegative":
            raise InvalidParameterError(f"{_OWNER}: rectifier='enn' always ends with its non-negativity correction; "
                                        f"end_with={self.end_with!r} is for 'ap'")

    @property
    def _cycles(self) -> int:
        if self.max_iter is not None:
            return self.max_iter
        return refined_fit_iterations(self.n_components) if self.refine else parameter("fit", "iterations").default

    # ------------------------------------------------------------------ fit
    def fit(self, X, y: None = None) -> RectifiedAnchorWords:
        """Fit the topics of the documents × words count matrix ``X``.

        Parameters
        ----------
        X : array-like, sparse matrix or dask.array.Array, shape (n_documents, n_features)
            Word counts (non-negative whole numbers), e.g. from
            :class:`sklearn.feature_extraction.text.CountVectorizer`. A Dask
            array is streamed one block of rows at a time.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        from jsmf_dask.pipeline.cooccur import cooccur
        from jsmf_dask.pipeline.matrix import ingest_matrix, matrix_words

        self._validate_params()
        X = self._checked_counts(X)
        self._validate_params(self.n_features_in_)
        words = [str(w) for w in self.feature_names_in_] if hasattr(self, "feature_names_in_") else \
            matrix_words(self.n_features_in_)
        root = self._scratch_root()
        try:
            with dask.config.set({"jsmf.progress": self.verbose > 0}):
                corpus = ingest_matrix(root, X, words=words)
                if self.n_components == 1:
                    self._fit_unigram(corpus.term_freq, words)
                else:
                    cooccur(root, validation=self.validation_fraction or None)
                    self._fit_stages(root, name=None, overwrite=False)
                self.provenance_ = {"input": "count matrix", "n_documents": corpus.n_docs,
                                    "n_tokens": corpus.n_tokens}
        finally:
            fs, path = get_fs(root)
            if fs.exists(path):
                fs.rm(path, recursive=True)
        return self

    def fit_root(self, root: str | os.PathLike, *, name: str | None = None,
                 overwrite: bool = False) -> RectifiedAnchorWords:
        """Fit a run root holding ``cooc.zarr`` (``jsmf ingest`` and ``jsmf cooccur`` made it); the models are
        written there: ``<name>`` and, refined, ``<name>-<refine>``.

        Parameters
        ----------
        root : str or path-like
            Run root (local path or fsspec URL). Its vocabulary becomes ``vocabulary_``.
        name : str, optional
            Spectral model's name (default ``k<K>-<rectifier>``).
        overwrite : bool, default=False
            Replace models of the same names.

        Returns
        -------
        self
        """
        self._validate_params()
        if self.n_components < 2:
            raise InvalidParameterError(f"{_OWNER}.fit_root: n_components={self.n_components}; a run root's models "
                                        "need n_components >= 2 (the one-topic unigram model is fit(X)'s)")
        self.__dict__.pop("feature_names_in_", None)
        with dask.config.set({"jsmf.progress": self.verbose > 0}):
            self._fit_stages(os.fspath(root), name=name, overwrite=overwrite)
        return self

    def _fit_stages(self, root: str, *, name: str | None, overwrite: bool) -> None:
        from jsmf_dask.pipeline.fit import fit as fit_stage
        from jsmf_dask.pipeline.refine import default_refined_name, refine

        spectral = fit_stage(
            root, n_topics=self.n_components, rectifier=self.rectifier, iterations=self._cycles, tol=self.tol,
            end_with=self.end_with, solver=self.solver, min_anchor_df=self.min_anchor_df,
            seed=self.random_state or 0, name=name, overwrite=overwrite,
            anchor_words="auto" if self.refine else None,
        )
        refined = None
        if self.refine:
            refined = refine(root, model=spectral.name, method=self.refine, sweeps=self.refine_sweeps,
                             alpha=self.doc_topic_prior, eta=self.topic_word_prior,
                             drawn_sweeps=self.refine_drawn_sweeps, start=self.refine_start,
                             name=default_refined_name(spectral.name, self.refine), overwrite=overwrite)
        self.__dict__.update(fitted_state(root, spectral.name, None if refined is None else refined.name))

    def _fit_unigram(self, term_freq: np.ndarray, words: list[str]) -> None:
        """K = 1: the one topic is the words' frequencies in ``X`` (what every method converges to)."""
        total = np.asarray(term_freq, dtype=np.float64)
        if total.sum() <= 0:
            raise ValueError(f"{_OWNER}.fit: X holds no words")
        B = (total / total.sum())[None, :]
        self.components_ = self.spectral_components_ = B
        self.topic_topic_ = self.topic_topic_least_squares_ = np.ones((1, 1))
        self.anchors_, self.eigenvalues_ = np.array([int(np.argmax(total))]), np.zeros(0)
        self.__dict__.update(unrefined(), rectification_history_={}, doc_topic_prior_=np.ones(1),
                             topic_word_prior_=None, n_iter_=1, vocabulary_=words)

    def fit_cooccurrence(self, C: np.ndarray, doc_freq: np.ndarray | None = None) -> RectifiedAnchorWords:
        """Fit the spectral model of a co-occurrence matrix held in memory (no documents: no refinement).

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
        if self.refine:
            raise InvalidParameterError(f"refine={self.refine!r} needs the documents, which fit_cooccurrence does "
                                        "not have; fit the count matrix with fit(X), or set refine=None")
        C = np.asarray(C, dtype=np.float64)
        if C.ndim != 2 or C.shape[0] != C.shape[1]:
            raise InvalidParameterError(f"C must be a square matrix; got shape {C.shape}")
        if not np.isfinite(C).all() or C.min() < 0:
            raise InvalidParameterError("C must be finite and non-negative")
        self._validate_params(C.shape[0])
        candidates = None if doc_freq is None else np.asarray(doc_freq) >= first_floor(self.min_anchor_df)
        # BLAS threads by the in-task path's rule: at small N one thread is several times faster
        with threadpool_limits(limits=in_task_blas_threads(C.shape[0]), user_api="blas"):
            self._fit_in_memory(C, candidates, np.random.default_rng(self.random_state or 0))
        self.vocabulary_ = [f"w{i}" for i in range(C.shape[0])]
        self.provenance_ = {"input": "co-occurrence matrix"}
        self.n_features_in_ = C.shape[0]
        self.__dict__.pop("feature_names_in_", None)
        return self

    def _fit_in_memory(self, C: np.ndarray, candidates: np.ndarray | None, rng: np.random.Generator) -> None:
        k = self.n_components
        if self.rectifier == "enn":
            start = top_eigenpairs(lambda V: C @ V, C.shape[0], k, rng=rng, cold="auto")
            low, eig, trace, n_iter = enn_rectify(start, k, iterations=self._cycles, tol=self.tol, rng=rng)
            Z, p = law_coordinates(low)
            anchors, _ = law_anchors(Z, p, k, candidates)
            rec = recover_low_rank(low, Z, p, anchors, solver=self.solver)
            trace, values = trace.as_arrays(), eig.values
        else:
            rect = rectify(C, k, rectifier=self.rectifier or "ap", iterations=self._cycles, tol=self.tol,
                           end_with=self.end_with, rng=rng)
            anchors, _ = find_anchors(rect.C, k, candidates=candidates)
            rec = recover(rect.C, anchors, solver=self.solver)
            trace, values, n_iter = rect.trace, rect.eig.values, rect.n_iter
        self.components_ = self.spectral_components_ = np.ascontiguousarray(rec.B.T)
        self.topic_topic_, self.topic_topic_least_squares_ = rec.A, rec.A_least_squares
        self.anchors_, self.eigenvalues_ = np.asarray(anchors), np.asarray(values)
        self.__dict__.update(unrefined(), rectification_history_=dict(trace), doc_topic_prior_=None,
                             topic_word_prior_=None, n_iter_=int(n_iter))

    # ------------------------------------------------------------------ input
    def _checked_counts(self, X):
        """``X`` checked as fit's input; sets ``n_features_in_`` (and ``feature_names_in_``)."""
        if is_dask_array(X):
            if X.ndim != 2:
                raise ValueError(f"Expected a 2-D dask array (documents x words); got {X.ndim} dimensions")
            if X.shape[0] < 2 or X.shape[1] < 2:
                raise ValueError(f"Found array with {X.shape[0]} sample(s) and {X.shape[1]} feature(s) "
                                 f"(shape={X.shape}) while a minimum of 2 is required by {_OWNER}.")
            self.n_features_in_ = int(X.shape[1])
            self.__dict__.pop("feature_names_in_", None)
            return X  # its blocks are checked where they are written (the first bad value names its row)
        X = validate_data(self, X, accept_sparse=("csr", "csc", "coo"), dtype="numeric", ensure_min_samples=2,
                          ensure_min_features=2, reset=True)
        check_non_negative(X, f"{_OWNER}.fit")
        return X

    def _checked_input(self, X, whom: str):
        """``X`` of transform/score: the fitted columns, finite and non-negative (weights allowed)."""
        check_is_fitted(self, "components_")
        X = validate_data(self, X, accept_sparse=("csr", "csc", "coo"), dtype=np.float64, reset=False)
        check_non_negative(X, f"{_OWNER}.{whom}")
        return X

    def _scratch_root(self) -> str:
        if self.work_dir is None or is_local(os.fspath(self.work_dir)):
            base = None if self.work_dir is None else os.fspath(self.work_dir)
            if base is not None:
                os.makedirs(base, exist_ok=True)
            return tempfile.mkdtemp(prefix="jsmf-fit-", dir=base)
        return join(os.fspath(self.work_dir), f"jsmf-fit-{uuid.uuid4().hex}")

    # ------------------------------------------------------------------ use
    def transform(self, X):
        """Topic compositions of documents under the fitted topics.

        Each document is folded in by LDA's variational inference under the
        topics and the document prior: a refined model's learned ``α``, a
        spectral model's Dirichlet moment-matched to its ``A``
        (:func:`jsmf_dask.kernels.infer.document_topics`).

        Parameters
        ----------
        X : array-like, sparse matrix or dask.array.Array, shape (n_documents, n_features)
            Word counts (or non-negative weights) per document, same columns as in fit.

        Returns
        -------
        ndarray (a Dask array for a Dask ``X``), shape (n_documents, n_components)
            Rows on the simplex (for an empty document the prior's mean).
        """
        if is_dask_array(X):
            check_is_fitted(self, "components_")
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has shape {X.shape}; expected (n_documents, {self.n_features_in_})")
            X = X.rechunk({1: -1}) if X.numblocks[1] > 1 else X
            B, alpha = self.components_.T, self._document_prior()
            return X.map_blocks(lambda block: document_topics(B, _block_counts(block), alpha),
                                chunks=(X.chunks[0], (self.n_components,)), dtype=np.float64, meta=np.empty((0, 0)))
        X = self._checked_input(X, "transform")
        return document_topics(self.components_.T, X, self._document_prior())

    def score(self, X, y: None = None) -> float:
        """Approximate log likelihood per word of ``X``: the documents' part of the variational bound under
        the fitted topics and prior (higher is better; scikit-learn's LDA returns the total instead).

        The prior is the refined model's ``α``, else the Dirichlet moment-matched to ``A``. The bound understates
        sharp topics: :func:`~jsmf_dask.estimator.scoring.completion_perplexity` is ``evaluate``'s measure.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_documents, n_features)
        y : None
            Ignored.

        Returns
        -------
        float
        """
        X = sps.csr_array(self._checked_input(X, "score"))
        n_tokens = float(X.sum())
        if n_tokens <= 0:
            raise ValueError(f"{_OWNER}.score: X holds no words; the score is per word")
        alpha = self._document_prior()
        B = self.components_.T
        gamma = e_step(X, B, alpha, max_iter=1000, tol=1e-8).gamma
        return float(document_bound(X, B, alpha, gamma) / n_tokens)

    def _document_prior(self) -> np.ndarray:
        """``α`` of the fold-in and the score: the refined model's, else moment-matched to ``A``."""
        return model_prior({"alpha": self.doc_topic_prior_, "A": self.topic_topic_})

    def perplexity(self, X) -> float:
        """``exp(−score(X))``: the per-word perplexity bound of ``X`` under the model (lower is better)."""
        return float(np.exp(-self.score(X)))

    def top_words(self, n: int = 20) -> list[list[str]]:
        """Each topic's ``n`` most probable words."""
        check_is_fitted(self, "components_")
        order = np.argsort(-self.components_, axis=1, kind="stable")[:, :n]
        return [[self.vocabulary_[i] for i in row] for row in order]

    @property
    def _n_features_out(self) -> int:
        return self.components_.shape[0]

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> str:
        """Write the fitted model to the directory ``path`` (local or fsspec URL), atomically;
        :func:`jsmf_dask.load_model` reads it back.

        Returns
        -------
        str
            ``path``.
        """
        check_is_fitted(self, "components_")
        return save_model(self, os.fspath(path), overwrite=overwrite)


def _block_counts(block) -> sps.csr_array:
    X = sps.csr_array(block, dtype=np.float64) if sps.issparse(block) else sps.csr_array(np.asarray(block, float))
    if X.data.size and (not np.isfinite(X.data).all() or X.data.min() < 0):
        raise ValueError("X must hold finite, non-negative word counts")
    return X
