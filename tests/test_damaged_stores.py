"""Damaged stores: a ``zarr.json`` or a chunk of a run root's Zarr stores (or of a saved estimator) that is not what
zarr wrote is a one-line :class:`~jsmf_dask.exceptions.StoreError` naming the store and the array, exit status 1,
and nothing written; never zarr's or a codec's traceback.

The damage is what an interrupted copy, a full disk or a hand edit leaves: a file emptied, cut short or overwritten,
a metadata field or a store attribute removed or mistyped. Session 50 corrupted one random file of a finished root 200 times and ran a
random command on it: 10 of the first 40 ended in a traceback (``JSONDecodeError``, ``UnicodeDecodeError``, a
codec's ``ValueError``) through the CLI. These cases are those routes, one per reading site.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from jsmf_dask import RectifiedAnchorWords, cooccur, evaluate, fit, ingest, load_model
from jsmf_dask.cli import main
from jsmf_dask.exceptions import StoreError
from tests.conftest import listing

REUTERS = Path(__file__).parent / "data" / "reuters395"


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A root with the shipped Reuters corpus (its 300 words of highest tf-idf), C (with D2), an AP model ``k3-ap``
    and its refined model ``k3-ap-refined``."""
    import dask

    from jsmf_dask.pipeline.refine import refine

    root = tmp_path_factory.mktemp("finished") / "root"
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        ingest(root, [str(REUTERS / "docword.reuters395.txt.gz")], vocab_size=300)
        cooccur(root)
        fit(root, n_topics=3, iterations=5)
        refine(root, model="k3-ap", sweeps=3)
        evaluate(root, sampled_fold_in=False)
    return root


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _junk(path: Path) -> None:
    path.write_bytes(bytes(range(0x80, 0xC0)) * 3)


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _no_codecs(path: Path) -> None:
    meta = json.loads(path.read_text())
    meta["codecs"] = []
    path.write_text(json.dumps(meta))


def _attribute(key, value):
    def damage(path: Path) -> None:
        meta = json.loads(path.read_text())
        meta["attributes"][key] = value
        path.write_text(json.dumps(meta))
    return damage


def _delete(path: Path) -> None:
    path.unlink()


def _manifest(reading):
    def damage(path: Path) -> None:
        manifest = json.loads(path.read_text())
        manifest["reading"] = reading(manifest["reading"])
        path.write_text(json.dumps(manifest))
    return damage


def _flip_in_a_page(path: Path) -> None:
    """One bit flipped inside the data of the last column's pages in the first row group (past their header)."""
    import pyarrow.parquet as pq

    column = pq.ParquetFile(path).metadata.row_group(0).column(2)  # counts
    at = column.data_page_offset + column.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    data[at] ^= 0x08
    path.write_bytes(bytes(data))


FIT = ["fit", "{root}", "--topics", "3", "--name", "new", "--iterations", "5"]
TRANSFORM = ["transform", "{root}", "--model", "k3-ap", "{root}/../new.txt", "--format", "baskets", "--output",
             "{root}/../out"]
