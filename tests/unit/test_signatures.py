"""No function in speedbench/ takes more than 8 parameters (issue 22): facts that travel
together go in one object (loadgen's PointJob and Target, doctor's Host)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "speedbench"
MAX_PARAMS = 8


def _n_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]
    return len([n for n in names if n.arg not in ("self", "cls")])


def test_no_function_takes_more_than_eight_parameters():
    too_many = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({_n_params(node)})"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _n_params(node) > MAX_PARAMS
    ]
    assert not too_many, "functions with more than 8 parameters:\n" + "\n".join(too_many)
