"""The layers of ``jsmf_dask`` as its files show them: who may import whom, no circles, small modules.

Computed from the source files themselves (``ast``), so a new module is
checked the day it is added. The layers, lowest first (see
``docs/architecture.md``):

* base: ``exceptions``, ``_validation``, ``config``, ``parameters``;
* ``kernels`` (numpy/scipy, no dask, no I/O), ``io`` (storage), ``render``
  (HTML and figures) and the execution helpers (``cluster``,
  ``_worker_plugins``, ``_progress``), each on the base only;
* ``stages`` (Dask graph builders) on kernels, io and ``_progress``;
* ``pipeline`` (the runners) on everything below;
* the estimator (``estimator``), then the command line (``cli``, ``cli_errors``,
  ``cli_parser``, ``cli_progress``, ``cli_words``) and the package's ``__init__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "jsmf_dask"
MAX_LINES = 500

BASE = {"exceptions", "_validation", "config", "parameters"}
EXECUTION = {"cluster", "_heartbeat", "_worker_plugins", "_progress"}
#: group → the groups it may import (itself included)
ALLOWED = {
    "base": {"base"},
    "kernels": {"base", "kernels"},
    "io": {"base", "io"},
    "render": {"base", "render"},
    "execution": {"base", "execution"},
    "stages": {"base", "kernels", "io", "execution", "stages"},
    "pipeline": {"base", "kernels", "io", "render", "execution", "stages", "pipeline"},
    "estimator": {"base", "kernels", "io", "execution", "stages", "pipeline", "estimator"},
    "cli": {"base", "kernels", "io", "render", "execution", "stages", "pipeline", "estimator", "cli", "package"},
    "package": {"base", "kernels", "io", "render", "execution", "stages", "pipeline", "estimator", "cli", "package"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _group(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "package"
    head = parts[1]
    if head in BASE:
        return "base"
    if head in EXECUTION:
        return "execution"
    if head == "estimator":
        return "estimator"
    if head in ("cli", "cli_parser", "cli_errors", "cli_progress", "cli_words"):
        return "cli"
    return head


def _resolve(name: str) -> str:
    """A ``jsmf_dask...`` import target as the module it names (``from jsmf_dask import config`` → config)."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return name if path.with_suffix(".py").exists() or (path / "__init__.py").exists() else name.rsplit(".", 1)[0]


def _imports(path: Path) -> set[str]:
    """The ``jsmf_dask`` modules ``path`` imports, at any depth (lazy imports count), outside TYPE_CHECKING."""
    tree = ast.parse(path.read_text())
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
               for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "jsmf_dask":
            for alias in node.names:
                found.add(_resolve(f"{node.module}.{alias.name}"))
        elif isinstance(node, ast.Import):
            found |= {_resolve(a.name) for a in node.names if a.name.split(".")[0] == "jsmf_dask"}
    return found - {_module_name(path)}


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_the_package_has_the_layers_it_claims():
    groups = {_group(m) for m in _graph()}
    assert groups <= set(ALLOWED), groups - set(ALLOWED)
    assert {"kernels", "io", "stages", "pipeline", "render", "base", "execution", "cli"} <= groups


def test_no_module_imports_from_a_higher_layer():
    wrong = sorted(f"{m} ({_group(m)}) imports {d} ({_group(d)})" for m, deps in _graph().items() for d in deps
                   if _group(d) not in ALLOWED[_group(m)])
    assert not wrong, "\n".join(wrong)


def test_no_import_circles():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for dep in graph.get(node, ()):
            if dep not in graph:
                continue
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                circles.append(sorted(members))

    for module in graph:
        if module not in index:
            visit(module)
    assert not circles, circles


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path):
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)} has {n} lines (at most {MAX_LINES})"


def test_the_checks_see_a_violation():
    """The import reader finds a higher-layer import, a lazy one included (so the tests above can fail)."""
    src = PACKAGE / "kernels" / "_probe_for_test.py"
    src.write_text("def f():\n    from jsmf_dask.pipeline.fit import fit\n    from jsmf_dask import config\n")
    try:
        deps = _imports(src)
    finally:
        src.unlink()
    assert deps == {"jsmf_dask.pipeline.fit", "jsmf_dask.config"}
    assert "pipeline" not in ALLOWED[_group("jsmf_dask.kernels._probe_for_test")]


#: What opens files or stores: a stage reaches them only through ``jsmf_dask.io``.
STORAGE_LIBRARIES = ("zarr", "fsspec", "pyarrow.parquet", "pyarrow.dataset", "pyarrow.csv", "h5py")


@pytest.mark.parametrize("path", sorted((PACKAGE / "stages").glob("*.py")), ids=lambda p: p.name)
def test_stages_do_no_io_of_their_own(path):
    tree = ast.parse(path.read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | \
        {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in imported if m.startswith(STORAGE_LIBRARIES)}, imported
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert not {c for c in calls if c in ("open", "np.save", "np.savez", "np.load") or c.endswith(".open")
                or c.startswith("get_fs")}, calls
