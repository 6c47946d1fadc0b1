"""``cooccur``: the corpus under ``<root>/corpus`` → ``<root>/cooc.zarr``.

``C = Σ_m w_m (h_m h_mᵀ − diag h_m) / (n_m (n_m − 1))`` over documents with
``n_m >= 2`` tokens, divided by its entry sum (paper eq. 1 with each document
weighed by ``w_m``, 1 or its tokens ``n_m``: :mod:`jsmf_dask.kernels.cooccurrence`;
see docs/architecture.md), plus the document frequencies ``D1`` and
co-document frequencies ``D2`` used by the coherence metric.
"""

from __future__ import annotations

import datetime as _dt
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import dask
import numpy as np
import zarr

from jsmf_dask import _progress, config
from jsmf_dask._validation import check_heldout, check_int, check_validation
from jsmf_dask.exceptions import ConvergenceWarning, CorpusSchemaError, InvalidParameterError, StoreError
from jsmf_dask.io.provenance import library_versions
from jsmf_dask.io.fs import check_free_space, get_fs, join, remove, staged_output
from jsmf_dask.io.parquet import (
    corpus_dir,
    corpus_tokens,
    file_manifest,
    repeated_doc_id,
    list_blocks,
    read_block,
    read_vocabulary,
    vocabulary_hash,
)
from jsmf_dask.io.schema import SCHEMA_VERSION
from jsmf_dask.io.zarr_store import (cooc_path, create_cooccurrence, open_cooccurrence, write_array, write_compressed,
                                     zarr_store)
from jsmf_dask.parameters import DEFAULT_WEIGHTING, parameter
from jsmf_dask.pipeline.cooccur_update import check_not_counted, kept_settings, store_version, uncounted_blocks
from jsmf_dask.kernels.doc_split import DocumentSplit
from jsmf_dask.kernels.eigen import top_eigenpairs
from jsmf_dask.stages.compressed import block_totals, product_task, scaled_blocks
from jsmf_dask.stages.cooccurrence import (
    block_hashes,
    block_partials,
    corpus_summary,
    tile_tasks,
    even_tile_size,
    word_block_edges,
)
from jsmf_dask.cluster import Work, choose_engine

__all__ = ["CooccurrenceSummary", "cooccur", "library_versions"]


@dataclass
class CooccurrenceSummary:
    """What ``cooccur`` counted (also stored in the attrs of ``cooc.zarr``)."""

    n_words: int
    n_docs: int
    n_docs_skipped: dict[str, int]
    n_docs_heldout: int
    heldout_fraction: float
    n_tokens: int
    entry_sum: float
    n_blocks: int
    n_tiles: int
    path: str
    rank: int | None = None
    eig_residual: float | None = None
    n_passes: int | None = None
    reason: str | None = None  # why the compressed store was written when no rank was asked for
    n_docs_validation: int = 0
    validation_fraction: float = 0.0
    weighting: str = DEFAULT_WEIGHTING

    def lines(self) -> list[str]:
        skipped = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in self.n_docs_skipped.items()) or "none"
        what = (f"{self.n_blocks} blocks, {self.n_tiles} tiles" if self.rank is None else
                f"{self.n_blocks} blocks; compressed: top {self.rank} eigenpairs, relative residual "
                f"{self.eig_residual:.1e} after {self.n_passes} passes over the corpus, no N x N array")
        return [
            f"C: {self.n_words} x {self.n_words} from {self.n_docs} documents ({self.n_tokens} tokens; each weighed "
            f"{'by its tokens' if self.weighting == 'tokens' else 'once'}) in {what}",
            f"documents skipped: {skipped}",
            *([f"documents held out: {self.n_docs_heldout} (doc_id hash below {self.heldout_fraction})"]
              if self.heldout_fraction else []),
            *([f"documents kept for validation: {self.n_docs_validation} (doc_id hash at or above "
               f"{1 - self.validation_fraction:g}; `refine` stops by them)"] if self.validation_fraction else []),
            *([self.reason] if self.reason else []),
            f"written to {self.path}",
        ]


#: The most upper-triangular tiles of the dense C a ``tile_size`` may cut it into (a task each): 2,048-word tiles
#: reach it at about 900k words, where the dense C would take 6 TiB; a tile size of a few words (a typo) would
#: otherwise build a graph of a million tasks and run for hours.
MAX_TILES = 100_000


