"""Small functions (issues 22 and 29): no function in speedbench/ or tests/ takes more than 8
parameters (facts that travel together go in one object: loadgen's PointJob and Target,
doctor's Host, the test factory's RunSpec) or runs over 60 lines (speedbench/'s own: 40); no
module of speedbench/ runs over 350 lines (issue 57: well under the old 45 and 400, split by
subject rather than to the counter); and speedbench/ imports
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
MAX_PRODUCT_LINES = 40  # speedbench/'s own functions: the 60 above is a floor, not a target
MAX_LOCAL_IMPORTS = 20
MAX_MODULE_LINES = 350

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


def _longer_than(limit: int, *folders: Path) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name} ({fn.end_lineno - fn.lineno + 1} lines)"
            for path, fn, _ in _functions(*folders)
            if fn.end_lineno is not None and fn.end_lineno - fn.lineno + 1 > limit]


def test_no_function_runs_over_sixty_lines():
    too_long = _longer_than(MAX_LINES, PACKAGE, ROOT / "tests")
    assert not too_long, "functions over 60 lines:\n" + "\n".join(too_long)


def test_no_product_function_runs_over_forty_lines():
    too_long = _longer_than(MAX_PRODUCT_LINES, PACKAGE)
    assert not too_long, f"speedbench/ functions over {MAX_PRODUCT_LINES} lines:\n" + "\n".join(too_long)


def test_no_module_runs_over_three_hundred_fifty_lines():
    # a module past this is two subjects: split it (report/drift.py's plots: report/drift_plots.py)
    too_long = [f"{path.relative_to(ROOT)} ({n} lines)" for path in sorted(PACKAGE.rglob("*.py"))
                if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(too_long)


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
