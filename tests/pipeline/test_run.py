"""`jsmf run CONFIG.toml`: every stage from one config, resumable, and the config checked up front."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from jsmf_dask.cli import main
from jsmf_dask.io.model_store import open_model
from jsmf_dask.pipeline.run import run
from jsmf_dask.pipeline.run_config import ConfigError, load_run_config
from tests.conftest import REUTERS_DOCWORD, REUTERS_VOCAB, listing

CONFIG = """
root = "run"

[ingest]
inputs = ["docword.reuters395.txt.gz"]
vocab_size = 400
row_group_size = 100

[cooccur]
tile_size = 128

[[fit]]
topics = 5
iterations = {iterations}

[evaluate]
[report]
[infer]
model = "k5-ap"
"""

ALL = ["ingest", "cooccur", "fit-k5-ap", "evaluate", "report", "infer"]


def _setup(tmp_path: Path, iterations: int = 20) -> Path:
    shutil.copy(REUTERS_DOCWORD, tmp_path)
    shutil.copy(REUTERS_VOCAB, tmp_path)
    config = tmp_path / "run.toml"
    config.write_text(CONFIG.format(iterations=iterations))
    return config


def _status(outcomes) -> dict[str, str]:
    return {o.stage: o.status for o in outcomes}


def test_rerun_skips_unchanged_stages_and_redoes_changed_ones(tmp_path):
    config = _setup(tmp_path)
    assert _status(run(config)) == dict.fromkeys(ALL, "ran")
    assert (tmp_path / "run" / "report" / "report.html").exists()
    B = open_model(str(tmp_path / "run"), "k5-ap").arrays["B"]
    assert _status(run(config)) == dict.fromkeys(ALL, "skipped")
    # a changed fit parameter redoes that fit and what depends on it, not ingest or cooccur
    config.write_text(CONFIG.format(iterations=25))
    assert _status(run(config)) == {"ingest": "skipped", "cooccur": "skipped", "fit-k5-ap": "ran",
                                    "evaluate": "ran", "report": "ran", "infer": "ran"}
    B25 = open_model(str(tmp_path / "run"), "k5-ap").arrays["B"]
    assert open_model(str(tmp_path / "run"), "k5-ap").attrs["n_iter"] == 25
    assert np.abs(B25 - B).max() > 1e-12  # the refit really ran with the new parameter
    # changed input contents (here the vocabulary beside the docword file) redo everything
    vocab = tmp_path / "vocab.reuters395.txt"
    words = vocab.read_text().splitlines()
    vocab.write_text("\n".join(["renamedword"] + words[1:]) + "\n")
    assert _status(run(config)) == dict.fromkeys(ALL, "ran")
    # the same counts under a renamed (rare, not kept) word: the same model again
    np.testing.assert_allclose(open_model(str(tmp_path / "run"), "k5-ap").arrays["B"], B25, rtol=0, atol=1e-12)
    assert _status(run(config, force=True)) == dict.fromkeys(ALL, "ran")
    np.testing.assert_allclose(open_model(str(tmp_path / "run"), "k5-ap").arrays["B"], B25, rtol=0, atol=1e-12)


def test_a_fit_refine_follows_is_fitted_on_the_anchor_words_and_a_plain_fit_on_every_word(tmp_path, monkeypatch):
    from jsmf_dask import parameters

    monkeypatch.setattr(parameters, "AUTO_ANCHOR_WORDS_MIN", 100)  # below the 400 words (1000 by default)
    config = _setup(tmp_path)
    config.write_text(CONFIG.format(iterations=20).replace("[evaluate]", "[[fit]]\ntopics = 4\niterations = 5\n\n[[refine]]\n"
                                                           "model = \"k5-ap\"\nsweeps = 2\n\n[evaluate]"))
    run(config)
    refined_source, plain = open_model(str(tmp_path / "run"), "k5-ap"), open_model(str(tmp_path / "run"), "k4-ap")
    assert refined_source.attrs["anchor_words"]["n"] == 100 == refined_source.arrays["anchor_words"].size
    assert refined_source.attrs["n_iter"] == 20  # its own iterations kept
    assert "anchor_words" not in plain.attrs and plain.attrs["params"]["anchor_words"] is None
    assert plain.attrs["n_iter"] == 5


def test_refine_stage_is_resumable_and_follows_its_source(tmp_path):
    config = _setup(tmp_path)
    config.write_text(CONFIG.format(iterations=20).replace("[evaluate]", "[[refine]]\nmodel = \"k5-ap\"\nsweeps = 2\n\n[evaluate]")
                      .replace("[cooccur]", "[cooccur]\nheldout = 0.2"))
    status = _status(run(config))
    assert status["refine-k5-ap-refined"] == "ran"
    m = open_model(str(tmp_path / "run"), "k5-ap-refined")
    assert m.attrs["n_iter"] == 2 and m.attrs["params"]["source"] == "k5-ap" and m.attrs["heldout_fraction"] == 0.2
    assert set(_status(run(config)).values()) == {"skipped"}
    # a changed source model redoes the refinement and what reads it
    config.write_text(config.read_text().replace("iterations = 20", "iterations = 22"))
    status = _status(run(config))
    assert status["fit-k5-ap"] == status["refine-k5-ap-refined"] == status["evaluate"] == "ran"
    assert status["ingest"] == status["cooccur"] == "skipped"
    # a changed refine parameter redoes only the refinement and its readers
    config.write_text(config.read_text().replace("sweeps = 2", "sweeps = 3"))
    status = _status(run(config))
    assert status["refine-k5-ap-refined"] == "ran" and status["fit-k5-ap"] == "skipped"
    assert open_model(str(tmp_path / "run"), "k5-ap-refined").attrs["n_iter"] == 3
    with pytest.raises(ConfigError, match=r"\[\[refine\]\] #1: missing required key 'model'"):
        bad = tmp_path / "bad.toml"
        bad.write_text('root = "run"\n[[refine]]\nsweeps = 2\n')
        load_run_config(bad)
    # candidate etas as a TOML list and drawn sweeps reach refine as the keyword arguments would
    good = tmp_path / "lists.toml"
    good.write_text('root = "run"\n[[refine]]\nmodel = "k5-ap"\neta = [0.01, 0.05]\ndrawn_sweeps = "auto"\n')
    (table,) = load_run_config(good).stages["refine"]
    assert table["eta"] == [0.01, 0.05] and table["drawn_sweeps"] == "auto"


def test_fit_and_refine_stages_report_their_cycles_and_sweeps(tmp_path, capsys):
    """A run's fit and refine stages report progress as `jsmf fit` and `jsmf refine` do (every AP cycle, every
    sweep, the refit's too), not dask's 0%/100% bar of the one task; `jsmf run` shows them unless --quiet."""
    config = _setup(tmp_path)
    config.write_text(CONFIG.format(iterations=6).replace("[evaluate]", "[[refine]]\nmodel = \"k5-ap\"\nsweeps = 2"
                                                          "\nrefit = \"always\"\n\n[evaluate]")
                      .replace("[cooccur]", "[cooccur]\nheldout = 0.2\nvalidation = 0.1"))
    cycles, sweeps = [], []
    outcomes = run(config, on_cycle=cycles.append, on_sweep=sweeps.append)
    assert [c.cycle for c in cycles] == list(range(1, 7)) and {c.of for c in cycles} == {6}
    refined = open_model(str(tmp_path / "run"), "k5-ap-refined")
    chosen = refined.attrs["refit"]["sweeps"]
    assert [s.phase for s in sweeps] == ["refine"] * refined.attrs["n_iter"] + ["refit"] * chosen
    line = next(o for o in outcomes if o.stage == "refine-k5-ap-refined").lines[0]
    assert line.endswith(f"by {refined.attrs['n_iter']} sweep(s) of cvb0, then {chosen} more with the validation "
                         "documents in training (refit)")
    capsys.readouterr()
    assert main(["run", str(config), "--scheduler", "synchronous", "--force"]) == 0
    err = capsys.readouterr().err
    assert "fit: AP cycle 6/6" in err and "refine sweep 1/2:" in err and "refit sweep 1/" in err
    assert main(["run", str(config), "--scheduler", "synchronous", "--force", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "AP cycle" not in err and "sweep" not in err


def test_a_deleted_output_is_redone(tmp_path):
    config = _setup(tmp_path)
    run(config)
    shutil.rmtree(tmp_path / "run" / "doc_topics" / "k5-ap")
    assert _status(run(config))["infer"] == "ran"


def test_driver_killed_mid_run_resumes_and_matches(tmp_path):
    config = _setup(tmp_path)
    reference = tmp_path / "reference"
    reference.mkdir()
    ref_config = _setup(reference)
    run(ref_config)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]))
    proc = subprocess.Popen([sys.executable, "-m", "jsmf_dask.cli", "run", str(config), "--scheduler", "synchronous",
                             "--quiet"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        models = tmp_path / "run" / "model.zarr"
        while not list(models.glob(".k5-ap.tmp-*")):  # ingest and cooccur committed, the fit staging its model
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended before it could be killed"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)  # mid-fit: no chance to clean up
    finally:
        proc.wait(timeout=30)
    # it was interrupted mid-fit: C committed, the model not
    assert (tmp_path / "run" / "_run" / "cooccur.json").exists()
    assert not (models / "k5-ap").exists() and list(models.glob(".k5-ap.tmp-*"))
    outcomes = _status(run(config))
    assert outcomes["ingest"] == "skipped" and outcomes["cooccur"] == "skipped"
    a = open_model(str(tmp_path / "run"), "k5-ap")
    b = open_model(str(reference / "run"), "k5-ap")
    np.testing.assert_allclose(a.arrays["B"], b.arrays["B"], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(a.arrays["anchors"], b.arrays["anchors"])
    assert not [p for p in listing(tmp_path / "run") if ".tmp" in p]  # no staged leftovers visible as outputs


BAD_CONFIGS = [
    ("unknown-top", 'root = "r"\nrot = 1\n[cooccur]\n', "unknown key 'rot'"),
    ("missing-root", "[cooccur]\n", "missing required key 'root'"),
    ("root-type", "root = 3\n[cooccur]\n", "key 'root' must be a string; got 3"),
    ("workers", 'root = "r"\nworkers = 0\n[cooccur]\n', "key 'workers' must be >= 1"),
    ("no-stages", 'root = "r"\n', "no stage tables"),
    ("unknown-ingest", 'root = "r"\n[ingest]\ninputs = ["a"]\nvocab_sise = 5\n', "[ingest]: unknown key 'vocab_sise'"),
    ("inputs-missing", 'root = "r"\n[ingest]\nvocab_size = 5\n', "[ingest]: missing required key 'inputs'"),
    ("inputs-empty", 'root = "r"\n[ingest]\ninputs = []\n', "'inputs' must be a non-empty list of paths"),
    ("fit-topics-type", 'root = "r"\n[[fit]]\ntopics = "20"\n', "[[fit]] #1: key 'topics' must be an integer"),
    ("fit-bool-int", 'root = "r"\n[[fit]]\ntopics = true\n', "key 'topics' must be an integer; got True"),
    ("fit-missing", 'root = "r"\n[[fit]]\nrectifier = "ap"\n', "missing required key 'topics'"),
    ("codoc-type", 'root = "r"\n[cooccur]\ncodoc = "yes"\n', "key 'codoc' must be true or false"),
    ("stage-not-table", 'root = "r"\ncooccur = 3\n', "[cooccur]: must be a table"),
    ("toml", 'root = "r\n', "not valid TOML"),
]


@pytest.mark.parametrize("name,text,message", BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_names_the_key(tmp_path, name, text, message):
    config = tmp_path / "bad.toml"
    config.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_run_config(config)
    assert message in str(info.value) and str(config) in str(info.value)


def test_cli_run_and_bad_config_exit_status(tmp_path, capsys):
    config = _setup(tmp_path)
    assert main(["run", str(config), "--scheduler", "synchronous", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "[ingest] ran in" in out and "6 stage(s) ran, 0 up to date" in out
    assert main(["run", str(config), "--scheduler", "synchronous", "--quiet"]) == 0
    assert "0 stage(s) ran, 6 up to date" in capsys.readouterr().out
    before = listing(tmp_path)
    assert main(["run", str(tmp_path / "missing.toml")]) == 1
    assert "missing.toml: no such config file" in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text('root = "run"\n[[fit]]\ntopics = 1\n')
    assert main(["run", str(tmp_path / "bad.toml"), "--scheduler", "synchronous", "--quiet"]) == 1
    # checked with the config, before anything runs: the file, the table and the key
    assert "The 'topics' parameter of " in (err := capsys.readouterr().err) and "bad.toml: [[fit]] #1 must be an int" \
        in err
    (tmp_path / "bad.toml").write_text('root = "run"\n[[fit]]\ntopics = 5\nanchor_words = "many"\n')
    assert main(["run", str(tmp_path / "bad.toml"), "--scheduler", "synchronous", "--quiet"]) == 1
    assert "The 'anchor_words' parameter of " in (err := capsys.readouterr().err) and "must be 'auto' or an int" in err
    assert listing(tmp_path) == sorted(before + ["bad.toml"])  # nothing ran: nothing written


def test_more_topics_than_words_is_refused_before_cooccur(tmp_path, capsys):
    """K is checked against the vocabulary as soon as ingest has made it: C (at scale, the long stage) is never
    built for a fit that cannot run."""
    config = _setup(tmp_path)
    config.write_text(CONFIG.format(iterations=20).replace("topics = 5", "topics = 400"))
    assert main(["run", str(config), "--scheduler", "synchronous", "--quiet"]) == 1
    err = capsys.readouterr().err
    # in the config's words: the file, the table and the key that set K (not the library's 'n_topics' of fit)
    assert f"jsmf: error: {config}: [[fit]] key 'topics' must be an int in the range [2, 399] for a vocabulary of " \
        "400 words. Got 400 instead." in err
    assert (tmp_path / "run" / "corpus").exists() and not (tmp_path / "run" / "cooc.zarr").exists()


def test_a_runtime_error_names_the_config_s_keys(tmp_path, capsys):
    """An error found while a stage runs (not by the config's checks: it takes two keys together) is worded in the
    config's keys and table, not the library's parameters."""
    config = tmp_path / "run.toml"
    config.write_text('root = "run"\n[[refine]]\nmodel = "k5-ap"\nmethod = "vb"\ndrawn_sweeps = 2\n')
    assert main(["run", str(config), "--scheduler", "synchronous", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"jsmf: error: {config}: [[refine]] key 'drawn_sweeps' (2) draws CVB0's counts, and method is " \
        """'vb': pass method = "cvb0" or drawn_sweeps = 0""" in err
    assert not (tmp_path / "run" / "model.zarr").exists()
    # a single [refine] table (allowed beside [[refine]]) is named as the file names it
    config.write_text('root = "run"\n[refine]\nmodel = "k5-ap"\nmethod = "vb"\ndrawn_sweeps = 2\n')
    assert main(["run", str(config), "--scheduler", "synchronous", "--quiet"]) == 1
    assert f"jsmf: error: {config}: [refine] key 'drawn_sweeps' (2) draws" in capsys.readouterr().err


def test_shipped_configs_are_valid():
    configs = Path(__file__).parents[2] / "pipelines" / "configs"
    for path in sorted(configs.glob("*.toml")):
        cfg = load_run_config(path)
        assert cfg.stage("fit"), path


def test_nightly_append_config_runs_once_per_input(tmp_path):
    from tests.conftest import read_uci, write_uci
    from jsmf_dask import open_cooccurrence

    docs = read_uci(REUTERS_DOCWORD)
    vocab = REUTERS_VOCAB.read_text().splitlines()
    write_uci(tmp_path, docs[:250], vocab, name="day1")
    write_uci(tmp_path, docs[250:], vocab, name="day2")
    (tmp_path / "ids1.txt").write_text("\n".join(f"r{i}" for i in range(250)) + "\n")
    (tmp_path / "ids2.txt").write_text("\n".join(f"r{i}" for i in range(250, len(docs))) + "\n")
    first = tmp_path / "first.toml"
    first.write_text('root = "run"\n[ingest]\ninputs = ["docword.day1.txt"]\ndoc_ids = "ids1.txt"\nvocab_size = 400\n'
                     '[cooccur]\n[[fit]]\ntopics = 5\niterations = 20\n')
    nightly = tmp_path / "nightly.toml"
    nightly.write_text('root = "run"\n[ingest]\ninputs = ["docword.day2.txt"]\ndoc_ids = "ids2.txt"\nappend = true\n'
                       '[cooccur]\nupdate = true\n[[fit]]\ntopics = 5\niterations = 20\nname = "k5-ap"\n'
                       'warm_start = "k5-ap"\n')
    run(first)
    n_first = open_cooccurrence(f"{tmp_path}/run/cooc.zarr").attrs["n_docs"]
    assert _status(run(nightly)) == {"ingest": "ran", "cooccur": "ran", "fit-k5-ap": "ran"}
    n_after = open_cooccurrence(f"{tmp_path}/run/cooc.zarr").attrs["n_docs"]
    assert n_after > n_first
    # the same night retried: nothing is appended twice
    assert _status(run(nightly)) == {"ingest": "skipped", "cooccur": "skipped", "fit-k5-ap": "skipped"}
    assert open_cooccurrence(f"{tmp_path}/run/cooc.zarr").attrs["n_docs"] == n_after


def test_run_refuses_to_replace_outputs_it_did_not_write(tmp_path, capsys, monkeypatch):
    """A root made by the four commands (or `make demo`): `jsmf run` on it stops before replacing any of their
    outputs and says how to; --force replaces them; an append or update stage extends its output as meant."""
    config = _setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", "run", "docword.reuters395.txt.gz", "--vocab-size", "400", "--quiet"]) == 0
    before = listing(tmp_path)
    assert main(["run", str(config), "--scheduler", "synchronous", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "corpus: exists, but no `jsmf run` of this root wrote it (stage 'ingest' has no record)" in err
    assert "--force" in err and listing(tmp_path) == before  # nothing replaced, nothing written
    assert main(["run", str(config), "--scheduler", "synchronous", "--quiet", "--force"]) == 0
    assert "6 stage(s) ran" in capsys.readouterr().out
