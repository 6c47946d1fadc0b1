"""Bad input: each case gets a clear error naming file/line/field, and nothing is left half-written."""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jsmf_dask import cooccur, ingest
from jsmf_dask.cli import main
from jsmf_dask.exceptions import CorpusSchemaError, InputError, InvalidParameterError, StoreError
from tests.conftest import listing, write_uci

VOCAB = ["alpha", "beta", "gamma", "delta"]
GOOD = [{0: 2, 1: 3, 2: 1}, {1: 1, 2: 4, 3: 2}]


def uci(tmp: Path, *, header=None, lines=None) -> list[str]:
    return [str(write_uci(tmp, GOOD, VOCAB, header=header, lines=lines))]


@dataclass
class Case:
    id: str
    setup: Callable[[Path], dict]
    error: type[Exception]
    match: str


INGEST_CASES = [
    Case("nnz-disagrees", lambda t: {"inputs": uci(t, header=(2, 4, 7))}, InputError,
         r"docword\.t\.txt: line 3: header NNZ=7 but the body has 6"),
    Case("doc-beyond-D", lambda t: {"inputs": uci(t, header=(1, 4, 6))}, InputError,
         r"docword\.t\.txt: line 7: docID is 2; expected in 1\.\.1 \(header D\)"),
    Case("W-disagrees-with-vocab", lambda t: {"inputs": uci(t, header=(2, 5, 6))}, InputError,
         r"docword\.t\.txt: line 2: header W=5 but .*vocab\.t\.txt has 4 words"),
    Case("word-id-out-of-range", lambda t: {"inputs": uci(t, lines=["1 1 2", "1 5 1", "2 2 1"], header=(2, 4, 3))},
         InputError, r"line 5: wordID is 5; expected in 1\.\.4"),
    Case("word-id-zero", lambda t: {"inputs": uci(t, lines=["1 0 2"], header=(1, 4, 1))},
         InputError, r"line 4: wordID is 0; expected in 1\.\.4"),
    Case("zero-count", lambda t: {"inputs": uci(t, lines=["1 1 2", "1 2 0"], header=(1, 4, 2))},
         InputError, r"line 5: count is 0; expected > 0"),
    Case("negative-count", lambda t: {"inputs": uci(t, lines=["1 1 -3"], header=(1, 4, 1))},
         InputError, r"line 4: count is -3; expected > 0"),
    Case("duplicate-doc-word", lambda t: {"inputs": uci(t, lines=["1 1 2", "1 2 1", "1 1 5"], header=(1, 4, 3))},
         InputError, r"line 6: docID 1 wordID 1 repeats line 4; expected each \(docID, wordID\) once"),
    Case("non-numeric-field", lambda t: {"inputs": uci(t, lines=["1 1 2", "1 two 1"], header=(1, 4, 2))},
         InputError, r"line 5: field word is 'two'; expected an integer"),
    Case("non-numeric-header", lambda t: {"inputs": uci(t, lines=["1 1 2"], header=("x", 4, 1))},
         InputError, r"line 1: header field D is 'x'; expected a non-negative integer"),
    Case("missing-field", lambda t: {"inputs": uci(t, lines=["1 1 2", "1 2"], header=(1, 4, 2))},
         InputError, r"docword\.t\.txt: line 5: expected three space-separated integers"),
    Case("docs-not-grouped", lambda t: {"inputs": uci(t, lines=["2 1 2", "1 2 1"], header=(2, 4, 2))},
         InputError, r"line 5: docID 1 after docID 2; expected lines grouped by document"),
    Case("empty-after-curation", lambda t: {"inputs": uci(t), "min_doc_tokens": 100}, InputError,
         r"the corpus is empty after curation: every document has fewer than 100 tokens"),
    Case("text-without-tokens", lambda t: _text_dir(t, {"a.txt": b"w1 w2 x_3 42 b7", "b.txt": b"id-9 a1 b2"}),
         InputError, r"texts: no document with any term was found \(text is read as runs of at least 3 letters; "
         r"digits, underscores and punctuation separate them: see --min-word-length\)"),
    Case("only-stopwords", lambda t: {"inputs": uci(t), "stopwords": VOCAB}, InputError,
         r"the vocabulary is empty after curation \(4 stop words"),
    Case("vocab-size-zero", lambda t: {"inputs": uci(t), "vocab_size": 0}, InvalidParameterError,
         r"The 'vocab_size' parameter of ingest must be an int in the range \[1, inf\) or None\. Got 0 instead\."),
    Case("vocab-size-negative", lambda t: {"inputs": uci(t), "vocab_size": -5}, InvalidParameterError,
         r"'vocab_size' parameter of ingest .* Got -5 instead"),
    Case("unknown-format", lambda t: {"inputs": uci(t), "format": "xml"}, InvalidParameterError,
         r"The 'format' parameter of ingest must be a str among \{'auto', 'uci', 'text', 'ratings', 'baskets'\}"),
    Case("missing-input", lambda t: {"inputs": [str(t / "nope" / "docword.x.txt")]}, InputError,
         r"nope/vocab\.x\.txt: no such file"),
    Case("missing-text-input", lambda t: {"inputs": [str(t / "nope.jsonl")]}, InputError,
         r"nope\.jsonl: no such file or directory"),
    Case("corrupt-gzip", lambda t: _corrupt_gzip(t), InputError, r"docword\.z\.txt\.gz: "),
    Case("duplicate-doc-ids", lambda t: _jsonl(t, ['{"id": "a", "text": "one two three four five"}',
                                                   '{"id": "a", "text": "six seven eight nine ten"}']),
         InputError, r"document id 'a' occurs more than once"),
    Case("bad-json", lambda t: _jsonl(t, ['{"id": "a", "text": "fine words here"}', '{"id": "b", "text": ']),
         InputError, r"docs\.jsonl: line 2: not valid JSON"),
    Case("missing-text-field", lambda t: _jsonl(t, ['{"id": "a", "body": "x"}']), InputError,
         r"docs\.jsonl: line 1: no field 'text'"),
    Case("latin1-jsonl", lambda t: _bytes(t, "docs.jsonl", '{"text": "un café noir, très fort"}\n'.encode("latin-1")),
         InputError, r"docs\.jsonl: line 1: byte \d+: not valid utf-8 .* pass --encoding"),
    Case("latin1-text-file", lambda t: _text_dir(t, {"a.txt": "naïve text here".encode("latin-1")}),
         InputError, r"texts/a\.txt: byte 2: not valid utf-8"),
    Case("binary-file-in-directory", lambda t: _text_dir(t, {"a.txt": b"plain words in a file",
                                                            "b.bin": bytes(range(256)) * 4}),
         InputError, r"texts/b\.bin: binary data \(NUL byte at 0\); expected a text file"),
    Case("latin1-tar-member", lambda t: _tarball(t, {"x/a.txt": "déjà vu".encode("latin-1")}),
         InputError, r"docs\.tar: member x/a\.txt: byte 1: not valid utf-8"),
    Case("latin1-baskets", lambda t: {**_bytes(t, "b.txt", "crème,brûlée\n".encode("latin-1")), "format": "baskets"},
         InputError, r"b\.txt: line 1: byte 2: not valid utf-8"),
    Case("uci-directory-with-other-files", lambda t: _uci_dir(t, extra={"notes.md": b"hello"}),
         InputError, r"uci: directory holds UCI bag-of-words files \(docword\.t\.txt, vocab\.t\.txt\) and other files"),
    Case("uci-without-docword-name", lambda t: {"inputs": [_renamed(uci(t)[0], "counts.txt")], "format": "uci"},
         InputError, r"counts\.txt: read as a UCI docword file, but it is not named docword\.<name>\.txt\[\.gz\]"),
    Case("unknown-encoding", lambda t: {**_bytes(t, "d.jsonl", b'{"text": "x"}\n'), "encoding": "klingon"},
         InvalidParameterError, r"The 'encoding' parameter of ingest must name a Python codec"),
    Case("labels-missing", lambda t: {**_ratings(t, "u,i,r\na,x,4\n"), "labels": str(t / "nope.csv")}, InputError,
         r"nope\.csv: no such labels file"),
    Case("labels-twice", lambda t: {**_ratings(t, "u,i,r\na,x,4\n"), "labels": _file(t, "l.csv", "i,t\nx,X\nx,Y\n")},
         InputError, r"l\.csv: line 3: item 'x' is labelled twice"),
    Case("labels-one-column", lambda t: {**_ratings(t, "u,i,r\na,x,4\n"), "labels": _file(t, "l.csv", "i\nx\n")},
         InputError, r"l\.csv: 1 column\(s\); expected the item then its label"),
    Case("ratings-header-repeats-a-column", lambda t: _ratings(t, "u,r,r,t\na,x,4,1\n"), InputError,
         r"ratings\.csv: line 1: the header names 2 columns 'r', the item column \(columns: \['u', 'r', 'r', 't'\]\)"),
    # numeric columns: pyarrow reads an empty field there as null (a TypeError from the rating check until session 49)
    Case("rating-empty", lambda t: _ratings(t, "u,i,r\n1,2,4\n2,3,\n"), InputError,
         r"ratings\.csv: line 3: field r is ''; expected a number"),
    Case("user-empty-among-numbers", lambda t: _ratings(t, "u,i,r\n1,2,4\n,3,5\n"), InputError,
         r"ratings\.csv: line 3: field u is empty"),
    Case("rating-huge", lambda t: _ratings(t, "u,i,r\n1,2,4\n2,3,1e308\n"), InputError,
         r"ratings\.csv: line 3: field r is 1e\+308; expected a rating >= 0 and at most 1073741823 \(is 'r' the "
         r"rating column\?\)"),
    Case("rating-not-a-number", lambda t: _ratings(t, "u,i,r\na,x,4\nb,y,lots\n"), InputError,
         r"ratings\.csv: line 3: field r is 'lots'; expected a number"),
    Case("rating-negative", lambda t: _ratings(t, "u,i,r\na,x,4\nb,y,-1\n"), InputError,
         r"ratings\.csv: line 3: field r is -1\.0; expected a rating >= 0"),
    Case("rating-repeated", lambda t: _ratings(t, "u,i,r\na,x,4\na,x,3\n"), InputError,
         r"ratings\.csv: line 3: user 'a' rates item 'x' again \(first at .*ratings\.csv line 2\)"),
]


