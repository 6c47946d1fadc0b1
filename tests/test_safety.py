"""Untrusted names and data: a name can never leave the run root, a word can never become markup.

Names: every command that takes a model name (and ``jsmf run`` configs) refuses ``../x``, ``a/b``, ``..``,
``.``, an empty name, a NUL and a newline before any work, and nothing beside or inside the root changes,
with or without ``--overwrite`` (compared by a listing with sizes and modification times). Every write and
removal goes through :func:`jsmf_dask.io.fs.check_under`, which is tested on its own, local and on an object
store. Data: hostile item labels reach ``report.html`` and pyLDAvis's page only as text (the pages are
parsed and no element or attribute may come from the data).
"""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import dask
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jsmf_dask import cooccur, fit, ingest
from jsmf_dask._validation import name_problem
from jsmf_dask.cli import main
from jsmf_dask.exceptions import InvalidParameterError, StoreError
from jsmf_dask.io.fs import check_under, join_under, remove, staged_output, write_file
from jsmf_dask.pipeline.refine import refine
from jsmf_dask.pipeline.run_config import ConfigError, load_run_config

BAD_NAMES = ["../x", "a/b", "..", ".", "", "a\x00b", "a\nb"]
HOSTILE = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "\"'><b>", "</td>"]


def snapshot(top: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``top`` with its size and modification time (ns)."""
    out = {}
    for here, dirs, files in os.walk(top):
        for name in dirs + files:
            p = os.path.join(here, name)
            st_ = os.lstat(p)
            out[os.path.relpath(p, top)] = (st_.st_size if name in files else 0, st_.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """``top/root`` with a corpus, C and model ``m``, and ``top/sentinel`` beside it holding a file."""
    from jsmf_dask import synth

    top = tmp_path_factory.mktemp("names")
    root = top / "root"
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        synth(root, n_docs=300, n_words=60, n_topics=3, doc_length=40, seed=1, row_group_size=300)
        cooccur(root)
        fit(root, n_topics=3, name="m", min_anchor_df=2)
    (top / "sentinel").mkdir()
    (top / "sentinel" / "keep.txt").write_text("precious")
    (root / "x").mkdir()  # what '..'-free names inside the root could hit
    return top, root


def _commands(root: Path, bad: str) -> list[tuple[list[str], str]]:
    """(argv, the flag the error must name) for every command that takes a name."""
    r = str(root)
    common = ["--scheduler", "synchronous", "--quiet"]
    return [
        (["fit", r, "--topics", "3", "--name", bad, *common], "--name"),
        (["fit", r, "--topics", "3", "--name", bad, "--overwrite", *common], "--name"),
        (["fit", r, "--topics", "3", "--warm-start", bad, *common], "--warm-start"),
        (["refine", r, "--model", "m", "--name", bad, "--overwrite", *common], "--name"),
        (["refine", r, "--model", bad, *common], "--model"),
        (["report", r, "--model", bad, *common], "--model"),
        (["report", r, "--baseline", bad, *common], "--baseline"),
        (["report", r, "--model", bad, "--ldavis", *common], "--model"),
        (["infer", r, "--model", bad, "--overwrite", *common], "--model"),
        (["evaluate", r, "--model", bad, *common], "--model"),
    ]


@pytest.mark.parametrize("bad", BAD_NAMES, ids=["dotdot-x", "a-slash-b", "dotdot", "dot", "empty", "nul", "newline"])
def test_every_command_refuses_a_bad_name_before_any_work(fitted, bad, capsys):
    top, root = fitted
    before = snapshot(top)
    for argv, flag in _commands(root, bad):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("jsmf: error: "), (argv, err)
        assert flag in err and "not a valid name" in err and "letters" in err, (argv, err)
        assert snapshot(top) == before, argv


@pytest.mark.parametrize("bad", BAD_NAMES, ids=["dotdot-x", "a-slash-b", "dotdot", "dot", "empty", "nul", "newline"])
@pytest.mark.parametrize("table,key", [("fit", "name"), ("fit", "warm_start"), ("refine", "name"),
                                       ("refine", "model"), ("report", "model"), ("infer", "model"),
                                       ("evaluate", "models")])
def test_run_configs_refuse_a_bad_name_naming_the_key(fitted, tmp_path, bad, table, key, capsys):
    top, root = fitted
    value = [bad] if key == "models" else bad
    body = {"fit": {"topics": 3}, "refine": {"model": "m"}}.get(table, {}) | {key: value}
    header = f"[[{table}]]" if table in ("fit", "refine") else f"[{table}]"
    lines = [f"{k} = {json.dumps(v)}" for k, v in body.items()]
    config = tmp_path / "run.toml"
    config.write_text(f'root = {json.dumps(str(root))}\n{header}\n' + "\n".join(lines) + "\n", encoding="utf-8")
    before = snapshot(top)
    with pytest.raises(ConfigError, match=rf"\[{{1,2}}{table}\]{{1,2}}.*key '{key}' is not a valid name"):
        load_run_config(config)
    assert main(["run", str(config), "--scheduler", "synchronous", "--quiet"]) == 1
    assert f"key '{key}' is not a valid name" in capsys.readouterr().err
    assert snapshot(top) == before


def test_the_python_api_refuses_bad_names_too(fitted):
    top, root = fitted
    before = snapshot(top)
    for bad in BAD_NAMES:
        with pytest.raises(InvalidParameterError, match="The 'name' parameter of fit is not a valid name"):
            fit(root, n_topics=3, name=bad, overwrite=True)
        with pytest.raises(InvalidParameterError, match="The 'name' parameter of refine is not a valid name"):
            refine(root, model="m", name=bad, overwrite=True)
    assert snapshot(top) == before


def test_good_names_still_work(fitted):
    top, root = fitted
    for name in ("k3-ap.v2_final+b", "3"):
        fit(root, n_topics=3, name=name, min_anchor_df=2)
        assert (root / "model.zarr" / name / "zarr.json").exists()
        assert (root / "topics" / f"{name}.txt").exists()


# ---------------------------------------------------------------- the one check under every write

@given(st.text(min_size=0, max_size=40))
@settings(max_examples=300, deadline=None)
def test_a_name_that_passes_the_rule_is_one_component_inside_the_root(text):
    if name_problem(text) is None:
        assert "/" not in text and "\\" not in text and text not in (".", "..") and not text.startswith(".")
        assert check_under("/r/root", join_under("/r/root", "model.zarr", text))
    else:
        with pytest.raises(StoreError, match="cannot name an output"):
            join_under("/r/root", "model.zarr", text)


@pytest.mark.parametrize("target", ["{root}/../sentinel", "{root}", "{root}/x/../../sentinel/keep.txt",
                                    "{top}/sentinel", "/"])
def test_writes_and_removals_outside_the_root_are_refused(fitted, target):
    top, root = fitted
    url = target.format(root=root, top=top)
    before = snapshot(top)
    with pytest.raises(StoreError, match="refusing to write or remove outside the run root"):
        remove(url, root=str(root))
    with pytest.raises(StoreError, match="outside the run root"):
        write_file(url, b"x", root=str(root))
    with pytest.raises(StoreError, match="outside the run root"):
        with staged_output(url, root=str(root), overwrite=True):
            pass
    assert snapshot(top) == before


def test_a_symbolic_link_out_of_the_root_is_outside_it(tmp_path):
    root = tmp_path / "root"
    (root / "model.zarr").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "keep.txt").write_text("x")
    (root / "model.zarr" / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(StoreError, match="outside the run root"):
        remove(str(root / "model.zarr" / "link"), root=str(root))
    assert (tmp_path / "elsewhere" / "keep.txt").exists()
    assert check_under(str(root), str(root / "model.zarr" / "real")) == str(root / "model.zarr" / "real")


def test_object_store_urls_are_checked_the_same_way():
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/bucket/keep/file", b"precious")
    root = "memory://bucket/run"
    for url in ("memory://bucket/run/../keep", "memory://bucket/keep", "memory://bucket/run",
                "file:///bucket/run/x", "memory://bucket/runner/x"):
        with pytest.raises(StoreError, match="outside the run root"):
            remove(url, root=root)
    write_file("memory://bucket/run/report/a.txt", b"ok", root=root)
    assert fs.cat("/bucket/run/report/a.txt") == b"ok"
    assert fs.cat("/bucket/keep/file") == b"precious"


# ---------------------------------------------------------------- data stays data in every page

class _Elements(HTMLParser):
    """The elements, attributes and text of a page, as a browser's parser sees them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def _parse(page: str) -> _Elements:
    parser = _Elements()
    parser.feed(page)
    parser.close()
    return parser


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory):
    """A basket corpus whose items include markup, fitted, refined and reported."""
    top = tmp_path_factory.mktemp("hostile")
    rng = np.random.default_rng(0)
    items = [f"item{i:02d}" for i in range(24)] + HOSTILE
    groups = [items[i::3] for i in range(3)]  # three "topics" of items, each with hostile ones in reach
    lines = []
    for _ in range(600):
        group = groups[rng.integers(3)]
        lines.append(",".join(rng.choice(group, size=6, replace=True)))
    path = top / "baskets.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    root = top / "root"
    with dask.config.set({"scheduler": "synchronous", "jsmf.progress": False}):
        ingest(root, [str(path)], format="baskets", min_doc_words=1, min_doc_tokens=2)
        cooccur(root)
        fit(root, n_topics=3, name="ap", min_anchor_df=1)
        fit(root, n_topics=3, rectifier="none", name="base", min_anchor_df=1)
        refine(root, model="ap", sweeps=2)
    return root


