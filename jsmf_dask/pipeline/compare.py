"""``compare``: fit and measure every method over a sweep of K (the paper's Figure 4).

Writes ``<root>/report/compare.csv``, ``compare.md`` and ``compare.png``
(each metric against log K, one line per method), and the metrics of every
model to ``metrics.json``.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass

from jsmf_dask._validation import check_int
from jsmf_dask.exceptions import InvalidParameterError
from jsmf_dask.io.fs import get_fs, join, write_file
from jsmf_dask.pipeline.evaluate import METRICS, evaluate
from jsmf_dask.parameters import compare_methods
from jsmf_dask.pipeline.fit import fit
from jsmf_dask.pipeline.fit_model import default_name
from jsmf_dask.pipeline.gibbs import fit_gibbs, median_chain, require_tomotopy
from jsmf_dask.pipeline.refine import default_refined_name, refine
from jsmf_dask.pipeline.report import report_dir
from jsmf_dask.render.figures import metric_curves

__all__ = ["METHODS", "CompareResult", "compare"]

METHODS = compare_methods()
#: The measures of ``compare.md`` and ``compare.png`` (against the original C): the paper's, NPMI and held-out
#: perplexity by both fold-ins (``evaluate``'s).
SHOWN = (*METRICS, "npmi", "perplexity", "perplexity_sampled")


@dataclass
class CompareResult:
    """The sweep's table (one row per method and K) and where it was written."""

    rows: list[dict]
    csv_path: str
    markdown_path: str
    figure_path: str

    def markdown(self) -> str:
        """The table against the original C, as Markdown."""
        columns = list(SHOWN)
        head = "| method | K | " + " | ".join(columns) + " |"
        lines = [head, "|" + "---|" * (len(columns) + 2)]
        for r in self.rows:
            vals = ["n/a" if r.get(m) is None else f"{r[m]:.4g}" for m in columns]
            lines.append(f"| {r['method']} | {r['n_topics']} | " + " | ".join(vals) + " |")
        return "\n".join(lines) + "\n"


def _previous_rows(url: str) -> list[dict]:
    """The rows of an earlier ``compare.csv`` (numbers as floats, K as int, empty cells as None)."""
    fs, path = get_fs(url)
    if not fs.exists(path):
        return []
    with fs.open(path, "rb") as f:
        reader = csv.DictReader(io.StringIO(f.read().decode("utf-8")))
        rows = []
        for raw in reader:
            row: dict = {}
            for key, value in raw.items():
                if key in ("method", "model"):
                    row[key] = value
                elif key == "n_topics":
                    row[key] = int(value)
                else:
                    row[key] = float(value) if value not in ("", None) else None
            rows.append(row)
    return rows