def cooccur(
    root: str,
    *,
    tile_size: int | None = None,
    codoc: bool = True,
    batch_nnz: int | None = None,
    overwrite: bool = False,
    update: bool = False,
    heldout: float | None = None,
    validation: float | None = None,
    weighting: str | None = None,
    rank: int | None = None,
    eig_tol: float = 1e-6,
    on_pass: Callable[[int, float], None] | None = None,
) -> CooccurrenceSummary:
    """Build ``<root>/cooc.zarr`` from ``<root>/corpus``, or add the shards it has not counted yet.

    Parameters
    ----------
    root : str
        Run root (local path or fsspec URL).
    tile_size : int, optional
        Largest edge of a tile of ``C`` (Zarr chunk; ``jsmf.cooccur.tile-size``): the tiles are made as equal
        as they can be (:func:`~jsmf_dask.stages.cooccurrence.even_tile_size`; the store's ``tile_size``
        attribute is the edge used).
    codoc : bool, default=True
        Also build ``D2`` (doubles the multiply work).
    batch_nnz : int, optional
        Non-zeros multiplied at once in a tile task (``jsmf.cooccur.batch-nnz``).
    overwrite : bool, default=False
        Replace an existing store.
    update : bool, default=False
        Add only the shards of the corpus the existing store has not counted
        (after ``jsmf ingest --append``), without reading the counted ones:
        the store keeps its unnormalised sum (``entry_sum``), so the result
        equals a build from scratch (to rounding). Refused when the vocabulary
        differs, when a counted shard changed or is gone, or when a new
        document's doc_id is already counted.
    heldout : float, optional
        Leave out of ``C`` the documents whose doc_id hashes below this
        fraction of [0, 1) (in (0, 0.5]); recorded as ``heldout_fraction``, so
        ``refine``, the Gibbs reference and ``evaluate``'s held-out perplexity
        use the same documents. The split depends on each doc_id alone:
        appending documents never moves one across it. An update keeps the
        store's fraction.
    validation : float, optional
        Also leave out the documents whose doc_id hashes at or above
        ``1 − validation`` (in (0, 0.5]; never held-out ones): ``refine``
        scores them each sweep to decide when to stop, and they must be
        unseen by the spectral model it starts from too. Recorded as
        ``validation_fraction``; ``refine`` trains on those it does not score
        (and on all of them when it refits), the Gibbs reference on all.
        An update keeps the store's fraction.
    weighting : {'tokens', 'documents'}, optional
        Each document's weight in ``C``: by its tokens (a new store's default:
        ``C``'s row sums are then the corpus's word frequencies, and a corpus
        of a few long documents among many short ones gets a spectral start
        as good as elsewhere) or once (the paper's eq. 1); what each means:
        :mod:`jsmf_dask.kernels.cooccurrence`. Recorded as ``weighting``. An
        update keeps the store's (a store written before it has none: once).
    rank : int, optional
        Write the **compressed** store instead of the dense one: the top-``rank``
        eigenpairs of ``C`` (and ``D1``), computed without any N×N array by a
        block eigensolver whose every product with ``C`` is one pass over the
        corpus (:mod:`jsmf_dask.stages.compressed`). Memory O(N·rank); fits
        with ``rectifier='enn'`` and any K up to ``rank``. No ``D2``: coherence
        is then counted from the corpus by ``evaluate``. Not updatable.
        Without it the store is dense, unless the dense arrays (``8·N²``
        bytes for ``C``, twice with ``D2``) would exceed
        ``jsmf.cooccur.dense-max-bytes`` (16 GiB, N ≈ 32k with D2): then the
        compressed store of rank ``jsmf.cooccur.compressed-rank`` (100) is written and
        the summary says why.
    eig_tol : float, default=1e-6
        Compressed store: the relative residual ``max_j ‖C v_j − λ_j v_j‖ / |λ_1|``
        asked of the eigenpairs (recorded, with the passes taken).
    on_pass : callable, optional
        Compressed store: called with ``(pass, seconds)`` after each pass.

    Returns
    -------
    CooccurrenceSummary

    Raises
    ------
    StoreError
        Missing corpus or vocabulary, or an existing store without ``overwrite``.
    CorpusSchemaError
        A shard violating the schema (naming file, row and field), or a
        doc_id repeated across the corpus.

    Notes
    -----
    Memory: a map task holds one row group's sparse counts; a tile task
    holds two dense tiles (``C`` and ``D2``) plus ``batch_nnz`` non-zeros of
    ``H̃``. Scratch storage of about 12 bytes per non-zero of the corpus lives
    under the temporary store until it is committed.
    """
    owner = "cooccur"
    tile_size = config.get("cooccur.tile-size", tile_size)
    batch_nnz = config.get("cooccur.batch-nnz", batch_nnz)
    check_int(tile_size, "tile_size", owner, low=1)
    check_int(batch_nnz, "batch_nnz", owner, low=1)
    if rank is not None:
        check_int(rank, "rank", owner, low=2)
        if update:
            raise InvalidParameterError("update=True adds to a dense store; a compressed store (rank) cannot be "
                                        "updated: rebuild it with overwrite=True")
    if not (isinstance(eig_tol, (int, float)) and 0 < eig_tol < 1):
        raise InvalidParameterError(f"The 'eig_tol' parameter of {owner} must be a float in (0, 1). Got {eig_tol!r} "
                                    "instead.")
    corpus = corpus_dir(root)
    vocab = read_vocabulary(corpus)
    words = vocab.column("word").to_pylist()
    n_words = len(words)
    heldout = check_heldout(heldout, owner)
    validation = check_validation(validation, heldout, owner)
    parameter("cooccur", "weighting").check(weighting, owner)
    blocks = list_blocks(corpus)
    choose_engine(Work(tokens=corpus_tokens(corpus)))
    base = old = None
    if update:
        if overwrite:
            raise InvalidParameterError("update=True adds to the existing store and overwrite=True replaces it; "
                                        "pass one of them")
        old = open_cooccurrence(cooc_path(root))
        heldout, validation, weighting = kept_settings(old, heldout, validation, weighting)
        blocks = uncounted_blocks(old, blocks, words, corpus)
        tile_size, codoc = int(old.attrs["tile_size"]), old.has("D2")
        base = (old.url, float(old.attrs["entry_sum"]))
    if not update:
        tile_size = even_tile_size(n_words, tile_size)
        weighting = weighting or DEFAULT_WEIGHTING
    reason = None
    if rank is None and not update:
        dense_bytes = 8 * n_words * n_words * (2 if codoc else 1)
        limit = int(config.get("cooccur.dense-max-bytes"))
        if dense_bytes > limit:
            rank = min(int(config.get("cooccur.compressed-rank")), n_words - 1)
            reason = (f"compressed store written: the dense C{' and D2' if codoc else ''} of {n_words} words would "
                      f"take {dense_bytes / 2**30:.1f} GiB, above jsmf.cooccur.dense-max-bytes "
                      f"({limit / 2**30:.1f} GiB); rank {rank} (jsmf.cooccur.compressed-rank; --rank to choose)")
    if rank is not None:
        if rank >= n_words:
            raise InvalidParameterError(f"The 'rank' parameter of {owner} must be below the {n_words} words of the "
                                        f"vocabulary. Got {rank} instead.")
        summary = _compressed(root, blocks, words, DocumentSplit(heldout, validation), weighting, rank, eig_tol,
                              tile_size, overwrite, on_pass)
        summary.reason = reason
        return summary
    edges = word_block_edges(n_words, tile_size)
    tiles = (len(edges) - 1) * len(edges) // 2
    if tiles > MAX_TILES:
        raise InvalidParameterError(
            f"The 'tile_size' parameter of {owner} ({tile_size}) cuts C of {n_words} words into {tiles} "
            f"upper-triangular tiles, a task each, above {MAX_TILES}: pass a larger one (the default is "
            f"{config.get('cooccur.tile-size')}), or --rank for the compressed store")
    # the tiles of C (and D2) uncompressed, the most they take; the previous store stays until the commit
    check_free_space(root, 8 * n_words * n_words * (2 if codoc else 1),
                     f"cooccur (C{' and D2' if codoc else ''} of N = {n_words} words, 8N² bytes each, uncompressed"
                     f"{'' if not codoc else '; --no-codoc halves it'})")
    read = store_version(root) if update else None  # an update adds to this C: commit only if it is still the one
    with staged_output(cooc_path(root), root=root, overwrite=overwrite or update,
                       unchanged=None if read is None else lambda: store_version(root) == read) as tmp:
        create_cooccurrence(tmp, n_words, tile_size, codoc=codoc)
        scratch = join(tmp, "_scratch")
        fs, scratch_path = get_fs(scratch)
        fs.makedirs(scratch_path, exist_ok=True)
        partials = block_partials(blocks, n_words, edges, scratch, DocumentSplit(heldout, validation),
                                  weighting=weighting)
        shards = sorted({b.path for b in blocks})
        manifest = [dask.delayed(file_manifest, pure=True)(u) for u in shards]
        summary, hashes, manifest = _progress.compute(corpus_summary(partials), block_hashes(partials), manifest)
        hashes = list(hashes)
        _check_unique(blocks, hashes)
        doc_hashes = np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.uint64)
        if old is not None:
            check_not_counted(old, blocks, hashes)
            doc_hashes = np.concatenate([old.read("doc_hashes"), doc_hashes])
        n_docs = summary.n_docs + (int(old.attrs["n_docs"]) if old is not None else 0)
        if n_docs == 0:
            raise StoreError(f"{corpus}: no document has 2 or more tokens; C is undefined")
        entry_sum = summary.entry_sum + (base[1] if base is not None else 0.0)
        tiles = tile_tasks(
            len(blocks), edges, scratch, summary.diagonal, entry_sum, tmp,
            batch_nnz=batch_nnz, codoc=codoc, base=base,
        )
        _progress.compute(*tiles)
        group = zarr.open_group(zarr_store(tmp), mode="r+")
        group["D1"][:] = summary.doc_freq + (old.D1[:] if old is not None else 0)
        write_array(tmp, "doc_hashes", np.sort(doc_hashes))
        skipped = summary.n_short + (int(old.attrs["n_docs_skipped"]["fewer_than_2_tokens"]) if old else 0)
        valid = summary.n_validation + (int(old.attrs.get("n_docs_validation", 0)) if old is not None else 0)
        held = sum(b.n_rows for b in blocks) - summary.n_docs - summary.n_short - summary.n_validation
        held += int(old.attrs.get("n_docs_heldout", 0)) if old is not None else 0
        result = CooccurrenceSummary(
            n_words=n_words,
            n_docs=n_docs,
            n_docs_skipped={"fewer_than_2_tokens": skipped},
            n_docs_heldout=held,
            heldout_fraction=heldout,
            n_tokens=summary.n_tokens + (int(old.attrs["n_tokens"]) if old is not None else 0),
            entry_sum=entry_sum,
            n_blocks=len(blocks),
            n_tiles=len(tiles),
            path=cooc_path(root),
            n_docs_validation=valid,
            validation_fraction=validation,
            weighting=weighting,
        )
        now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        updates = list(old.attrs.get("updates", [])) if old is not None else []
        if old is not None:
            updates.append({"created": now, "shards": [m["path"] for m in manifest], "n_docs": summary.n_docs})
        group.attrs.update(
            {
                "schema_version": SCHEMA_VERSION,
                "n_words": n_words,
                "tile_size": tile_size,
                "n_docs": result.n_docs,
                "n_docs_skipped": result.n_docs_skipped,
                "heldout_fraction": heldout,
                "n_docs_heldout": held,
                "validation_fraction": validation,
                "n_docs_validation": valid,
                "n_tokens": result.n_tokens,
                "entry_sum": result.entry_sum,
                "weighting": weighting,
                "vocab_hash": vocabulary_hash(words),
                "corpus_manifest": (list(old.attrs["corpus_manifest"]) if old is not None else []) + list(manifest),
                "updates": updates,
                "codoc": codoc,
                "created": now,
                "versions": library_versions(),
            }
        )
        remove(scratch, root=root)
    return result


