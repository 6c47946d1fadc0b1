"""Display labels of items: a CSV or TSV whose first column is the item (word) and second its label.

MovieLens ships ``movies.csv`` (``movieId,title,genres``): the ratings' item ids
become the movies' titles in every topic list and report.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.csv as pacsv

from jsmf_dask.exceptions import InputError
from jsmf_dask.io.fs import get_fs

__all__ = ["read_labels"]


def read_labels(url: str, *, encoding: str = "utf-8") -> dict[str, str]:
    """``{item: label}`` from the first two columns of a CSV (``.tsv``: tab-separated) file with a header.

    Raises
    ------
    InputError
        Missing or unreadable file, fewer than two columns, an empty item, or
        an item listed twice (the message names the file and line).
    """
    fs, path = get_fs(url)
    if not fs.exists(path) or fs.isdir(path):
        raise InputError(f"{url}: no such labels file")
    delimiter = "\t" if path.lower().endswith((".tsv", ".tsv.gz")) else ","
    try:
        with fs.open(path, "rb", compression="infer") as f:
            table = pacsv.read_csv(
                f,
                read_options=pacsv.ReadOptions(use_threads=False, encoding=encoding),
                parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(strings_can_be_null=False, column_types={}),
            )
    except (pa.ArrowInvalid, UnicodeDecodeError) as err:
        raise InputError(f"{url}: cannot read as a labels table (item, label, ...): {err}") from err
    if table.num_columns < 2:
        raise InputError(f"{url}: {table.num_columns} column(s); expected the item then its label "
                         "(e.g. MovieLens movies.csv: movieId,title,genres)")
    items = [str(x) for x in table.column(0).to_pylist()]
    labels = [str(x) for x in table.column(1).to_pylist()]
    out: dict[str, str] = {}
    for row, (item, label) in enumerate(zip(items, labels, strict=True), start=2):
        if not item.strip():
            raise InputError(f"{url}: line {row}: the item ({table.column_names[0]}) is empty")
        if item in out:
            raise InputError(f"{url}: line {row}: item {item!r} is labelled twice")
        out[item] = label
    return out