def compare(
    root: str,
    *,
    topics: list[int],
    methods: list[str],
    iterations: int = 150,
    gibbs_iterations: int = 1000,
    gibbs_chains: int = 1,
    seed: int = 0,
) -> CompareResult:
    """Fit each method at each K, evaluate all of them and write the table and figure.

    Parameters
    ----------
    root : str
        Holding ``corpus/`` and ``cooc.zarr``.
    topics : list of int
        The values of K.
    methods : list of str
        From ``none``, ``dc``, ``ap``, ``ap+cvb0`` and ``ap+vb`` (AP then
        :func:`~jsmf_dask.refine` by that method, its other parameters the defaults), ``gibbs`` (tomotopy, the optional extra
        ``jsmf_dask[gibbs]``).
    iterations : int, default=150
        AP cycles.
    gibbs_iterations : int, default=1000
    gibbs_chains : int, default=1
        Gibbs chains at each K (seeds ``seed``, ``seed + 1``, …; models
        ``k<K>-gibbs``, ``k<K>-gibbs-c2``, …): the row is the chain of median
        held-out perplexity (of median training log likelihood without a
        held-out split). tomotopy's chains on one corpus can differ by several
        per cent (one stuck 9% above the others on a basket corpus: the
        benchmarks README), more than the methods being compared.
    seed : int, default=0

    Returns
    -------
    CompareResult
        Every (method, K) measured so far under ``root``: this sweep's rows,
        and the earlier sweeps' rows it did not measure again.
    """
    root = os.fspath(root)
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise InvalidParameterError(f"The 'methods' parameter of compare must be a non-empty list of {METHODS}. "
                                    f"Got {methods!r} instead.")
    if not topics or any(not isinstance(k, int) or k < 2 for k in topics):
        raise InvalidParameterError(f"The 'topics' parameter of compare must be a non-empty list of ints >= 2. "
                                    f"Got {topics!r} instead.")
    check_int(gibbs_chains, "gibbs_chains", "compare", low=1)
    if "gibbs" in methods:
        require_tomotopy()  # fail before any fitting when the extra is missing
    names: dict[tuple[str, int], str] = {}
    chains: dict[int, list[str]] = {}
    for k in topics:
        fitted: set[str] = set()

        def spectral(rectifier: str) -> str:
            name = default_name(k, rectifier)
            if name not in fitted:
                fit(root, n_topics=k, rectifier=rectifier, iterations=iterations, seed=seed, name=name, overwrite=True)
                fitted.add(name)
            return name

        for method in methods:
            if method == "gibbs":
                chains[k] = [default_name(k, method) + (f"-c{c + 1}" if c else "") for c in range(gibbs_chains)]
                for c, chain in enumerate(chains[k]):
                    fit_gibbs(root, n_topics=k, iterations=gibbs_iterations, seed=seed + c, name=chain,
                              overwrite=True)
                name = chains[k][0]
            elif method.startswith("ap+"):
                source, how = spectral("ap"), method.removeprefix("ap+")
                name = default_refined_name(source, how)
                refine(root, model=source, method=how, name=name, overwrite=True)
            else:
                name = spectral(method)
            names[(method, k)] = name
    metrics = evaluate(root, models=list(names.values()) + [c for cs in chains.values() for c in cs[1:]])["models"]
    for k, cs in chains.items():
        names[("gibbs", k)] = median_chain(root, cs, metrics)
    rows = []
    for (method, k), name in names.items():
        entry = metrics[name]
        row = {"method": method, "n_topics": k, "model": name}
        row |= {m: entry["original_C"].get(m) for m in METRICS}
        row["coherence_mimno"] = entry["original_C"].get("coherence_mimno")
        row["npmi"] = entry["original_C"].get("npmi")
        rect = entry.get("rectified_C", {})
        row |= {f"{m}_rectified_C": rect.get(m) for m in METRICS}
        row["perplexity"] = entry.get("heldout", {}).get("perplexity")
        row["perplexity_sampled"] = entry.get("heldout", {}).get("sampled_fold_in", {}).get("perplexity")
        rows.append(row)
    out = report_dir(root)
    # earlier sweeps stay: a (method, K) measured again replaces its row, the others are kept
    ran = {(r["method"], r["n_topics"]) for r in rows}
    rows = [r for r in _previous_rows(join(out, "compare.csv")) if (r["method"], r["n_topics"]) not in ran] + rows
    order = list(methods) + [m for m in METHODS if m not in methods]  # this sweep's order first
    rows.sort(key=lambda r: (r["n_topics"], order.index(r["method"]) if r["method"] in order else len(order)))
    buf = io.StringIO()
    # every row's columns, in order: rows kept from an earlier table may lack a later version's (empty there)
    writer = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(key for r in rows for key in r)))
    writer.writeheader()
    writer.writerows(rows)
    result = CompareResult(rows, join(out, "compare.csv"), join(out, "compare.md"), join(out, "compare.png"))
    write_file(result.figure_path, metric_curves(rows, SHOWN), root=root)
    write_file(result.csv_path, buf.getvalue().encode(), root=root)
    write_file(result.markdown_path, ("Metrics against the original C (paper §4); compare.csv also has them "
                                        "against each model's rectified C.\n\n" + result.markdown()).encode(), root=root)
    return result
