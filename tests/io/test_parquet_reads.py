"""Every store is read without :mod:`pyarrow.dataset` (``pq.read_table``'s route).

A script that had scanned through it could abort at exit, after its work succeeded ("terminate called without
an active exception", status 134; apache/arrow#34314): measured in 2 of 12 runs of a script that read one
vocabulary that way. Whether a given run aborts is chance, so the test checks the cause, which is certain: the
module is never imported.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import REUTERS_DOCWORD

ROOT = Path(__file__).parents[2]


def test_a_run_and_its_saved_model_are_read_without_pyarrow_dataset(tmp_path):
    """ingest (with an append, whose doc_id check reads the old shards) → cooccur → fit → refine → evaluate,
    transform, a saved model and its reload, in a fresh process."""
    root, saved = tmp_path / "root", tmp_path / "saved"
    code = f"""
import sys, dask
from pathlib import Path
from jsmf_dask import cooccur, evaluate, fit, ingest, load_model, refine
from jsmf_dask.pipeline.transform import transform
from tests.conftest import read_uci, write_uci
docs = read_uci({str(REUTERS_DOCWORD)!r})
vocab = open({str(REUTERS_DOCWORD.parent / "vocab.reuters395.txt")!r}).read().split()
write_uci(Path({str(tmp_path)!r}), docs[:300], vocab, name="a")
write_uci(Path({str(tmp_path)!r}), docs[300:], vocab, name="b")
with open({str(tmp_path / "ids-b.txt")!r}, "w") as f:
    f.write("".join(f"b{{i}}\\n" for i in range(len(docs) - 300)))
with dask.config.set({{"jsmf.progress": False, "scheduler": "threads"}}):
    ingest({str(root)!r}, [{str(tmp_path / "docword.a.txt")!r}], vocab_size=400)
    ingest({str(root)!r}, [{str(tmp_path / "docword.b.txt")!r}], doc_ids={str(tmp_path / "ids-b.txt")!r}, append=True)
    cooccur({str(root)!r}, heldout=0.1, validation=0.05)
    fit({str(root)!r}, n_topics=4, iterations=5)
    refine({str(root)!r}, model="k4-ap", sweeps=2)
    evaluate({str(root)!r})
    transform({str(root)!r}, [{str(tmp_path / "docword.a.txt")!r}], model="k4-ap-refined",
              output={str(tmp_path / "theta")!r})
    load_model({str(root)!r}, "k4-ap-refined").save({str(saved)!r})
    load_model({str(saved)!r})
print("pyarrow.dataset" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout


def test_read_parquet_reads_what_was_written(tmp_path):
    from jsmf_dask.io.parquet import read_parquet

    table = pa.table({"word": ["a", "b", "c"], "count": pa.array([3, 1, 2], pa.int64())})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    assert read_parquet(str(path)).equals(table)
    assert read_parquet(str(path), columns=["count"]).equals(table.select(["count"]))
