"""The jsmf command end to end in-process: synth → cooccur → fit, and its error exits."""

from __future__ import annotations

import sys

import pytest

from jsmf_dask.cli import main
from tests.conftest import listing, write_uci

LOCAL = ["--scheduler", "synchronous", "--quiet"]


# five cycles without an anchor floor leave two rare anchors' rows of A empty (150 fill them): fit says so
@pytest.mark.filterwarnings("ignore:2 of 4 topics have almost no weight in A:UserWarning")
@pytest.mark.filterwarnings("ignore:1 of 4 topics have almost no weight in A:UserWarning")  # 5 cycles, no floor
def test_synth_cooccur_fit_print_topics(tmp_path, capsys):
    root = str(tmp_path / "run")
    assert main(["synth", root, "--docs", "800", "--vocab", "120", "--topics", "4", "--doc-length", "40"]) == 0
    assert "synthetic corpus: 800 documents, 120 words" in capsys.readouterr().out
    assert main(["cooccur", root, *LOCAL]) == 0
    assert "C: 120 x 120 from 800 documents" in capsys.readouterr().out
    assert main(["fit", root, "--topics", "4", "--iterations", "5", "--min-anchor-df", "0", *LOCAL]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("model k4-ap: 4 topics, rectifier ap, 5 iterations")
    assert len(out) == 5 and all("[w" in line for line in out[1:])
    assert (tmp_path / "run" / "topics" / "k4-ap.txt").read_text().splitlines() == out[1:]


def _small_root(tmp_path) -> str:
    """A synthetic corpus (300 documents, 50 words) and its C, through the CLI."""
    root = str(tmp_path / "run")
    main(["synth", root, "--docs", "300", "--vocab", "50", "--topics", "3", "--doc-length", "30"])
    main(["cooccur", root, *LOCAL])
    return root


def test_fit_errors_exit_1_and_write_nothing(tmp_path, capsys):
    root = _small_root(tmp_path)
    before = listing(tmp_path / "run")
    capsys.readouterr()
    assert main(["fit", root, "--topics", "50", *LOCAL]) == 1
    # the CLI names its flags, not the Python parameters
    assert "jsmf: error: --topics must be an int in the range [2, 49]" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:  # refused by the parser (the parameter table's range)
        main(["fit", root, "--topics", "1", *LOCAL])
    assert exit_info.value.code == 2
    assert listing(tmp_path / "run") == before
    assert main(["fit", str(tmp_path / "nowhere"), "--topics", "3", *LOCAL]) == 1
    assert f"{tmp_path / 'nowhere'}: no such run root" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["fit", str(tmp_path / "empty"), "--topics", "3", *LOCAL]) == 1
    assert "co-occurrence store does not exist" in capsys.readouterr().err


# ten cycles without an anchor floor leave two rare anchors' rows of A almost empty: fit says so
@pytest.mark.filterwarnings("ignore:2 of 3 topics have almost no weight in A:UserWarning")
def test_evaluate_report_infer_compare_commands(tmp_path, capsys):
    import json

    root = str(tmp_path / "run")
    main(["synth", root, "--docs", "800", "--vocab", "100", "--topics", "3", "--doc-length", "40"])
    main(["cooccur", root, *LOCAL])
    main(["fit", root, "--topics", "3", "--iterations", "10", "--min-anchor-df", "0", *LOCAL])
    capsys.readouterr()
    assert main(["evaluate", root, *LOCAL]) == 0
    out = capsys.readouterr().out
    assert "metrics written to" in out and "k3-ap" in out and "rectified_C" in out
    assert set(json.loads((tmp_path / "run" / "report" / "metrics.json").read_text())["models"]) == {"k3-ap"}
    assert main(["report", root, *LOCAL]) == 0
    assert capsys.readouterr().out.strip().endswith("report/report.html")
    assert main(["infer", root, *LOCAL]) == 0
    assert "topic compositions of 800 documents under model k3-ap" in capsys.readouterr().out
    import warnings

    # (50 cycles: after 5, AP at K = 2 on this toy corpus picks two anchors whose rectified co-occurrence is zero
    # or not by rounding, and says so in a warning)
    assert main(["compare", root, "--topics", "2,3", "--methods", "none,ap", "--iterations", "50", *LOCAL]) == 0
    out = capsys.readouterr().out
    assert "| none | 2 |" in out and "| ap | 3 |" in out and "compare.png" in out
    # the CLI prints a library warning on stderr, in its words: here a word seen only in a dropped document
    docword = write_uci(tmp_path, [{0: 3, 1: 3, 2: 2}, {0: 2, 1: 1, 2: 1}, {3: 1}], ["alpha", "beta", "gamma", "delta"])
    with warnings.catch_warnings():
        warnings.simplefilter("always", UserWarning)
        assert main(["ingest", str(tmp_path / "w"), str(docword), "--min-doc-tokens", "2", "--min-doc-words", "1",
                     *LOCAL]) == 0
    assert "jsmf: warning: 1 vocabulary words occur only in documents removed by the document filters" \
        in capsys.readouterr().err


