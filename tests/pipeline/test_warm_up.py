"""``python -m jsmf_dask.pipeline.warm_up`` (run by ``make`` after installing) compiles every numba kernel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "jsmf_dask" / "kernels"


@pytest.mark.slow
def test_warm_up_caches_every_compiled_kernel(tmp_path):
    """Every ``@njit(cache=True)`` function of the package ends up in numba's cache (here a fresh directory), so
    a new install's first command does not pay the ~7 s of compilation."""
    import re

    expected = set()
    for path in KERNELS.glob("_*.py"):  # the compiled loops and their helpers (_stream)
        source = path.read_text()
        for name in re.findall(r"@njit\([^)]*cache=True[^)]*\)\s*\ndef (\w+)", source):
            expected.add(f"{path.stem}.{name}")
    assert len(expected) >= 6
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "jsmf_dask.pipeline.warm_up"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "kernels compiled into numba's cache" in out.stdout
    cached = {re.sub(r"-\d+\.py\d+\.nbi$", "", p.name) for p in tmp_path.rglob("*.nbi")}
    assert expected <= cached, expected - cached
