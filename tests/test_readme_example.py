"""The README's Python example, extracted from README.md and run as written in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Python API"):]
    match = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert match, "README.md: no python block under '## Python API'"
    return match.group(1)


@pytest.mark.slow
def test_readme_python_example_runs_as_a_script(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(readme_example(), encoding="utf-8")
    (tmp_path / "pipelines").symlink_to(REPO / "pipelines")  # "run from the repository root"
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    # the example's own prints; dask's progress bars (on by default in the API) share stdout
    lines = [re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", x.split("\r")[-1]) for x in done.stdout.split("\n")]
    lines = [x for x in lines if x.strip() and "% Completed" not in x]
    assert lines[0] == "(10, 3000)"
    assert float(lines[1]) == pytest.approx(1.0)
    assert len([x for x in lines if re.match(r"^\d+ \w+( \w+){7}$", x)]) == 10  # ten topics of eight words
    perplexities = {x.split()[0]: float(x.split()[1]) for x in lines if x.startswith("k10-")}
    assert set(perplexities) == {"k10-ap", "k10-ap-refined", "k10-short"}
    # refining lowers held-out perplexity; more sweeps lower it further
    assert perplexities["k10-ap-refined"] < perplexities["k10-short"] < perplexities["k10-ap"]
    assert lines[-1] == "(3000, 10) (10, 10)"
    assert (tmp_path / "runs" / "nips" / "report" / "metrics.json").exists()