def test_evaluate_report_infer_errors_exit_1(tmp_path, capsys):
    root = _small_root(tmp_path)
    before = listing(tmp_path / "run")
    capsys.readouterr()
    for command in (["evaluate", root], ["report", root], ["infer", root]):
        assert main([*command, *LOCAL]) == 1
        assert "no fitted models under model.zarr; run `jsmf fit` first" in capsys.readouterr().err
    assert main(["evaluate", root, "--model", "k9-ap", *LOCAL]) == 1
    assert "k9-ap: no such model" in capsys.readouterr().err
    assert main(["compare", root, "--topics", "3", "--methods", "ap,lda", *LOCAL]) == 1
    assert "--methods must be" in capsys.readouterr().err
    import pytest

    with pytest.raises(SystemExit) as exit_info:  # argparse: not a list of ints
        main(["compare", root, "--topics", "3,x", *LOCAL])
    assert exit_info.value.code == 2
    assert "expected comma-separated integers, got '3,x'" in capsys.readouterr().err
    assert listing(tmp_path / "run") == before


def test_help_describes_every_option_and_shows_a_valid_example_per_command():
    import argparse
    import shlex

    from jsmf_dask.cli import EXAMPLES, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(EXAMPLES)
    for name, command in sub.choices.items():
        undescribed = [a.dest for a in command._actions if not a.help and not isinstance(a, argparse._HelpAction)]
        assert undescribed == [], name
        groups = {g.title: {a.dest for a in g._group_actions} for g in command._action_groups}
        assert "overwrite" not in groups.get("cluster", set()), name
        assert " ".join(command.format_help().split()).endswith(f"example: {EXAMPLES[name]}")  # wrapped lines
        words = shlex.split(EXAMPLES[name])
        assert words[:2] == ["jsmf", name]
        assert parser.parse_args(words[1:]).command == name  # the example is a valid command line


@pytest.mark.parametrize("argv, status", [
    (["--help"], 0),
    (["fit", "--help"], 0),
    (["fit", "ROOT", "--topics", "5", "--bogus"], 2),
    (["fit", "ROOT", "--topics", "1"], 2),
    (["refine", "ROOT", "--model", "k5-ap", "--alpha", "-1"], 2),
    (["fit", "NOWHERE", "--topics", "5"], 1),
    (["ingest", "ROOT", "NOWHERE"], 1),
    (["run", "NOWHERE"], 1),
])
def test_help_and_argument_errors_load_no_numpy_dask_or_zarr(tmp_path, argv, status):
    """``jsmf --help``, a bad flag and a missing local path are answered before the heavy libraries load.

    Checked by the modules a fresh interpreter holds afterwards (not by a
    clock): numpy, dask, distributed, zarr, pyarrow and scipy must be absent.
    """
    import json
    import subprocess

    argv = [str(tmp_path) if a == "ROOT" else str(tmp_path / "nowhere") if a == "NOWHERE" else a for a in argv]
    code = (
        "import json, sys\n"
        "from jsmf_dask.cli import main\n"
        "try:\n"
        f"    status = main({argv!r})\n"
        "except SystemExit as exit:\n"
        "    status = exit.code\n"
        "heavy = ('numpy', 'dask', 'distributed', 'zarr', 'pyarrow', 'scipy')\n"
        "print(json.dumps({'status': status, 'loaded': [m for m in heavy if m in sys.modules]}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"status": status, "loaded": []}, out.stderr
    if status == 1:
        assert out.stderr.startswith("jsmf: error: ") and "nowhere" in out.stderr


def test_package_names_load_on_first_use():
    """Every name in ``jsmf_dask.__all__`` resolves (lazily) to the object its home module defines."""
    import importlib

    import jsmf_dask

    for name in jsmf_dask.__all__:
        if name != "__version__":
            home = importlib.import_module(jsmf_dask._HOMES[name])
            assert getattr(jsmf_dask, name) is getattr(home, name), name
    assert set(jsmf_dask._HOMES) == set(jsmf_dask.__all__) - {"__version__"}
    assert dir(jsmf_dask) == sorted(jsmf_dask.__all__)  # no `importlib` or `TYPE_CHECKING` offered
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        jsmf_dask.nope


def test_papercuts_verbose_after_the_command_its_own_usage_quiet_shutdown(tmp_path, capsys):
    """-v is accepted after the command; a bad option gets that command's usage; --quiet also silences
    distributed's warnings (the nanny's "still alive ... killing" at shutdown); runs/ is git-ignored."""
    import logging
    from pathlib import Path

    assert main(["fit", str(tmp_path), "--topics", "3", "-v"]) == 1  # parsed; the root has no C
    assert "co-occurrence store does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["fit", str(tmp_path), "--topics", "3", "--bogus"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: jsmf fit ") and "jsmf fit: error: unrecognized arguments: --bogus" in err
    main(["fit", str(tmp_path), "--topics", "3", "--quiet"])
    assert logging.getLogger("distributed").level == logging.ERROR
    main(["fit", str(tmp_path), "--topics", "3"])
    assert logging.getLogger("distributed").level == logging.WARNING
    assert "runs/" in (Path(__file__).resolve().parents[1] / ".gitignore").read_text().split()


