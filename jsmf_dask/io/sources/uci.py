"""UCI bag of words: ``docword.X.txt[.gz]`` (header D, W, NNZ; then ``docID wordID count``) and ``vocab.X.txt``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from jsmf_dask.exceptions import InputError
from jsmf_dask.io.sources._common import INT_PATTERN, ReadSummary, open_input

__all__ = ["read_uci_vocabulary", "UCIPartition", "uci_partitions"]

def read_uci_vocabulary(url: str) -> list[str]:
    """Words of a UCI ``vocab.*.txt`` (line k is word k), checked for blanks and repeats."""
    with open_input(url) as f:
        text = f.read().decode("utf-8", errors="strict")
    words = text.splitlines()
    seen: dict[str, int] = {}
    for i, w in enumerate(words, start=1):
        w = w.strip()
        if not w:
            raise InputError(f"{url}: line {i}: empty word; expected one word per line")
        if w in seen:
            raise InputError(f"{url}: line {i}: word {w!r} repeats line {seen[w]}; expected unique words")
        seen[w] = i
    return [w.strip() for w in words]


class _NotAnInteger(Exception):
    """A body field that the typed reading could not parse as an integer."""


@dataclass(frozen=True)
class UCIPartition:
    """A UCI ``docword`` file (header D, W, NNZ; then ``docID wordID count`` lines).

    Terms are 0-based indices into the vocabulary file of ``n_vocab`` words.
    """

    url: str
    n_vocab: int
    vocab_url: str
    doc_names: tuple[str, ...] | None = None
    block_size: int = 20000
    batch_bytes: int = 1 << 24

    @property
    def source(self) -> str:
        return self.url

    def read(self) -> Iterator[pa.Table]:
        summary = ReadSummary()
        with open_input(self.url) as f:
            header = [f.readline() for _ in range(3)]
            values = []
            for i, (name, line) in enumerate(zip(("D", "W", "NNZ"), header, strict=True), start=1):
                text = line.decode("utf-8", errors="replace").strip()
                if not INT_PATTERN.match(text) or int(text) < 0:
                    raise InputError(
                        f"{self.url}: line {i}: header field {name} is {text!r}; expected a non-negative integer"
                    )
                values.append(int(text))
            n_docs, n_vocab, nnz = values
            if n_vocab != self.n_vocab:
                raise InputError(
                    f"{self.url}: line 2: header W={n_vocab} but {self.vocab_url} has {self.n_vocab} words"
                )
            if self.doc_names is not None and len(self.doc_names) != n_docs:
                raise InputError(
                    f"{self.url}: line 1: header D={n_docs} but the document-id file has {len(self.doc_names)} lines"
                )
            try:
                yield from self._body(f, n_docs, nnz, summary, typed=True)
            except _NotAnInteger as err:
                reason = err
            else:
                return summary
        # A field that is not an integer: read again as text to name its line (the error comes from there).
        with open_input(self.url) as f:
            for _ in range(3):
                f.readline()
            for _ in self._body(f, n_docs, nnz, ReadSummary(), typed=False):
                pass
        raise InputError(f"{self.url}: body: expected three space-separated integers 'docID wordID count' "
                         f"({reason})")

    def _body(self, f, n_docs: int, nnz: int, summary: ReadSummary, *, typed: bool) -> Iterator[pa.Table]:
        """The documents of the body. ``typed``: the fields parsed as integers straight away (a field that is
        not one raises :class:`_NotAnInteger`, without its line); else as text checked field by field, whose
        errors name the line (2.5× slower: the reading again after a :class:`_NotAnInteger`)."""
        bad_row: list[int] = []

        def on_invalid(row) -> str:
            bad_row.append(row.number)
            return "error"

        cols = ["doc", "word", "count"]
        reader_opts = dict(
            read_options=pacsv.ReadOptions(column_names=cols, use_threads=False, block_size=self.batch_bytes),
            parse_options=pacsv.ParseOptions(delimiter=" ", invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(column_types={c: pa.int64() if typed else pa.string() for c in cols}),
        )
        seen_rows = 0
        carry: tuple[np.ndarray, ...] | None = None  # the rows of the last document so far, from line carry_line
        carry_line = 4
        last_doc = 0
        n_seen_docs = 0
        pending: list[pa.Table] = []
        pending_docs = 0
        try:
            reader = pacsv.open_csv(f, **reader_opts)
            for batch in reader:
                arrays = []
                for j, name in enumerate(cols):
                    col = batch.column(j)
                    if typed:
                        arrays.append(col.to_numpy())
                        continue
                    ok = pc.match_substring_regex(col, r"^-?[0-9]+$").to_numpy(zero_copy_only=False)
                    if not ok.all():
                        r = int(np.flatnonzero(~ok)[0])
                        raise InputError(
                            f"{self.url}: line {4 + seen_rows + r}: field {name} is {col[r].as_py()!r}; "
                            "expected an integer"
                        )
                    try:
                        arrays.append(pc.cast(col, pa.int64()).to_numpy())
                    except pa.ArrowInvalid:  # an integer beyond 64 bits
                        r = next(r for r, v in enumerate(col.to_pylist()) if abs(int(v)) >= 2**63)
                        raise InputError(
                            f"{self.url}: line {4 + seen_rows + r}: field {name} is {col[r].as_py()!r}; "
                            "expected an integer"
                        ) from None
                doc, word, count = arrays
                batch_line = 4 + seen_rows  # the line of the batch's first row: row r is on line batch_line + r
                seen_rows += doc.size
                self._check_ranges(doc, word, count, batch_line, n_docs)
                first_line = batch_line
                if carry is not None:  # the carried rows are the lines just before the batch's
                    doc, word, count = (np.concatenate([c, a]) for c, a in zip(carry, (doc, word, count), strict=True))
                    first_line = carry_line
                if doc.size and (doc[0] < last_doc or bool((doc[1:] < doc[:-1]).any())):
                    r = int(np.flatnonzero(np.diff(np.concatenate([[last_doc], doc])) < 0)[0])
                    prev = last_doc if r == 0 else doc[r - 1]
                    raise InputError(
                        f"{self.url}: line {first_line + r}: docID {doc[r]} after docID {prev}; "
                        "expected lines grouped by document in increasing docID order"
                    )
                last_doc = int(doc[-1]) if doc.size else last_doc
                # The last document may continue in the next batch.
                cut = int(np.searchsorted(doc, doc[-1], side="left")) if doc.size else 0
                carry = (doc[cut:], word[cut:], count[cut:])
                carry_line = first_line + cut
                if cut:
                    table = self._table(doc[:cut], word[:cut], count[:cut], first_line)
                    n_seen_docs += table.num_rows
                    pending.append(table)
                    pending_docs += table.num_rows
                    while pending_docs >= self.block_size:
                        whole = pa.concat_tables(pending)
                        yield whole.slice(0, self.block_size)
                        pending = [whole.slice(self.block_size)]
                        pending_docs = pending[0].num_rows
        except pa.ArrowInvalid as err:
            if typed and not bad_row and "conversion error" in str(err):
                raise _NotAnInteger(str(err)) from err
            where = f"line {3 + bad_row[0]}" if bad_row else "body"
            raise InputError(
                f"{self.url}: {where}: expected three space-separated integers 'docID wordID count' ({err})"
            ) from err
        if carry is not None and carry[0].size:
            table = self._table(*carry, carry_line)
            n_seen_docs += table.num_rows
            pending.append(table)
            pending_docs += table.num_rows
        if pending_docs:
            whole = pa.concat_tables(pending)
            for start in range(0, whole.num_rows, self.block_size):
                yield whole.slice(start, self.block_size)
        if seen_rows != nnz:
            raise InputError(
                f"{self.url}: line 3: header NNZ={nnz} but the body has {seen_rows} 'docID wordID count' lines"
            )
        summary.n_docs = n_docs
        summary.n_empty = n_docs - n_seen_docs

    def _check_ranges(self, doc, word, count, first_line, n_docs) -> None:
        """Raise on the first field out of range (row ``r`` is on line ``first_line + r``)."""
        if not doc.size or (doc.min() >= 1 and doc.max() <= n_docs and word.min() >= 1
                            and word.max() <= self.n_vocab and count.min() > 0):
            return
        checks = (
            ((doc < 1) | (doc > n_docs), "docID", doc, f"in 1..{n_docs} (header D)"),
            ((word < 1) | (word > self.n_vocab), "wordID", word, f"in 1..{self.n_vocab} (header W)"),
            (count <= 0, "count", count, "> 0"),
        )
        for mask, name, values, expected in checks:
            bad = np.flatnonzero(mask)
            if bad.size:
                r = int(bad[0])
                raise InputError(f"{self.url}: line {first_line + r}: {name} is {values[r]}; expected {expected}")

    def _table(self, doc, word, count, first_line) -> pa.Table:
        """Whole documents (``doc`` non-decreasing, row ``r`` from line ``first_line + r``) as a table, each
        document's words in increasing order."""
        key = doc * (self.n_vocab + 1) + word  # by document, then word (both checked in range)
        if not bool((key[1:] > key[:-1]).all()):  # the usual file is in order and needs no sort
            order = np.argsort(key, kind="stable")  # stable: a repeat names the earlier line first
            doc, word, count, key = doc[order], word[order], count[order], key[order]
            dup = np.flatnonzero(key[1:] == key[:-1])
            if dup.size:
                r = int(dup[0])
                raise InputError(
                    f"{self.url}: line {first_line + order[r + 1]}: docID {doc[r]} wordID {word[r]} repeats line "
                    f"{first_line + order[r]}; expected each (docID, wordID) once"
                )
        starts = np.flatnonzero(np.concatenate([[True], np.diff(doc) != 0]))
        offsets = np.concatenate([starts, [doc.size]]).astype(np.int32)
        ids = doc[starts]
        if self.doc_names is not None:
            names = [self.doc_names[i - 1] for i in ids]
        else:
            names = [str(i) for i in ids]
        return pa.table(
            {
                "doc_id": pa.array(names, pa.string()),
                "terms": pa.ListArray.from_arrays(pa.array(offsets), pa.array((word - 1).astype(np.int32))),
                "counts": pa.ListArray.from_arrays(pa.array(offsets), pa.array(count.astype(np.int32))),
            }
        )


def uci_partitions(
    docwords: Sequence[str], vocab_url: str, *, doc_ids_url: str | None, block_size: int
) -> tuple[list[UCIPartition], list[str]]:
    """Partitions (one per docword file) and the vocabulary words."""
    words = read_uci_vocabulary(vocab_url)
    names = None
    if doc_ids_url is not None:
        with open_input(doc_ids_url) as f:
            names = tuple(line.strip() for line in f.read().decode("utf-8").splitlines())
    parts = [
        UCIPartition(u, len(words), vocab_url, names, block_size) for u in docwords
    ]
    return parts, words


