"""ingest: round trips, curation worked out by hand, every source format."""

from __future__ import annotations

import gzip
import json
import tarfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jsmf_dask import ingest
from jsmf_dask.exceptions import InputError, InvalidParameterError
from jsmf_dask.io.parquet import list_blocks, read_block, read_vocabulary
from tests.conftest import REUTERS_DOCWORD, read_uci, write_uci


def stored_docs(root) -> dict[str, dict[str, int]]:
    """The stored corpus as {doc_id: {word: count}}."""
    corpus = f"{root}/corpus"
    words = read_vocabulary(corpus).column("word").to_pylist()
    out = {}
    for block in list_blocks(corpus):
        t = read_block(block, len(words))
        for d, ids, cnt in zip(*(t.column(c).to_pylist() for c in ("doc_id", "word_ids", "counts")), strict=True):
            out[d] = {words[i]: c for i, c in zip(ids, cnt, strict=True)}
    return out


def test_uci_round_trip(tmp_path):
    report = ingest(
        tmp_path, [str(REUTERS_DOCWORD)], stopwords=None, min_doc_tokens=2, min_doc_words=1,
        docs_per_shard=150, row_group_size=40,
    )
    vocab = (REUTERS_DOCWORD.parent / "vocab.reuters395.txt").read_text().splitlines()
    expected = {str(d + 1): {vocab[w]: c for w, c in doc.items()} for d, doc in enumerate(read_uci(REUTERS_DOCWORD))}
    assert stored_docs(tmp_path) == expected
    assert (report.n_docs, report.n_words, report.n_shards) == (395, 4258, 3)
    assert report.n_tokens == 84010  # the README's token count
    v = read_vocabulary(f"{tmp_path}/corpus")
    assert v.column("tf").to_numpy().sum() == 84010
    assert [b.n_rows for b in list_blocks(f"{tmp_path}/corpus")][:4] == [40, 40, 40, 30]


def test_uci_doc_ids_file(tmp_path):
    docword = write_uci(tmp_path, [{0: 2, 1: 3}, {1: 1, 2: 4}], ["x", "y", "z"])
    ids = tmp_path / "ids.txt"
    ids.write_text("alpha\nbeta\n")
    ingest(tmp_path / "run", [str(docword)], doc_ids=str(ids), min_doc_words=1)
    assert set(stored_docs(tmp_path / "run")) == {"alpha", "beta"}


def test_text_curation_by_hand(tmp_path):
    # The four documents of tests/kernels/test_vocabulary_and_tokens.py, repeated so each passes
    # the document filters: words (a.., b.., c.., d..) -> tf-idf order c, d, a, b.
    docs = ["aaa aaa bbb ccc", "aaa bbb", "aaa ccc ccc ccc", "ddd bbb"]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": f"n{i}", "text": t}) + "\n" for i, t in enumerate(docs)))
    report = ingest(tmp_path / "run", [str(path)], id_column="id", stopwords=None, vocab_size=2,
                    min_doc_tokens=1, min_doc_words=1)
    vocab = read_vocabulary(f"{tmp_path}/run/corpus")
    assert vocab.column("word").to_pylist() == ["ccc", "ddd"]
    assert vocab.column("df").to_pylist() == [2, 1]
    assert vocab.column("tf").to_pylist() == [4, 1]
    assert stored_docs(tmp_path / "run") == {"n0": {"ccc": 1}, "n2": {"ccc": 3}, "n3": {"ddd": 1}}
    assert (report.words_removed_vocab_size, report.docs_removed_short, report.n_docs) == (2, 1, 3)


