"""``make demo``'s pipeline (pipelines/demo.py) end to end, on its defaults but a smaller fit.

The demo passes only the options it was given to the library, so a change of a library default (or of
what None means) cannot break it unseen: this runs its argument handling and every stage.
"""

from __future__ import annotations

import re

from pipelines.demo import main


def test_the_demo_runs_end_to_end(tmp_path, capsys):
    root = tmp_path / "demo-run"
    assert main(["--root", str(root), "--vocab-size", "1500", "--topics", "8", "--iterations", "20",
                 "--scheduler", "threads"]) in (0, None)
    out = capsys.readouterr().out
    assert "== refined topics" in out and (root / "report" / "report.html").exists()
    # 1,300-odd training papers: refine's validation papers chose between no drawn sweeps and 20
    assert re.search(r"with (0|20) drawn sweep\(s\) (chosen by the validation documents|kept: .*) "
                     r"\(eta 0\.05 with 0 drawn: ", out)
    assert ", eta 0.05 with 20 drawn: " in out
