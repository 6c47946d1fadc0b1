"""The parameter table is the one source of fit's and refine's parameters: the CLI, the Python functions,
the estimator and ``jsmf run`` configs all agree with it."""

from __future__ import annotations

import argparse
import inspect

import pytest

from jsmf_dask import RectifiedAnchorWords, cooccur, fit, ingest, refine
from jsmf_dask.cli_parser import build_parser
from jsmf_dask.config import _DEFAULTS
from jsmf_dask.exceptions import InvalidParameterError
from jsmf_dask.parameters import PARAMETERS, parameter, refined_fit_iterations, stage_parameters
from jsmf_dask.pipeline.run_config import _SPECS

FUNCTIONS = {"ingest": ingest, "cooccur": cooccur, "fit": fit, "refine": refine}


def _subparser(stage: str) -> argparse.ArgumentParser:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[stage]


@pytest.mark.parametrize("entry", PARAMETERS, ids=lambda p: f"{p.stage}.{p.name}")
def test_each_cli_option_is_the_tables(entry):
    action = next(a for a in _subparser(entry.stage)._actions if entry.cli_flag in a.option_strings)
    assert action.dest == entry.name and action.default is None and action.required == entry.required
    assert action.help == entry.help_text()
    if not entry.required:  # the help's stated default is the table's
        stated = entry.default_text or (f"{entry.default:g}" if isinstance(entry.default, float) else str(entry.default))
        assert action.help.endswith(f"(default: {stated})")
    if entry.kind == "choice":
        assert tuple(action.choices) == entry.choices


@pytest.mark.parametrize("entry", PARAMETERS, ids=lambda p: f"{p.stage}.{p.name}")
def test_each_function_default_is_the_tables(entry):
    signature = inspect.signature(FUNCTIONS[entry.stage]).parameters[entry.name]
    if entry.required:
        assert signature.default is inspect.Parameter.empty
    elif entry.default_text is not None:  # decided from the input: None stands for it
        assert signature.default is None
    else:
        assert signature.default == entry.default


def test_the_estimator_parameters_are_the_tables():
    signature = inspect.signature(RectifiedAnchorWords.__init__).parameters
    mapped = [p for p in PARAMETERS if p.estimator]
    assert {p.estimator for p in mapped} <= set(signature)
    for entry in mapped:
        default = signature[entry.estimator].default
        if entry.required:
            continue  # n_components: the estimator gives it a default, scikit-learn's way
        if entry.estimator == "max_iter":  # None: the table's 150, or 50 where refinement follows
            assert default is None and RectifiedAnchorWords(refine=None)._cycles == entry.default
            assert RectifiedAnchorWords()._cycles == refined_fit_iterations(10) == 20
            assert RectifiedAnchorWords(50)._cycles == refined_fit_iterations(50) == 50
            continue
        assert default == entry.default, entry.estimator
    # and the estimator checks its values against the table: the table's message, the estimator's name
    with pytest.raises(InvalidParameterError, match=r"The 'max_iter' parameter of RectifiedAnchorWords must be"):
        RectifiedAnchorWords(2, max_iter=0, refine=None).fit_cooccurrence(__import__("numpy").eye(5))
    with pytest.raises(InvalidParameterError, match=r"'solver' parameter of RectifiedAnchorWords must be"):
        RectifiedAnchorWords(solver="magic", refine=None).fit_cooccurrence(__import__("numpy").eye(5))


def test_run_configs_take_the_tables_keys():
    for stage in FUNCTIONS:
        for entry in stage_parameters(stage):
            assert entry.config_key in _SPECS[stage]
            assert _SPECS[stage][entry.config_key][1] == entry.required


def test_execution_tuning_holds_no_algorithm_parameter():
    """jsmf.yaml (dask config) is execution tuning only: no key of it names a parameter of the table."""
    tuned = {f"{stage}.{key}" for stage, keys in _DEFAULTS["jsmf"].items() if isinstance(keys, dict) for key in keys}
    table = {f"{p.stage}.{p.name.replace('_', '-')}" for p in PARAMETERS}
    assert not tuned & table, tuned & table


@pytest.mark.parametrize(("stage", "name", "good", "bad"), [
    ("fit", "iterations", 1, 0), ("fit", "tol", 1e-6, -1.0), ("fit", "solver", "eg", "magic"),
    ("refine", "alpha", "auto", "often"), ("refine", "eta", 0.01, 0.0), ("refine", "tol", None, float("nan")),
    ("refine", "validation", 0.0, 0.7),
])
def test_the_table_checks_values(stage, name, good, bad):
    entry = parameter(stage, name)
    entry.check(good, stage)
    with pytest.raises(InvalidParameterError, match=rf"'{name}' parameter of {stage}"):
        entry.check(bad, stage)
    with pytest.raises(argparse.ArgumentTypeError, match="expected"):
        if entry.kind == "choice":
            raise argparse.ArgumentTypeError("expected a choice")  # argparse's own choices refuse these
        entry.parse(str(bad))


def test_the_kernels_choices_are_the_tables():
    """The kernels validate their own options (they cannot import the table's layer's users); the lists agree."""
    from jsmf_dask.kernels.recover import SOLVERS
    from jsmf_dask.stages.refine import METHODS

    assert parameter("fit", "solver").choices == SOLVERS
    assert parameter("refine", "method").choices == METHODS


#: CLI options whose default lives in jsmf.yaml (execution tuning): flag → its key under ``jsmf``.
_CONFIG_BACKED = {("ingest", "--docs-per-shard"): "ingest.docs-per-shard",
                  ("ingest", "--row-group-size"): "ingest.row-group-size",
                  ("cooccur", "--tile-size"): "cooccur.tile-size"}


def test_every_help_default_is_the_codes():
    """Each "(default: X)" in a command's help equals the default the code applies: the option's own default,
    jsmf.yaml's for execution tuning, the parameter table's for algorithm parameters."""
    import re

    from jsmf_dask import config
    from jsmf_dask.cli_parser import build_parser

    def same(shown: str, value) -> bool:
        if isinstance(value, list | tuple):
            value = ",".join(map(str, value))
        try:
            return float(shown) == float(value)
        except (TypeError, ValueError):
            return shown == str(value)

    table = {p.cli_flag: p for p in PARAMETERS}
    checked = 0
    for command, sub in build_parser().command_parsers.items():
        for action in sub._actions:
            m = re.search(r"\(default: ([^);]*)", action.help or "")
            if not m or not action.option_strings:
                continue
            shown, flag = m.group(1).strip(), action.option_strings[-1]
            if " " in shown:
                continue  # stated in words ("the shipped English list", "$DASK_SCHEDULER_ADDRESS, else auto")
            if (command, flag) in _CONFIG_BACKED:
                assert same(shown, config._default(_CONFIG_BACKED[command, flag])), (command, flag, shown)
            elif action.default not in (None, False, argparse.SUPPRESS):
                assert same(shown, action.default), (command, flag, shown, action.default)
            elif flag in table and table[flag].default is not None and table[flag].default_text is None:
                assert same(shown, table[flag].default), (command, flag, shown)
            else:
                continue  # a default the input decides ("all", "none", "k<K>-<rectifier>")
            checked += 1
    assert checked >= 30