def test_document_filters_count_each_rule(tmp_path):
    vocab = [f"w{i}" for i in range(6)]
    docs = [
        {0: 1, 1: 1, 2: 1, 3: 1, 4: 1},  # 5 tokens, 5 words: kept
        {0: 2, 1: 2},                    # 4 tokens: too short
        {0: 3, 1: 3},                    # 6 tokens but 2 distinct words: too few words
        {5: 1},                          # 1 token: too short
        {2: 2, 3: 2, 4: 2},              # kept
    ]
    docword = write_uci(tmp_path, docs, vocab)
    with pytest.warns(UserWarning, match="1 vocabulary words occur only in documents removed"):
        report = ingest(tmp_path / "run", [str(docword)], stopwords=None)
    assert (report.docs_removed_short, report.docs_removed_few_words, report.n_docs) == (2, 1, 2)
    assert set(stored_docs(tmp_path / "run")) == {"1", "5"}
    # w5 survived the vocabulary cut but its only document was dropped
    assert report.words_unused_after_filter == 1


def test_ratings_expand_to_twice_the_stars(tmp_path):
    csv = tmp_path / "ratings.csv"
    csv.write_text(
        "userId,movieId,rating,timestamp\n"
        "u1,m1,4.5,0\nu1,m2,0.5,0\nu1,m3,3.0,0\n"
        "u2,m1,5,0\nu2,m2,2.5,0\nu2,m4,0.0,0\n"
        "u3,m3,1.0,0\nu3,m4,1.0,0\nu3,m1,1.5,0\n"
    )
    report = ingest(tmp_path / "run", [str(csv)], format="ratings", min_doc_words=1)
    assert stored_docs(tmp_path / "run") == {
        "u1": {"m1": 9, "m2": 1, "m3": 6},
        "u2": {"m1": 10, "m2": 5},
        "u3": {"m3": 2, "m4": 2, "m1": 3},
    }
    assert report.n_ignored_records == 1  # u2's 0-star rating is worth 0 copies


