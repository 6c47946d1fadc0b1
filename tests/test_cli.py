"""The jsmf command end to end in-process: synth → cooccur → fit, and its error exits."""

from __future__ import annotations

from jsmf_dask.cli import main
from tests.conftest import listing


def test_synth_cooccur_fit_print_topics(tmp_path, capsys):
    root = str(tmp_path / "run")
    local = ["--scheduler", "synchronous", "--quiet"]
    assert main(["synth", root, "--docs", "800", "--vocab", "120", "--topics", "4", "--doc-length", "40"]) == 0
    assert "synthetic corpus: 800 documents, 120 words" in capsys.readouterr().out
    assert main(["cooccur", root, *local]) == 0
    assert "C: 120 x 120 from 800 documents" in capsys.readouterr().out
    assert main(["fit", root, "--topics", "4", "--iterations", "5", "--min-anchor-df", "0", *local]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("model k4-ap: 4 topics, rectifier ap, 5 iterations")
    assert len(out) == 5 and all("[w" in line for line in out[1:])
    assert (tmp_path / "run" / "topics" / "k4-ap.txt").read_text().splitlines() == out[1:]


def test_fit_errors_exit_1_and_write_nothing(tmp_path, capsys):
    root = str(tmp_path / "run")
    local = ["--scheduler", "synchronous", "--quiet"]
    main(["synth", root, "--docs", "300", "--vocab", "50", "--topics", "3", "--doc-length", "30"])
    main(["cooccur", root, *local])
    before = listing(tmp_path / "run")
    capsys.readouterr()
    assert main(["fit", root, "--topics", "50", *local]) == 1
    assert "'n_topics' parameter of fit must be an int in the range [2, 49]" in capsys.readouterr().err
    assert main(["fit", root, "--topics", "1", *local]) == 1
    assert listing(tmp_path / "run") == before
    assert main(["fit", str(tmp_path / "nowhere"), "--topics", "3", *local]) == 1
    assert "co-occurrence store does not exist" in capsys.readouterr().err
