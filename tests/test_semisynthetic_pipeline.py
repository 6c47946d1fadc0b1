"""The semi-synthetic pipeline (pipelines/semisynthetic.py) at a tiny scale: every cell of its table."""

import math

from pipelines.semisynthetic import run


def test_semisynthetic_table(tmp_path):
    rows = run(tmp_path, docs=[600, 3000], methods=["none", "ap"], priors=["dirichlet", "correlated"],
               vocab_size=400, k=5, doc_length=80, gibbs_iterations=0, seed=1)
    assert [(r["prior"], r["docs"], r["method"]) for r in rows] == [
        (p, m, meth) for p in ("dirichlet", "correlated") for m in (600, 3000) for meth in ("none", "ap")]
    assert all(0 <= r["B_error"] <= 2 and 0 <= r["A_error"] <= 2 and math.isfinite(r["seconds"]) for r in rows)
    err = {(r["prior"], r["docs"], r["method"]): r["B_error"] for r in rows}
    for prior in ("dirichlet", "correlated"):
        assert err[(prior, 3000, "ap")] < err[(prior, 600, "ap")]  # more documents, better topics
    table = (tmp_path / "semisynthetic.md").read_text()
    assert table.count("| ap |") == 4 and (tmp_path / "semisynthetic.csv").exists()