def test_hostile_labels_are_text_in_the_report(hostile_root, capsys):
    assert main(["report", str(hostile_root), "--model", "ap", "--scheduler", "synchronous", "--quiet"]) == 0
    capsys.readouterr()
    page = (hostile_root / "report" / "report.html").read_text(encoding="utf-8")
    parsed = _parse(page)
    allowed = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "table", "thead", "tbody", "tr",
               "th", "td", "span", "figure", "img", "figcaption"}
    assert {tag for tag, _ in parsed.tags} <= allowed
    assert not parsed.scripts
    for tag, attrs in parsed.tags:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name)
            assert name in ("lang", "charset", "class", "alt", "src"), (tag, name)
            if name == "src":
                assert value.startswith("data:image/png;base64,")
            if name == "class":
                assert value in ("text", "anchor", "note")
    shown = "".join(parsed.text)
    for word in HOSTILE:  # shown as typed
        assert word in shown, word
    assert page.count("<td") == page.count("</td>")  # '</td>' in the data closed no cell


def test_hostile_labels_stay_data_in_the_ldavis_page(hostile_root, capsys):
    pytest.importorskip("pyLDAvis")
    assert main(["report", str(hostile_root), "--model", "ap-refined", "--ldavis", "--scheduler", "synchronous",
                 "--quiet"]) == 0
    capsys.readouterr()
    page = (hostile_root / "report" / "ldavis-ap-refined.html").read_text(encoding="utf-8")
    parsed = _parse(page)
    assert {tag for tag, _ in parsed.tags} <= {"div", "script", "style", "html", "head", "body", "meta", "title"}
    for tag, attrs in parsed.tags:
        assert all(not name.startswith("on") for name, _ in attrs), tag
    data = [s for s in parsed.scripts if "new LDAvis(" in s]
    assert data, "no pyLDAvis data script"
    embedded = json.loads(re.search(r'new LDAvis\("#" \+ "ldavis_\w+", (\{.*?\})\);', data[0], re.S).group(1))
    terms = set(embedded["tinfo"]["Term"])
    assert set(HOSTILE) <= terms  # the same strings reach the view's JavaScript, which draws them as text


def test_figures_draw_dollar_signs_as_text():
    from jsmf_dask.render import figures

    png = figures.topic_topic_heatmaps({"model $\\frac{a}{b}$ $x^{": np.eye(3) / 3})  # invalid mathtext
    assert png.startswith(b"\x89PNG")


def test_a_relative_stopwords_file_in_a_config_is_read_from_the_configs_folder(tmp_path):
    (tmp_path / "conf").mkdir()
    config = tmp_path / "conf" / "run.toml"
    config.write_text('root = "r"\n[ingest]\ninputs = ["in.txt"]\nstopwords = "stop.txt"\n', encoding="utf-8")
    assert load_run_config(config).stage("ingest")["stopwords"] == str((tmp_path / "conf" / "stop.txt").resolve())
    config.write_text('root = "r"\n[ingest]\ninputs = ["in.txt"]\nstopwords = "english"\n', encoding="utf-8")
    assert load_run_config(config).stage("ingest")["stopwords"] == "english"
