"""Every public function and class of ``jsmf_dask`` documents each of its parameters (numpydoc's Parameters)."""

from __future__ import annotations

import inspect
import re

import pytest

import jsmf_dask
from jsmf_dask.estimator import scoring


def _public():
    names = [n for n in jsmf_dask.__all__ if not n.startswith("__")]
    found = [(n, getattr(jsmf_dask, n)) for n in names]
    found += [(f"estimator.scoring.{n}", getattr(scoring, n)) for n in scoring.__all__]
    return [(n, obj) for n, obj in found if inspect.isfunction(obj) or (inspect.isclass(obj) and
                                                                       "Parameters\n" in (obj.__doc__ or ""))]


def undocumented(obj) -> list[str]:
    """The parameters of ``obj``'s signature (a class: its ``__init__``'s) missing from its docstring's Parameters
    section (``name : type`` lines, several names separated by commas)."""
    doc = inspect.getdoc(obj) or ""
    section = doc.split("Parameters\n----------\n", 1)
    if len(section) < 2:
        return ["(no Parameters section)"]
    body = re.split(r"\n\n[A-Z][A-Za-z ]+\n-{3,}\n", section[1])[0]
    documented = set()
    for line in body.splitlines():
        if line and not line.startswith(" "):
            documented |= {name.strip().lstrip("*") for name in line.split(" : ")[0].split(",")}
    target = obj.__init__ if inspect.isclass(obj) else obj
    return [p for p in inspect.signature(target).parameters if p != "self" and p not in documented]


@pytest.mark.parametrize(("name", "obj"), _public(), ids=[n for n, _ in _public()])
def test_every_parameter_is_documented(name, obj):
    assert undocumented(obj) == []


def test_the_check_sees_a_missing_parameter():
    def documented(a, b, *, c=None):
        """Do.

        Parameters
        ----------
        a, b : int
        c : str, optional
        """

    def missing(a, b, overwrite=False):
        """Do.

        Parameters
        ----------
        a : int
        b : int

        Returns
        -------
        overwrite : bool
        """

    assert undocumented(documented) == [] and undocumented(missing) == ["overwrite"]