CASES = [  # id, the file damaged, how, the command, the message
    ("C-chunk-cut", "cooc.zarr/C/c/0/0", _cut, FIT,
     r"cooc\.zarr/C: cannot be read, the store is damaged \(ValueError: .*\); build it again with `jsmf cooccur ROOT "
     r"--overwrite`"),
    ("C-metadata-without-codecs", "cooc.zarr/C/zarr.json", _no_codecs, FIT,
     r"cooc\.zarr/C: cannot be read, the store is damaged \(ValueError: At least one ArrayBytesCodec is required"),
    ("D2-chunk-overwritten", "cooc.zarr/D2/c/0/0", _junk, ["evaluate", "{root}", "--model", "k3-ap"],
     r"cooc\.zarr/D2: cannot be read, the store is damaged"),
    ("doc-hashes-metadata-empty", "cooc.zarr/doc_hashes/zarr.json", _empty, ["cooccur", "{root}", "--update"],
     r"cooc\.zarr/doc_hashes: cannot be read, the store is damaged \(JSONDecodeError"),
    ("B-metadata-empty", "model.zarr/k3-ap/B/zarr.json", _empty,
     ["export", "{root}", "--model", "k3-ap", "--format", "csv"],
     r"model\.zarr/k3-ap/B: cannot be read, the store is damaged \(JSONDecodeError: .*\); fit or refine the model "
     r"again with --overwrite, or delete it"),
    ("B-chunk-overwritten", "model.zarr/k3-ap-refined/B/c/0/0", _junk, ["infer", "{root}", "--model", "k3-ap-refined"],
     r"model\.zarr/k3-ap-refined/B: cannot be read, the store is damaged"),
    ("alpha-chunk-cut", "model.zarr/k3-ap-refined/alpha/c/0", _cut,
     ["refine", "{root}", "--model", "k3-ap-refined", "--name", "again", "--sweeps", "2"],
     r"model\.zarr/k3-ap-refined/alpha: cannot be read, the store is damaged"),
    ("model-metadata-not-utf8", "model.zarr/k3-ap/zarr.json", _junk, ["report", "{root}", "--model", "k3-ap"],
     r"model\.zarr/k3-ap: cannot be read, the store is damaged \(UnicodeDecodeError"),
    ("trace-metadata-empty", "model.zarr/k3-ap/trace/seconds/zarr.json", _empty,
     ["evaluate", "{root}", "--model", "k3-ap"], r"model\.zarr/k3-ap/trace: cannot be read, the store is damaged"),
    ("correction-chunk-cut", "model.zarr/k3-ap/correction/rows/c/0", _cut, ["evaluate", "{root}", "--model", "k3-ap"],
     r"model\.zarr/k3-ap/correction: cannot be read, the store is damaged"),
    ("cooc-attribute-mistyped", "cooc.zarr/zarr.json", _attribute("heldout_fraction", "x"), FIT,
     r"cooc\.zarr: attribute 'heldout_fraction' is 'x'; expected float, documents whose doc_id hash"),
    ("cooc-weighting-unknown", "cooc.zarr/zarr.json", _attribute("weighting", "words"),
     ["refine", "{root}", "--model", "k3-ap", "--name", "again", "--sweeps", "2"],
     r"cooc\.zarr: attribute 'weighting' is 'words'; expected 'tokens' \(each document weighed by its tokens"),
    ("cooc-tile-size-a-list", "cooc.zarr/zarr.json", _attribute("tile_size", [1, 2]),
     ["choose-k", "{root}", "--topics", "3:4"], r"cooc\.zarr: attribute 'tile_size' is \[1, 2\]; expected int"),
    ("B-metadata-deleted", "model.zarr/k3-ap/B/zarr.json", _delete, ["evaluate", "{root}", "--model", "k3-ap"],
     r"model\.zarr/k3-ap: array 'B' is missing, the model is incomplete; fit or refine the model again"),
    ("manifest-not-json", "corpus/_ingest.json", _cut, TRANSFORM,
     r"corpus/_ingest\.json: cannot be read, the file is damaged \(JSONDecodeError"),
    ("manifest-reading-a-list", "corpus/_ingest.json", _manifest(lambda r: [r]), TRANSFORM,
     r"corpus/_ingest\.json: field 'reading' is \[\{.*\}\]; expected an object"),
    ("manifest-reading-mistyped", "corpus/_ingest.json", _manifest(lambda r: {**r, "header": "yes"}), TRANSFORM,
     r"corpus/_ingest\.json: field 'reading': 'header' is 'yes', not what `jsmf ingest` records"),
    ("C-chunk-deleted", "cooc.zarr/C/c/0/0", _delete, FIT,
     r"cooc\.zarr/C: 1 of its 1 chunks are missing, the store is damaged \(a copy cut short\?\); build it again"),
    ("B-chunk-deleted", "model.zarr/k3-ap-refined/B/c/0/0", _delete, ["export", "{root}", "--model", "k3-ap-refined",
                                                                     "--format", "json"],
     r"model\.zarr/k3-ap-refined/B: 1 of its 1 chunks are missing"),
    ("correction-chunk-deleted", "model.zarr/k3-ap/correction/values/c/0", _delete,
     ["evaluate", "{root}", "--model", "k3-ap"], r"model\.zarr/k3-ap/correction/values: 1 of its 1 chunks are missing"),
    ("model-attribute-mistyped", "model.zarr/k3-ap-refined/zarr.json", _attribute("heldout_fraction", "x"),
     ["report", "{root}"], r"model\.zarr/k3-ap-refined: attribute 'heldout_fraction' is 'x'; expected a number; fit "
     r"or refine the model again"),
    ("model-n-iter-a-string", "model.zarr/k3-ap/zarr.json", _attribute("n_iter", "5"), ["export", "{root}", "--model",
                                                                                     "k3-ap", "--format", "csv"],
     r"model\.zarr/k3-ap: attribute 'n_iter' is '5'; expected an integer;"),
    ("model-params-a-list", "model.zarr/k3-ap/zarr.json", _attribute("params", [3]), ["evaluate", "{root}"],
     r"model\.zarr/k3-ap: attribute 'params' is \[3\]; expected an object or null"),
    ("corpus-page-bit-flipped", "corpus/part-00000.parquet", _flip_in_a_page, ["cooccur", "{root}", "--overwrite"],
     r"corpus/part-00000\.parquet: row group 0: could not verify page integrity, CRC checksum verification failed"),
    ("metrics-cut", "report/metrics.json", _cut, ["report", "{root}"],
     r"report/metrics\.json: cannot be read, the file is damaged \(JSONDecodeError: .*\); run `jsmf evaluate .*` again"),
    ("models-group-metadata-cut", "model.zarr/zarr.json", _cut, FIT,
     r"model\.zarr: cannot be read, the store is damaged \(JSONDecodeError"),
]


@pytest.mark.parametrize("damaged,damage,argv,match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_damaged_store_is_a_one_line_error_and_nothing_is_written(finished, tmp_path, capsys, damaged, damage,
                                                                     argv, match):
    root = tmp_path / "root"
    shutil.copytree(finished, root)
    damage(root / damaged)
    (tmp_path / "new.txt").write_text("bank,oil,minister\n")
    before = listing(tmp_path)
    status = main([a.format(root=root) for a in argv] + ["--scheduler", "synchronous", "--quiet"])
    err = capsys.readouterr().err
    assert status == 1, err
    assert err.startswith("jsmf: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(match, err), err
    assert listing(tmp_path) == before


def test_a_damaged_saved_estimator_is_a_store_error(finished, tmp_path):
    X = np.random.default_rng(0).poisson(0.5, size=(200, 80))
    path = RectifiedAnchorWords(n_components=3, max_iter=3, min_anchor_df=0).fit(X).save(tmp_path / "saved")
    chunk = next(p for p in sorted(Path(path, "arrays.zarr", "B").rglob("*")) if p.is_file() and p.name != "zarr.json")
    _junk(chunk)
    with pytest.raises(StoreError, match=r"saved/arrays\.zarr/B: cannot be read, the store is damaged \(.*\); save "
                       r"the estimator again"):
        load_model(path)
    _empty(Path(path, "arrays.zarr", "zarr.json"))
    with pytest.raises(StoreError, match=r"saved/arrays\.zarr: cannot be read, the store is damaged \(JSONDecodeError"):
        load_model(path)
