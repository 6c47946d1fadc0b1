"""Readers of raw input: UCI bag of words, raw text, ratings and baskets.

Each source is split into *partitions* (picklable descriptions of a piece of
input: a file, a row group, a batch of text files, a ratings bucket). A
partition's ``read()`` yields *raw blocks*: Arrow tables with columns
``doc_id`` (string), ``terms`` (list of source term ids, int32 for UCI or
strings) and ``counts`` (list<int32>, > 0, terms unique within a document),
and returns a :class:`ReadSummary`. Memory is bounded by the block size,
whatever the input's size. Malformed input raises
:class:`~jsmf_dask.exceptions.InputError` naming the file, line or row, the
field and what was expected.
"""

from jsmf_dask.io.sources._common import ReadSummary
from jsmf_dask.io.sources.baskets import BasketsPartition, baskets_partitions
from jsmf_dask.io.sources.labels import read_labels
from jsmf_dask.io.sources.ratings import (
    RatingsBucketPartition,
    RatingsColumns,
    partition_ratings_file,
    ratings_buckets,
)
from jsmf_dask.io.sources.text import (
    TarballPartition,
    TextFilesPartition,
    TextOptions,
    TextTablePartition,
    text_partitions,
)
from jsmf_dask.io.sources.uci import UCIPartition, read_uci_vocabulary, uci_partitions

__all__ = [
    "read_labels",
    "ReadSummary",
    "UCIPartition",
    "read_uci_vocabulary",
    "uci_partitions",
    "TextOptions",
    "TextTablePartition",
    "TextFilesPartition",
    "TarballPartition",
    "text_partitions",
    "RatingsColumns",
    "RatingsBucketPartition",
    "partition_ratings_file",
    "ratings_buckets",
    "BasketsPartition",
    "baskets_partitions",
]