def test_out_on_a_stage_command_says_where_its_root_goes(tmp_path, capsys):
    """`jsmf topics INPUT --out ROOT` carried over to a stage command (whose root is positional) is answered
    with where the root goes, not only "unrecognized arguments"; any other stray option gets no such hint."""
    for argv in (["ingest", "input.txt", "--out", str(tmp_path)], ["cooccur", "--out", str(tmp_path)],
                 ["refine", "--out=x", str(tmp_path), "--model", "m"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert f"jsmf {argv[0]}: error: unrecognized arguments: --out" in err
        assert f"the run root is the first argument of `jsmf {argv[0]}`: jsmf {argv[0]} ROOT" in err
        assert "--out ROOT is `jsmf topics`'s" in err
    with pytest.raises(SystemExit):
        main(["fit", str(tmp_path), "--topics", "3", "--bogus"])
    assert "first argument" not in capsys.readouterr().err


def test_the_executable_skips_only_the_interpreter_teardown(tmp_path):
    """``jsmf`` (``console_main``) leaves with ``os._exit`` after the command: its exit status, everything it
    printed (stdout a pipe, so block-buffered), and the exit handlers' work are all still there."""
    import subprocess
    import sys

    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('exit handler ran', file=sys.stderr))\n"
            "sys.argv = ['jsmf'] + sys.argv[1:]\n"
            "from jsmf_dask.cli import console_main\n"
            "console_main()\n")
    root = str(tmp_path / "run")
    ok = subprocess.run([sys.executable, "-c", code, "synth", root, "--docs", "50", "--vocab", "30", "--topics", "2"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok
    assert ok.stdout.startswith("synthetic corpus: 50 documents, 30 words,") and ok.stdout.endswith("truth.zarr\n")
    assert "exit handler ran" in ok.stderr
    bad = subprocess.run([sys.executable, "-c", code, "fit", str(tmp_path / "none"), "--topics", "3"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.startswith("jsmf: error:") and "exit handler ran" in bad.stderr


def test_evaluate_prints_each_perplexity_with_its_errors():
    from jsmf_dask.cli import _heldout_line

    best = {"perplexity": 1698.43, "perplexity_se": 30.81, "best_model": "a", "loglik_gap_to_best": 0.0,
            "loglik_gap_se": 0.0}
    other = {"perplexity": 1743.5, "perplexity_se": 34.2, "best_model": "a", "loglik_gap_to_best": 0.02621,
             "loglik_gap_se": 0.00604}
    assert _heldout_line(best) == "1698.4 ± 30.8   best"
    assert _heldout_line(other) == "1743.5 ± 34.2   gap 0.0262 ± 0.0060"
    assert _heldout_line({"perplexity": 80.1, "perplexity_se": None}) == "80.1"  # one model, one document
    assert _heldout_line({"perplexity": None, "notes": "saw them"}) == "n/a: saw them"


def test_topics_shows_item_labels(tmp_path, capsys):
    """`jsmf topics --labels`: ratings in, the refined topics out by film title, titles kept apart by ' | '."""
    import numpy as np

    rng = np.random.default_rng(0)
    rows = ["userId,movieId,rating"]
    for user in range(400):  # two tastes: movies 1-6 or movies 7-12
        first = 1 if user % 2 else 7
        rows += [f"u{user},{m},5" for m in rng.choice(np.arange(first, first + 6), size=4, replace=False)]
    (tmp_path / "ratings.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "movies.csv").write_text("movieId,title\n" + "".join(f'{m},"Movie {m}, The"\n' for m in range(1, 13)))
    argv = ["topics", str(tmp_path / "ratings.csv"), "--format", "ratings", "--topics", "2",
            "--out", str(tmp_path / "run"), "--labels", str(tmp_path / "movies.csv"), *LOCAL]
    assert main(argv) == 0
    topics = capsys.readouterr().out.splitlines()[1:3]
    for line in topics:  # each topic: twenty titles (the twelve films, then ties), one taste's six first
        titles = line[4:].split(" | ")
        assert all(t.startswith("Movie ") and t.endswith(", The") for t in titles)
        first_six = {int(t.split()[1].rstrip(",")) for t in titles[:6]}
        assert first_six in ({1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12})
    assert main([*argv[:-5], "--labels", str(tmp_path / "missing.csv"), "--force", *LOCAL]) == 1
    assert "missing.csv" in capsys.readouterr().err