def test_ratings_unsorted_and_split_over_files(tmp_path):
    (tmp_path / "a.csv").write_text("user,item,rating\nb,x,1\na,y,2\n")
    (tmp_path / "b.csv").write_text("user,item,rating\na,x,2\nb,z,3\n")
    ingest(tmp_path / "run", [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")], format="ratings",
           min_doc_tokens=2, min_doc_words=1)
    assert stored_docs(tmp_path / "run") == {"a": {"y": 4, "x": 4}, "b": {"x": 2, "z": 6}}


def test_baskets(tmp_path):
    path = tmp_path / "playlists.txt"
    path.write_text("s1;s2;s3\ns2; s3 ;s3;\n\ns1;s4;s5;s1\n")
    report = ingest(tmp_path / "run", [str(path)], format="baskets", delimiter=";",
                    min_doc_tokens=2, min_doc_words=1)
    assert stored_docs(tmp_path / "run") == {
        "playlists.txt:1": {"s1": 1, "s2": 1, "s3": 1},
        "playlists.txt:2": {"s2": 1, "s3": 2},
        "playlists.txt:4": {"s1": 2, "s4": 1, "s5": 1},
    }
    assert report.n_empty_docs == 1


TEXTS = {"a.txt": "Neural networks learn weights. Networks!", "sub/b.txt": "Weights of the neural net learn.",
         "c.txt": "Gradient descent learns weights"}
EXPECTED = {
    "a.txt": {"neural": 1, "networks": 2, "learn": 1, "weights": 1},
    "sub/b.txt": {"weights": 1, "neural": 1, "net": 1, "learn": 1},
    "c.txt": {"gradient": 1, "descent": 1, "learns": 1, "weights": 1},
}


def _by_name(docs, key=lambda d: d):
    return {key(k): v for k, v in docs.items()}


@pytest.mark.parametrize("kind", ["directory", "tarball", "jsonl", "csv", "tsv", "parquet"])
def test_text_sources(tmp_path, kind):
    src = tmp_path / "src"
    if kind == "directory":
        for name, text in TEXTS.items():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_text(text)
        inputs = [str(src)]
    elif kind == "tarball":
        path = tmp_path / "docs.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            for name, text in TEXTS.items():
                f = tmp_path / "tmp.txt"
                f.write_text(text)
                tar.add(f, arcname=name)
        inputs = [str(path)]
    elif kind == "jsonl":
        path = tmp_path / "docs.jsonl.gz"
        with gzip.open(path, "wt") as f:
            for name, text in TEXTS.items():
                f.write(json.dumps({"name": name, "body": text}) + "\n")
        inputs = [str(path)]
    elif kind == "csv":
        path = tmp_path / "docs.csv"
        rows = ["name,body"] + [f'{n},"{t}"' for n, t in TEXTS.items()]
        path.write_text("\n".join(rows) + "\n")
        inputs = [str(path)]
    elif kind == "tsv":  # tab-separated by its name: the commas in the text stay text
        path = tmp_path / "docs.tsv.gz"
        with gzip.open(path, "wt") as f:
            f.write("name\tbody\n" + "".join(f"{n}\t{t.replace('.', ',')}\n" for n, t in TEXTS.items()))
        inputs = [str(path)]
    else:
        path = tmp_path / "docs.parquet"
        pq.write_table(pa.table({"name": list(TEXTS), "body": list(TEXTS.values())}), path, row_group_size=2)
        inputs = [str(path)]
    kwargs = {} if kind in ("directory", "tarball") else {"text_column": "body", "id_column": "name"}
    ingest(tmp_path / "run", inputs, min_doc_tokens=2, min_doc_words=1, **kwargs)
    # "the" and "of" are stop words; every other token has >= 3 letters.
    assert stored_docs(tmp_path / "run") == EXPECTED


def test_vocab_size_above_vocabulary_warns_and_keeps_all(tmp_path):
    docword = write_uci(tmp_path, [{0: 2, 1: 3, 2: 1}, {1: 1, 2: 4, 0: 1}], ["x", "y", "z"])
    with pytest.warns(UserWarning, match="exceeds the 3 eligible words"):
        report = ingest(tmp_path / "run", [str(docword)], vocab_size=10)
    assert report.n_words == 3


def test_existing_corpus_needs_overwrite(tmp_path):
    docword = write_uci(tmp_path, [{0: 2, 1: 3, 2: 1}], ["x", "y", "z"])
    ingest(tmp_path / "run", [str(docword)])
    from jsmf_dask.exceptions import StoreError

    with pytest.raises(StoreError, match="already exists; pass overwrite=True"):
        ingest(tmp_path / "run", [str(docword)])
    ingest(tmp_path / "run", [str(docword)], overwrite=True)
    assert np.array_equal(sorted(stored_docs(tmp_path / "run")), ["1"])


def test_other_encodings_are_read_when_named(tmp_path):
    path = tmp_path / "docs.jsonl"
    lines = ['{"id": "a", "text": "un café noir café crème café"}', '{"id": "b", "text": "crème brûlée crème café noir"}']
    path.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    ingest(tmp_path / "run", [str(path)], id_column="id", encoding="latin-1", stopwords=None, min_doc_tokens=1,
           min_doc_words=1)
    words = set(read_vocabulary(str(tmp_path / "run" / "corpus")).column("word").to_pylist())
    assert {"café", "crème", "brûlée", "noir"} <= words


def test_ratings_in_another_encoding_are_refused_unless_named(tmp_path):
    from jsmf_dask.exceptions import InputError

    path = tmp_path / "ratings.csv"
    path.write_bytes("user,item,rating\nu1,café,4\nu1,crème,5\nu2,café,3\nu2,crème,2\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"ratings\.csv: after line 1: not valid utf-8 text .* pass --encoding"):
        ingest(tmp_path / "bad", [str(path)], format="ratings", min_doc_words=1)
    ingest(tmp_path / "run", [str(path)], format="ratings", min_doc_words=1, encoding="latin-1")
    words = set(read_vocabulary(str(tmp_path / "run" / "corpus")).column("word").to_pylist())
    assert words == {"café", "crème"}


def test_a_directory_of_uci_files_is_read_as_uci(tmp_path):
    import shutil

    d = tmp_path / "uci"
    d.mkdir()
    shutil.copy(REUTERS_DOCWORD, d)
    shutil.copy(REUTERS_DOCWORD.parent / "vocab.reuters395.txt", d)
    from_dir = ingest(tmp_path / "a", [str(d)], vocab_size=500)
    from_file = ingest(tmp_path / "b", [str(REUTERS_DOCWORD)], vocab_size=500)
    assert from_dir.n_docs == from_file.n_docs == 395
    assert read_vocabulary(str(tmp_path / "a" / "corpus")).equals(read_vocabulary(str(tmp_path / "b" / "corpus")))


def test_item_labels_are_shown_in_topics(tmp_path):
    import dask

    from jsmf_dask import cooccur, fit, infer, refine
    from jsmf_dask.io.parquet import display_words

    rng = np.random.default_rng(0)
    lines = ["userId,movieId,rating"]
    for user in range(300):  # two tastes: movies 1-6 or movies 7-12
        first = 1 if user % 2 else 7
        for movie in rng.choice(np.arange(first, first + 6), size=4, replace=False):
            lines.append(f"u{user},{movie},{rng.integers(3, 6)}")
    (tmp_path / "ratings.csv").write_text("\n".join(lines) + "\n")
    titles = {m: f"Movie {m}, the sequel" for m in range(1, 13)}
    (tmp_path / "movies.csv").write_text("movieId,title,genres\n" + "".join(
        f'{m},"{t}",Drama\n' for m, t in titles.items()) + "99,Unrated film,Drama\n")
    report = ingest(tmp_path / "run", [str(tmp_path / "ratings.csv")], format="ratings",
                    labels=str(tmp_path / "movies.csv"))
    assert report.n_labelled == 12 and "labels: 12 of the 12 words have one" in report.lines()[-1]
    corpus = str(tmp_path / "run" / "corpus")
    words = read_vocabulary(corpus).column("word").to_pylist()
    assert display_words(corpus, words) == [titles[int(w)] for w in words]
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        cooccur(tmp_path / "run")
        model = fit(tmp_path / "run", n_topics=2, min_anchor_df=0)
        infer(tmp_path / "run")
        refined = refine(tmp_path / "run", model="k2-ap", sweeps=2)
    shown = (tmp_path / "run" / "topics" / "k2-ap.txt").read_text()
    assert "Movie 1, the sequel" in shown and "Movie 12, the sequel" in shown
    assert all(line[4:].count(" | ") >= 11 for line in shown.splitlines())  # titles kept apart: ≥ 12 a topic
    assert model.words == display_words(corpus, words)
    # doc_topics name their topic columns with the labels: "[anchor] top 3", as the topics file begins
    for where, fitted in ((tmp_path / "run" / "doc_topics" / "k2-ap", model),
                          (tmp_path / "run" / "model.zarr" / refined.name / "doc_topics", refined)):
        info = json.loads((where / "_infer.json").read_text(encoding="utf-8"))
        assert info["model"] == fitted.name and info["n_topics"] == 2
        assert info["topics"] == fitted.labels() == [line[4:] for line in fitted.lines(3)]
        assert all("the sequel" in label for label in info["topics"])
    assert info["topics"][0].count("Movie") == 3 and not info["topics"][0].startswith("[")  # refined: no anchors
    # an append keeps the labels
    (tmp_path / "more.csv").write_text("userId,movieId,rating\nv1,3,5\nv1,4,5\nv1,5,4\nv1,6,4\nv1,2,5\n")
    ingest(tmp_path / "run", [str(tmp_path / "more.csv")], format="ratings", append=True)
    assert display_words(corpus, read_vocabulary(corpus).column("word").to_pylist()) == [titles[int(w)] for w in words]


def test_baskets_and_ratings_keep_short_documents_by_default(tmp_path):
    """Short baskets (2+ distinct items) are kept by the baskets defaults and the report says which applied;
    the text defaults (5 tokens, 3 words) would have dropped most of them."""
    path = tmp_path / "baskets.txt"
    path.write_text("milk,bread\nmilk,bread,eggs\nbeer,chips\nbeer\nmilk,milk\neggs,bread,beer,chips,salsa,milk\n")
    report = ingest(tmp_path / "b", [str(path)], format="baskets")
    assert (report.min_doc_tokens, report.min_doc_words) == (2, 2)
    assert report.n_docs == 4  # 'beer' (1 token) and 'milk,milk' (1 distinct item) are the only ones dropped
    assert any("removed with fewer than 2 tokens (the baskets defaults)" in line for line in report.lines())
    strict = ingest(tmp_path / "t", [str(path)], format="baskets", min_doc_tokens=5, min_doc_words=3)
    assert strict.n_docs == 1 and not any("defaults" in line for line in strict.lines())
    ratings = tmp_path / "ratings.csv"
    ratings.write_text("user,item,rating\n1,a,5\n1,b,4\n2,a,3\n3,c,1\n3,a,2\n")
    r = ingest(tmp_path / "r", [str(ratings)], format="ratings")
    assert (r.min_doc_tokens, r.min_doc_words) == (2, 2) and r.n_docs == 2  # user 2 rated one item


POST = """From: someone@example.org (Some One)
Subject: Re: graphics cards
Organization: Example University
Lines: 9
NNTP-Posting-Host: news.example.org

In article <1993Apr5.1234@example.com>, other@example.com writes:
> Which cards render polygons fastest?
> Any benchmarks?

Polygon rendering benchmarks favour cards with wide memory buses.
|Older quoting style also counts.
--
Some One, Example University   phone 555 0100
"""
BODY = {"polygon": 1, "rendering": 1, "benchmarks": 1, "favour": 1, "cards": 1, "wide": 1, "memory": 1,
        "buses": 1}


def test_strip_email_keeps_exactly_the_body(tmp_path):
    """--strip email: the header block, the attribution and quoted lines, and the signature are gone; the
    stored tokens are exactly the body's (stop words removed as always). Recorded for `jsmf transform`."""
    from jsmf_dask.io.sources.tokenize import count_tokens, strip_email

    assert dict(count_tokens(strip_email(POST), stopwords={"with"})) == BODY
    src = tmp_path / "posts"
    src.mkdir()
    (src / "1.txt").write_text(POST)
    (src / "2.txt").write_text(POST.replace("Polygon rendering", "Texture mapping"))
    ingest(tmp_path / "run", [str(src)], min_doc_tokens=2, min_doc_words=1, strip="email")
    docs = stored_docs(tmp_path / "run")
    assert docs["1.txt"] == BODY
    assert set(docs["2.txt"]) == set(BODY) - {"polygon", "rendering"} | {"texture", "mapping"}
    manifest = json.loads((tmp_path / "run" / "corpus" / "_ingest.json").read_text())
    assert manifest["reading"]["strip"] == "email"
    ingest(tmp_path / "plain", [str(src)], min_doc_tokens=2, min_doc_words=1)  # without it, headers are words
    assert {"nntp", "posting", "organization", "writes"} <= set(stored_docs(tmp_path / "plain")["1.txt"])
    with pytest.raises(InvalidParameterError, match="'strip' parameter of ingest must be a str among"):
        ingest(tmp_path / "bad", [str(src)], strip="mail")


def test_headerless_tsv_with_numbered_columns(tmp_path):
    """--no-header: the first line is a document; --text-column 3 --id-column 1 name columns by position."""
    path = tmp_path / "docs.tsv"
    path.write_text("".join(f"{name}\t2024\t{text.replace('.', ',')}\n" for name, text in TEXTS.items()))
    ingest(tmp_path / "run", [str(path)], header=False, text_column="3", id_column="1", min_doc_tokens=2,
           min_doc_words=1)
    assert stored_docs(tmp_path / "run") == EXPECTED  # the first line too
    from jsmf_dask.cli import main

    assert main(["ingest", str(tmp_path / "cli"), str(path), "--no-header", "--text-column", "3", "--id-column",
                 "1", "--min-doc-tokens", "2", "--min-doc-words", "1", "--quiet"]) == 0
    assert stored_docs(tmp_path / "cli") == EXPECTED
    with pytest.raises(InputError, match=r"no column '4' \(columns: \['1', '2', '3'\]\)"):
        ingest(tmp_path / "bad", [str(path)], header=False, text_column="4")


def test_delimiter_of_a_text_table(tmp_path):
    """--delimiter: a semicolon-separated .csv whose text is full of commas reads as two columns; the separator is
    recorded for `jsmf transform`; a tab can be given as \\t; more than one character is refused."""
    path = tmp_path / "docs.csv"
    path.write_text("id;text\n" + "".join(f"{name};{text.replace('.', ',')}\n" for name, text in TEXTS.items()))
    ingest(tmp_path / "run", [str(path)], delimiter=";", id_column="id", min_doc_tokens=2, min_doc_words=1)
    assert stored_docs(tmp_path / "run") == EXPECTED
    manifest = json.loads((tmp_path / "run" / "corpus" / "_ingest.json").read_text())
    assert manifest["reading"]["delimiter"] == ";"
    with pytest.raises(InputError, match="not valid CSV|no column 'text'"):  # read with commas, it is not the table
        ingest(tmp_path / "comma", [str(path)], id_column="id", min_doc_tokens=2, min_doc_words=1)
    tabbed = tmp_path / "docs.txt.csv"
    tabbed.write_text(path.read_text().replace(";", "\t"))
    from jsmf_dask.cli import main

    assert main(["ingest", str(tmp_path / "cli"), str(tabbed), "--delimiter", "\\t", "--id-column", "id",
                 "--min-doc-tokens", "2",
                 "--min-doc-words", "1", "--quiet"]) == 0
    assert stored_docs(tmp_path / "cli") == EXPECTED
    with pytest.raises(InputError, match="delimiter must be one character"):
        ingest(tmp_path / "bad", [str(path)], delimiter=";;")


@pytest.mark.parametrize("n_docs, size", [(1, 500), (395, 500), (4000, 500), (8000, 1000), (20000, 2500),
                                          (80000, 10000), (300000, 10000)])
def test_row_groups_by_default_split_a_small_corpus_for_parallel_work(n_docs, size):
    """A row group is one task of every later stage: 10,000 documents, or fewer so that a corpus has 8 row groups,
    but never fewer than 500 documents each."""
    from jsmf_dask.io.parquet import row_group_size_for

    assert row_group_size_for(n_docs) == size


def test_ingest_splits_a_small_corpus_into_several_row_groups_unless_told(tmp_path):
    import pyarrow.parquet as pq

    from jsmf_dask import synth

    def groups(root):
        return [pq.ParquetFile(f).metadata.num_row_groups for f in sorted((root / "corpus").glob("part-*.parquet"))]

    docs = read_uci(REUTERS_DOCWORD)
    vocab = (REUTERS_DOCWORD.parent / "vocab.reuters395.txt").read_text().splitlines()
    many = write_uci(tmp_path, docs * 12, vocab, name="many")  # 4,740 documents
    ingest(tmp_path / "auto", [str(many)], vocab_size=500)
    assert groups(tmp_path / "auto") == [8]  # ceil(4740 / 8) = 593 documents a row group
    ingest(tmp_path / "told", [str(many)], vocab_size=500, row_group_size=10000)
    assert groups(tmp_path / "told") == [1]
    synth(tmp_path / "synth", n_docs=4000, n_words=100, n_topics=3, doc_length=20, seed=1)
    assert groups(tmp_path / "synth") == [8]
