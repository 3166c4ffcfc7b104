"""Every fix a message suggests names something that exists.

The messages are read from the source (every string literal of speedbench/ that is not a
docstring; an f-string's fields become "{}"), so a new message is checked the day it is
written. Three kinds of suggestion are checked:

- a speedbench command (`` `speedbench verify RUN` ``, "resume with: speedbench run
  --resume RUN"): the subcommand exists and takes every option the suggestion gives it;
- an option to pass ("pass -o/--output on a larger disk", "pass --skip-doctor"): some
  subcommand takes it (options after "drop", "lower" or "in server.args" are vLLM's own);
- a scenario key ("set server.port: null", "workload.path: ... -- fix: ..."): the scenario
  schema has it (a mapping such as ``server.args`` takes any key below it).
"""

from __future__ import annotations

import argparse
import ast
import re
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from speedbench.cli import build_parser
from speedbench.scenario import Scenario

SRC = Path(__file__).parent.parent.parent / "speedbench"
# "speedbench CMD ..." as a suggestion: quoted or after "with:" / "fix:" (the command must
# exist), or at a line's start (prose too: "speedbench measures ...", so only a known command)
COMMAND = re.compile(r"(`|(?:with|fix): |^\s*)speedbench ([a-z]+)([^`;\n(]*)", re.M)
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")
PASS = re.compile(r"\bpass (-[a-zA-Z]/--[a-z][a-z0-9-]*|--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")
TOP_KEYS = "|".join(sorted(Scenario.model_fields))
KEY_PATH = re.compile(rf"(?<![\w.])(?:{TOP_KEYS})(?:\[[^\]]*\])?(?:\.[A-Za-z_][\w-]*(?:\[[^\]]*\])?)+")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def messages() -> list[tuple[str, str]]:
    """(file:line, text) of every string literal that is not a docstring."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree) | {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            else:
                continue
            out.append((f"{path.relative_to(SRC.parent)}:{node.lineno}", text))
    return out


def _options() -> dict[str, set[str]]:
    """Each subcommand's option strings."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {s for a in p._actions for s in a.option_strings} for name, p in sub.choices.items()}


def _unwrap(annotation: typing.Any) -> list[typing.Any]:
    """The types an annotation allows (Optional, unions and lists opened up)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, tuple, typing.Annotated):
        return [t for a in typing.get_args(annotation) for t in _unwrap(a)]
    return [annotation]


def schema_has(path: str) -> bool:
    """A scenario key path such as ``executor.slurm.time`` or ``workload.variants[0].config``."""
    models: list[typing.Any] = [Scenario]
    for part in re.sub(r"\[[^\]]*\]", "", path).split("."):
        if any(typing.get_origin(m) is dict or m is dict for m in models):
            return True  # a mapping (server.args, env): any key below it
        fields = [m.model_fields.get(part) for m in models if isinstance(m, type) and issubclass(m, BaseModel)]
        found = [f for f in fields if f is not None]
        if not found:
            return False
        models = [t for f in found for t in _unwrap(f.annotation)]
    return True


def command_problems(text: str, options: dict[str, set[str]]) -> list[str]:
    bad = []
    for m in COMMAND.finditer(text):
        quoted, cmd, tail = m.group(1).strip(), m.group(2), m.group(3)
        if cmd not in options:
            bad += [f"speedbench {cmd}: no such command"] if quoted else []
            continue
        bad += [f"speedbench {cmd} has no option {o}" for o in OPTION.findall(tail) if o not in options[cmd]]
    return bad


def pass_problems(text: str, options: dict[str, set[str]]) -> list[str]:
    known = set().union(*options.values())
    return [f"no command takes {o}" for m in PASS.finditer(text) for o in m.group(1).split("/") if o not in known]


def key_problems(text: str) -> list[str]:
    if "fix" not in text and " -- " not in text:
        return []  # not a message with a remedy
    # docs/fixtures.md and FOLDER/mlflow.db are files, not keys
    return [f"no scenario key {k}" for k in KEY_PATH.findall(text) if not k.endswith((".md", ".db"))
            and not schema_has(k)]


@pytest.mark.parametrize("check", [command_problems, pass_problems, key_problems], ids=lambda f: f.__name__)
def test_every_suggestion_in_the_messages_exists(check):
    options, texts = _options(), messages()
    assert any("`speedbench verify {}` lists every problem" in t for _, t in texts)  # the collector sees them
    args = (options,) if check is not key_problems else ()
    assert [f"{where}: {p}" for where, text in texts for p in check(text, *args)] == []


def test_the_checks_catch_suggestions_that_point_nowhere():
    options = _options()
    # the issue's own examples: report takes no -o/--output, and a misspelt option
    assert command_problems("cannot write x -- fix: `speedbench report -o DIR RUN`", options) == [
        "speedbench report has no option -o"]
    assert command_problems("resume with: speedbench rerun RUN", options) == ["speedbench rerun: no such command"]
    assert command_problems("speedbench measures speedups", options) == []  # prose, not a suggestion
    assert pass_problems("pass --basline-run RUN", options) == ["no command takes --basline-run"]
    assert key_problems("port in use -- fix: choose another server.prot") == ["no scenario key server.prot"]


@pytest.mark.parametrize("path,ok", [("server.port", True), ("server.args.api-key", True),
                                     ("executor.slurm.time", True), ("workload.variants[0].config", True),
                                     ("server.prot", False), ("workload.path.x", False)])
def test_schema_lookup(path, ok):
    assert schema_has(path) is ok