#: Product tasks per pass of the compressed eigensolver (fixed, so the sums do not depend on the cluster).
PRODUCT_TASKS = 8
#: LOBPCG iterations between residual checks of the compressed eigensolver (every iteration is a pass).
#: Measured on a `jsmf synth` corpus (M = 20k, N = 5k, rank 20, tol 1e-6): 16 passes to a residual of
#: 1.8e-10 with checks every 10 iterations (the first check comes long after 1e-6), 9 passes to 2.7e-8
#: every 3, 14 every 2 (each restart of LOBPCG loses its search directions).
COMPRESSED_CHECK_EVERY = 3


def _compressed(root: str, blocks, words: list[str], split: DocumentSplit, weighting: str, rank: int, eig_tol: float,
                tile_size: int, overwrite: bool, on_pass) -> CooccurrenceSummary:
    """The compressed store: persist the scaled counts, then a block eigensolver whose products are corpus passes."""
    n_words = len(words)
    corpus = corpus_dir(root)
    shards = sorted({b.path for b in blocks})
    with staged_output(cooc_path(root), root=root, overwrite=overwrite) as tmp:
        client = _progress.active_client()
        scaled = scaled_blocks(blocks, n_words, split, weighting=weighting)
        scaled = list(client.persist(scaled)) if client is not None else list(
            dask.persist(*scaled, scheduler=dask.config.get("scheduler", None) or "threads"))
        manifest = [dask.delayed(file_manifest, pure=True)(u) for u in shards]
        (summary, hashes), manifest = _progress.compute(block_totals(scaled), manifest)
        _check_unique(blocks, hashes)
        if summary.n_docs == 0:
            raise StoreError(f"{corpus}: no document has 2 or more tokens; C is undefined")
        correction = summary.diagonal - summary.squares
        passes = 0
        started = time.perf_counter()

        def matmat(V: np.ndarray) -> np.ndarray:
            nonlocal passes, started
            V = np.ascontiguousarray(V)
            shared = client.scatter(V, broadcast=True) if client is not None else V
            with dask.config.set({"jsmf.progress": False}):
                (HtHV,) = _progress.compute(product_task(scaled, shared, n_tasks=PRODUCT_TASKS))
            passes += 1
            if on_pass is not None:
                on_pass(passes, time.perf_counter() - started)
            started = time.perf_counter()
            return (HtHV + correction[:, None] * V) / summary.entry_sum

        eig = top_eigenpairs(matmat, n_words, rank, tol=eig_tol, check_every=COMPRESSED_CHECK_EVERY,
                             rng=np.random.default_rng(0))
        row_sums = matmat(np.ones((n_words, 1)))[:, 0]  # p(w) exactly (specificity), one more pass
        scaled.clear()  # the persisted blocks are released on the workers once no reference remains
        write_compressed(tmp, eig.values, eig.vectors, tile_size)
        group = zarr.open_group(zarr_store(tmp), mode="r+")
        group["D1"][:] = summary.doc_freq
        write_array(tmp, "row_sums", row_sums)
        write_array(tmp, "doc_hashes", np.sort(np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)))
        held = sum(b.n_rows for b in blocks) - summary.n_docs - summary.n_short - summary.n_validation
        result = CooccurrenceSummary(
            n_words=n_words, n_docs=summary.n_docs, n_docs_skipped={"fewer_than_2_tokens": summary.n_short},
            n_docs_heldout=held, heldout_fraction=split.heldout, n_tokens=summary.n_tokens,
            entry_sum=summary.entry_sum, n_blocks=len(blocks), n_tiles=0, path=cooc_path(root), rank=rank,
            eig_residual=eig.residual, n_passes=passes, n_docs_validation=summary.n_validation,
            validation_fraction=split.validation, weighting=weighting,
        )
        group.attrs.update({
            "schema_version": SCHEMA_VERSION, "form": "compressed", "rank": rank, "eig_residual": eig.residual,
            "eig_tol": eig_tol, "n_passes": passes, "n_words": n_words, "tile_size": tile_size,
            "n_docs": result.n_docs, "n_docs_skipped": result.n_docs_skipped, "heldout_fraction": split.heldout,
            "n_docs_heldout": held, "validation_fraction": split.validation,
            "n_docs_validation": summary.n_validation, "n_tokens": result.n_tokens, "entry_sum": result.entry_sum,
            "weighting": weighting, "vocab_hash": vocabulary_hash(words), "corpus_manifest": list(manifest),
            "updates": [], "codoc": False,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "versions": library_versions(),
        })
    if eig.residual > eig_tol:
        warnings.warn(f"the compressed store's eigenpairs stopped at a relative residual {eig.residual:.2e} above "
                      f"eig_tol={eig_tol:g} after {passes} passes", ConvergenceWarning, stacklevel=3)
    return result


def _check_unique(blocks, hashes) -> None:
    dup = repeated_doc_id(hashes, lambda part, row: read_block(blocks[part], None).column("doc_id")[row].as_py())
    if dup is not None:
        (a, ra), (b, rb), doc_id = dup
        raise CorpusSchemaError(
            f"{blocks[b].path}: row {blocks[b].row_offset + rb}: field 'doc_id' repeats {doc_id!r} (first at "
            f"{blocks[a].path} row {blocks[a].row_offset + ra}); expected doc_id unique across the corpus"
        )