def _file(t: Path, name: str, text: str) -> str:
    (t / name).write_text(text)
    return str(t / name)


def _bytes(t: Path, name: str, data: bytes) -> dict:
    path = t / name
    path.write_bytes(data)
    return {"inputs": [str(path)], "min_doc_tokens": 1, "min_doc_words": 1}


def _text_dir(t: Path, files: dict[str, bytes]) -> dict:
    for name, data in files.items():
        (t / "texts").mkdir(exist_ok=True)
        (t / "texts" / name).write_bytes(data)
    return {"inputs": [str(t / "texts")], "min_doc_tokens": 1, "min_doc_words": 1}


def _tarball(t: Path, members: dict[str, bytes]) -> dict:
    import io
    import tarfile

    with tarfile.open(t / "docs.tar", "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return {"inputs": [str(t / "docs.tar")], "min_doc_tokens": 1, "min_doc_words": 1}


def _uci_dir(t: Path, extra: dict[str, bytes] | None = None) -> dict:
    d = t / "uci"
    d.mkdir()
    (d / "docword.t.txt").write_text("2\n4\n4\n1 1 3\n1 2 2\n2 3 4\n2 4 1\n")
    (d / "vocab.t.txt").write_text("\n".join(VOCAB) + "\n")
    for name, data in (extra or {}).items():
        (d / name).write_bytes(data)
    return {"inputs": [str(d)], "min_doc_tokens": 1, "min_doc_words": 1}


def _corrupt_gzip(t: Path) -> dict:
    path = t / "docword.z.txt.gz"
    path.write_bytes(gzip.compress(b"2\n4\n6\n1 1 2\n")[:-12] + b"garbage!")
    (t / "vocab.z.txt").write_text("\n".join(VOCAB) + "\n")
    return {"inputs": [str(path)]}


def _jsonl(t: Path, lines: list[str]) -> dict:
    path = t / "docs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return {"inputs": [str(path)], "id_column": "id", "min_doc_tokens": 1, "min_doc_words": 1}


def _ratings(t: Path, text: str) -> dict:
    path = t / "ratings.csv"
    path.write_text(text)
    return {"inputs": [str(path)], "format": "ratings"}


def _renamed(path: str, name: str) -> str:
    return str(Path(path).rename(Path(path).with_name(name)))


@pytest.mark.parametrize("case", INGEST_CASES, ids=lambda c: c.id)
def test_ingest_bad_input(tmp_path, case):
    kwargs = case.setup(tmp_path)
    root = tmp_path / "run"
    with pytest.raises(case.error, match=case.match):
        ingest(root, kwargs.pop("inputs"), **kwargs)
    assert listing(root) == []


def _corpus(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    ingest(root, [str(write_uci(tmp_path, GOOD, VOCAB))], stopwords=None)
    return root


def _replace_shard(root: Path, table: pa.Table) -> None:
    pq.write_table(table, root / "corpus" / "part-00000.parquet")


def _shard(**columns) -> pa.Table:
    base = {
        "doc_id": pa.array(["1", "2"]),
        "word_ids": pa.array([[0, 1, 2], [1, 2, 3]], pa.list_(pa.int32())),
        "counts": pa.array([[2, 3, 1], [1, 4, 2]], pa.list_(pa.int32())),
    }
    base.update(columns)
    return pa.table({k: v for k, v in base.items() if v is not None})


COOCCUR_CASES = [
    Case("missing-column", lambda r: _replace_shard(r, _shard(counts=None)), CorpusSchemaError,
         r"part-00000\.parquet: missing column 'counts' \(expected list<int32>\)"),
    Case("wrong-type", lambda r: _replace_shard(r, _shard(counts=pa.array([[2, 3, 1], [1, 4, 2]], pa.list_(pa.float64())))),
         CorpusSchemaError, r"part-00000\.parquet: column 'counts' has type list<double>, expected list<int32>"),
    Case("duplicate-doc-id", lambda r: _replace_shard(r, _shard(doc_id=pa.array(["1", "1"]))), CorpusSchemaError,
         r"part-00000\.parquet: row 1: field 'doc_id' repeats '1' \(first at .*part-00000\.parquet row 0\)"),
    Case("word-id-beyond-vocab", lambda r: _replace_shard(r, _shard(word_ids=pa.array([[0, 1, 2], [1, 2, 9]], pa.list_(pa.int32())))),
         CorpusSchemaError, r"row 1 \(doc_id '2'\): field 'word_ids' has value 9; expected ids in \[0, 4\)"),
    Case("unsorted-word-ids", lambda r: _replace_shard(r, _shard(word_ids=pa.array([[0, 2, 1], [1, 2, 3]], pa.list_(pa.int32())))),
         CorpusSchemaError, r"row 0 \(doc_id '1'\): field 'word_ids' is not strictly increasing \(2 then 1\)"),
    Case("zero-count", lambda r: _replace_shard(r, _shard(counts=pa.array([[2, 0, 1], [1, 4, 2]], pa.list_(pa.int32())))),
         CorpusSchemaError, r"row 0 \(doc_id '1'\): field 'counts' has value 0; expected every count > 0"),
    Case("length-mismatch", lambda r: _replace_shard(r, _shard(counts=pa.array([[2, 3], [1, 4, 2]], pa.list_(pa.int32())))),
         CorpusSchemaError, r"row 0 \(doc_id '1'\): field 'counts' has 2 entries but 'word_ids' has 3"),
    Case("not-parquet", lambda r: (r / "corpus" / "part-00000.parquet").write_bytes(b"not parquet at all"),
         CorpusSchemaError, r"cannot read the shard as Parquet"),
    Case("no-vocabulary", lambda r: (r / "corpus" / "vocab.parquet").unlink(), StoreError,
         r"vocab\.parquet: vocabulary table does not exist; run `jsmf ingest` first"),
    Case("no-corpus", lambda r: __import__("shutil").rmtree(r / "corpus"), StoreError,
         r"corpus/vocab\.parquet: vocabulary table does not exist"),
]


@pytest.mark.parametrize("case", COOCCUR_CASES, ids=lambda c: c.id)
def test_cooccur_bad_input(tmp_path, case):
    root = _corpus(tmp_path)
    case.setup(root)
    before = listing(root)
    with pytest.raises(case.error, match=case.match):
        cooccur(root)
    assert listing(root) == before


def test_cooccur_bad_tile_size(tmp_path, monkeypatch):
    root = _corpus(tmp_path)
    with pytest.raises(InvalidParameterError, match=r"'tile_size' parameter of cooccur .* Got 0 instead"):
        cooccur(root, tile_size=0)
    # a tile size that cuts C into more tiles than a graph should hold (a typo: 3 for 3000) is refused up front,
    # nothing written; the bound made small enough for this corpus's few words
    monkeypatch.setattr("jsmf_dask.pipeline.cooccur.MAX_TILES", 5)
    before = listing(root)
    with pytest.raises(InvalidParameterError, match=r"'tile_size' parameter of cooccur \(1\) cuts C of \d+ words "
                                                    r"into \d+ upper-triangular tiles, a task each, above 5: pass a "
                                                    r"larger one \(the default is 2048\), or --rank"):
        cooccur(root, tile_size=1)
    assert listing(root) == before
    cooccur(root, tile_size=2)  # 3 tiles of at most 2 of its words: within the bound


def test_cooccur_unknown_weighting(tmp_path, capsys):
    """An unknown weighting: the Python API names the choices and writes nothing; the command line refuses it in
    its parser (exit 2)."""
    root = _corpus(tmp_path)
    before = listing(root)
    with pytest.raises(InvalidParameterError, match=r"'weighting' parameter of cooccur must be a str among "
                                                    r"\{'documents', 'tokens'\}\. Got 'words' instead"):
        cooccur(root, weighting="words")
    with pytest.raises(SystemExit) as exit_info:
        main(["cooccur", str(root), "--weighting", "words"])
    assert exit_info.value.code == 2 and "invalid choice: 'words'" in capsys.readouterr().err
    assert listing(root) == before


def test_cli_reports_error_and_exit_status(tmp_path, capsys):
    docword = uci(tmp_path, header=(2, 4, 7))[0]
    status = main(["ingest", str(tmp_path / "run"), docword, "--scheduler", "synchronous", "--quiet"])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("jsmf: error: ") and "header NNZ=7" in err
    assert listing(tmp_path / "run") == []
    with pytest.raises(SystemExit) as exit_info:  # the parameter table's range, checked as the flag is parsed
        main(["ingest", str(tmp_path / "run"), docword, "--vocab-size", "0", "--scheduler", "synchronous"])
    assert exit_info.value.code == 2 and "argument --vocab-size: expected an int >= 1, got '0'" in \
        capsys.readouterr().err
    assert main(["cooccur", str(tmp_path / "nothing"), "--scheduler", "synchronous"]) == 1
    assert "nothing: no such run root" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["cooccur", str(tmp_path / "empty"), "--scheduler", "synchronous"]) == 1
    assert "vocabulary table does not exist" in capsys.readouterr().err


# ---------------------------------------------------------------- every later stage, through the CLI


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A root with a corpus, C and two models (k3-ap, k3-none)."""
    import dask

    from jsmf_dask import fit, synth

    root = tmp_path_factory.mktemp("fitted")
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        synth(root, n_docs=2000, n_words=80, n_topics=3, doc_length=40, seed=4)
        cooccur(root)
        fit(root, n_topics=3, iterations=5, min_anchor_df=0)
        fit(root, n_topics=3, rectifier="dc", min_anchor_df=0)
    return root


def _config(tmp: Path, text: str) -> str:
    path = tmp / "bad.toml"
    path.write_text(text)
    return str(path)


CLI_CASES = [
    ("fit-k-too-large", lambda r, t: ["fit", r, "--topics", "80"], r"in the range \[2, 79\] for a vocabulary of 80"),
    ("fit-anchor-floor", lambda r, t: ["fit", r, "--topics", "3", "--min-anchor-df", "100000", "--name", "new"],
     r"only \d+ words occur in at least --min-anchor-df 100000 documents"),
    ("fit-existing-model", lambda r, t: ["fit", r, "--topics", "3", "--min-anchor-df", "0"],
     r"k3-ap already exists; pass --overwrite"),
    ("fit-no-root", lambda r, t: ["fit", str(t / "empty"), "--topics", "3"], r"empty: no such run root; .jsmf ingest"),
    ("fit-anchor-words-too-few", lambda r, t: ["fit", r, "--topics", "3", "--anchor-words", "3", "--name", "new"],
     r"--anchor-words must be above --topics 3 \(the block holds the 3 anchors"),
    ("fit-anchor-words-dc", lambda r, t: ["fit", r, "--topics", "3", "--anchor-words", "40", "--rectifier", "dc",
                                          "--name", "new"],
     r"--anchor-words \(40\) cannot be used: --rectifier dc was asked for \(it needs AP\)\. Leave it unset"),
    ("refine-existing-output", lambda r, t: ["refine", r, "--model", "k3-ap", "--name", "k3-dc"],
     r"k3-dc already exists; pass --overwrite"),
    ("evaluate-unknown-model", lambda r, t: ["evaluate", r, "--model", "nope"], r"nope: no such model; fitted models"),
    ("report-unknown-model", lambda r, t: ["report", r, "--model", "nope"], r"no model named 'nope'"),
    ("infer-unknown-model", lambda r, t: ["infer", r, "--model", "nope"], r"nope: no such model"),
    ("infer-ambiguous-model", lambda r, t: ["infer", r], r"choose a model with --model; fitted models: \['k3-ap', 'k3-dc'\]"),
    ("compare-method", lambda r, t: ["compare", r, "--topics", "3", "--methods", "lda"],
     r"--methods must be a non-empty list"),
    ("compare-topics", lambda r, t: ["compare", r, "--topics", "1"], r"--topics must be"),
    ("run-no-config", lambda r, t: ["run", str(t / "none.toml")], r"none\.toml: no such config file"),
    ("run-unknown-key", lambda r, t: ["run", _config(t, f'root = "{r}"\n[cooccur]\ntile = 3\n')],
     r"bad\.toml: \[cooccur\]: unknown key 'tile'"),
    ("run-wrong-type", lambda r, t: ["run", _config(t, f'root = "{r}"\n[[fit]]\ntopics = "3"\n')],
     r"bad\.toml: \[\[fit\]\] #1: key 'topics' must be an integer; got '3'"),
    ("run-bad-toml", lambda r, t: ["run", _config(t, "root = [\n")], r"bad\.toml: not valid TOML"),
    ("cluster-address", lambda r, t: ["evaluate", r, "--scheduler", "nosuchproto://host:1"],
     r"cannot reach the Dask scheduler at 'nosuchproto://host:1'"),
    ("update-nothing-new", lambda r, t: ["cooccur", r, "--update"], r"every shard is already counted"),
    ("cooccur-rank-too-large", lambda r, t: ["cooccur", r, "--rank", "80", "--overwrite"],
     r"--rank must be below the 80 words of the vocabulary\. Got 80 instead"),
    ("cooccur-rank-update", lambda r, t: ["cooccur", r, "--rank", "3", "--update"],
     r"a compressed store \(rank\) cannot be updated: rebuild it with --overwrite"),
    ("update-and-overwrite", lambda r, t: ["cooccur", r, "--update", "--overwrite"], r"pass one of them"),
    ("append-vocab-size", lambda r, t: ["ingest", r, str(t), "--append", "--vocab-size", "5"],
     r"vocab_size applies to a new corpus"),
    ("refine-unknown-model", lambda r, t: ["refine", r, "--model", "nope"], r"model\.zarr/nope: no such model"),
    ("refine-existing-output", lambda r, t: ["refine", r, "--model", "k3-ap", "--name", "k3-dc"],
     r"k3-dc already exists; pass --overwrite"),
    ("evaluate-heldout-seen", lambda r, t: ["evaluate", r, "--heldout", "0.1"],
     r"model 'k3-ap' was trained with held-out fraction 0\.0, so it saw some of the documents held out at 0\.1"),
    ("warm-start-unknown", lambda r, t: ["fit", r, "--topics", "3", "--name", "x", "--warm-start", "nope"],
     r"nope: no such model"),
    ("warm-start-other-k", lambda r, t: ["fit", r, "--topics", "4", "--name", "x", "--warm-start", "k3-ap",
                                         "--min-anchor-df", "0"], r"--warm-start k3-ap has no eigenvectors of shape"),
]


@pytest.mark.parametrize("make_args,match", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input_exits_1_and_changes_nothing(fitted, tmp_path, capsys, monkeypatch, make_args, match):
    import re

    from jsmf_dask import cluster

    started = []
    real_start = cluster._LocalClusterOnDemand.start
    monkeypatch.setattr(cluster._LocalClusterOnDemand, "start", lambda self: started.append(1) or real_start(self))
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    args = make_args(str(fitted), tmp_path)  # on the embedded default: a LocalCluster, started on demand
    before, before_tmp = listing(fitted), listing(tmp_path)
    assert main([*args, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("jsmf: error: ") and re.search(match, err), err
    assert listing(fitted) == before and listing(tmp_path) == before_tmp
    # refused before any cluster starts (the checks read metadata, not data)
    assert not started


@pytest.mark.parametrize("args,match", [
    (["refine", "R", "--model", "m", "--sweeps", "0"], r"argument --sweeps: expected 'auto' or an int >= 1, got '0'"),
    (["refine", "R", "--model", "m", "--alpha", "-0.5"], r"argument --alpha: expected 'auto' or a float > 0, got '-0.5'"),
    (["refine", "R", "--model", "m", "--alpha", "often"], r"argument --alpha: expected 'auto' or a float > 0, got 'often'"),
    (["refine", "R", "--model", "m", "--eta", "0"], r"argument --eta: expected 'auto', a float or a list of floats > 0, got '0'"),
    (["refine", "R", "--model", "m", "--eta", "0.01,0.01"],
     r"got '0\.01,0\.01' \(a value repeated: candidates are distinct\)"),
    # fit's options are checked against the parameter table as they are parsed
    (["fit", "R", "--topics", "1"], r"argument --topics: expected an int >= 2, got '1'"),
    (["fit", "R", "--topics", "3", "--iterations", "0"], r"argument --iterations: expected an int >= 1, got '0'"),
    (["fit", "R", "--topics", "3", "--tol", "-1"], r"argument --tol: expected a float > 0, got '-1'"),
    (["fit", "R", "--topics", "3", "--eig-tol", "nan"], r"argument --eig-tol: expected a float > 0, got 'nan'"),
    (["refine", "R", "--model", "m", "--heldout", "0.7"], r"argument --heldout: expected a fraction in \(0, 0\.5\]"),
    (["cooccur", "R", "--heldout", "0"], r"argument --heldout: expected a float in \(0, 0\.5\], got '0'"),
    (["evaluate", "R", "--heldout", "x"], r"argument --heldout: expected a fraction"),
    (["refine", "R"], r"the following arguments are required: --model"),
])
def test_cli_refuses_bad_flags_before_anything_runs(tmp_path, capsys, args, match):
    import re

    with pytest.raises(SystemExit) as exit_info:
        main([a.replace("R", str(tmp_path)) if a == "R" else a for a in args])
    assert exit_info.value.code == 2
    assert re.search(match, capsys.readouterr().err)
    assert listing(tmp_path) == []


@pytest.mark.filterwarnings("ignore:1 of 3 topics have almost no weight in A:UserWarning")  # 5 cycles, no floor
def test_cli_fit_takes_the_low_rank_path_where_the_workers_are_too_small_and_decides_before_starting(
        tmp_path, capsys, monkeypatch):
    """`jsmf fit` with the default rectifier on workers too small for the in-task AP: ENN + LAW (k<K>-enn),
    the reason printed; the choice is made from the LocalCluster's memory before it starts, so an existing
    k<K>-enn is refused without starting it."""
    import dask

    import jsmf_dask.pipeline.fit_plan as fit_module
    from jsmf_dask import cluster, synth

    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        synth(tmp_path, n_docs=600, n_words=60, n_topics=3, doc_length=40, seed=4)
        cooccur(tmp_path)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    monkeypatch.setattr(fit_module, "in_task_memory", lambda n: 10 * 2**30)  # more than 1 GiB workers have
    args = ["fit", str(tmp_path), "--topics", "3", "--min-anchor-df", "0", "--iterations", "5", "--workers", "1",
            "--memory-limit", "1GiB"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert re.search(r"model k3-enn: 3 topics, rectifier enn, \d+ iterations, low-rank path \(the in-task path "
                     r"needs about 10\.00 GiB .* each worker of the LocalCluster has 1\.00 GiB: too little, so ENN",
                     out), out
    assert (tmp_path / "model.zarr" / "k3-enn").is_dir() and not (tmp_path / "model.zarr" / "k3-ap").exists()
    started = []
    real_start = cluster._LocalClusterOnDemand.start
    monkeypatch.setattr(cluster._LocalClusterOnDemand, "start", lambda self: started.append(1) or real_start(self))
    before = listing(tmp_path)
    assert main([*args, "--quiet"]) == 1
    assert "k3-enn already exists; pass --overwrite" in capsys.readouterr().err
    assert not started and listing(tmp_path) == before
