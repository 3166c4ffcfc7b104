"""Small functions (issues 22 and 29): no function in speedbench/ or tests/ takes more than 8
parameters (facts that travel together go in one object: loadgen's PointJob and Target,
doctor's Host, the test factory's RunSpec) or runs over 60 lines; and speedbench/ imports
inside functions only where a heavy or optional dependency needs it, at most 20 times,
each with its reason in a comment."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "speedbench"
MAX_PARAMS = 8
MAX_LINES = 60
MAX_LOCAL_IMPORTS = 20

Fn = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(*folders: Path) -> Iterator[tuple[Path, Fn, list[str]]]:
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield path, node, text.splitlines()


def _n_params(fn: Fn) -> int:
    a = fn.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]
    return len([n for n in names if n.arg not in ("self", "cls")])


def test_no_function_takes_more_than_eight_parameters():
    too_many = [f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name} ({_n_params(fn)})"
                for path, fn, _ in _functions(PACKAGE, ROOT / "tests") if _n_params(fn) > MAX_PARAMS]
    assert not too_many, "functions with more than 8 parameters:\n" + "\n".join(too_many)


def test_no_function_runs_over_sixty_lines():
    too_long = [f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name} ({fn.end_lineno - fn.lineno + 1} lines)"
                for path, fn, _ in _functions(PACKAGE, ROOT / "tests")
                if fn.end_lineno is not None and fn.end_lineno - fn.lineno + 1 > MAX_LINES]
    assert not too_long, "functions over 60 lines:\n" + "\n".join(too_long)


def test_function_local_imports_are_few_and_each_says_why():
    found, bare = [], []
    for path, fn, lines in _functions(PACKAGE):
        for node in ast.walk(fn):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                found.append(where)
                line, above = lines[node.lineno - 1], lines[node.lineno - 2].strip()
                if "#" not in line and not above.startswith("#"):
                    bare.append(where)
    found = sorted(set(found))  # a nested function's import is walked from its parent too
    assert len(found) <= MAX_LOCAL_IMPORTS, f"{len(found)} function-local imports:\n" + "\n".join(found)
    assert not bare, "function-local imports without a comment saying why:\n" + "\n".join(sorted(set(bare)))
