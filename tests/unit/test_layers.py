"""Every speedbench import goes down docs/architecture.md's layer list, never up, and
no import runs in a circle, between modules or between packages.

The list is read from the doc, so the doc and the code cannot drift apart unnoticed: a
new module must be placed in a layer, and an import that runs back up fails here. The
layer check allows imports sideways (within a line, within a package), so the circle
check covers those: every import counts, module-level, ``TYPE_CHECKING`` and
function-local alike. The package check folds each module into its top-level package
(``speedbench.results.tail`` -> ``results``; a root module is its own package): two
packages that import each other, by any modules, are one room, not two.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "speedbench"


def _layers() -> dict[str, int]:
    """``{"report": 3, "client": 8, ...}``: module or package path -> layer number."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("### Layers", 1)[1].split("\n### ", 1)[0]
    out: dict[str, int] = {}
    for line in section.splitlines():
        m = re.match(r"\s*(\d+)\.\s+(.*)", line)
        if m:
            for name in re.findall(r"`([^`]+)`", m.group(2)):
                out[name.rstrip("/").removesuffix(".py")] = int(m.group(1))
    return out


def _layer(layers: dict[str, int], dotted: str) -> int | None:
    """The layer of ``speedbench.a.b.c``: the longest listed prefix (a/b/c, a/b, a)."""
    parts = dotted.split(".")[1:]
    for i in range(len(parts), 0, -1):
        if "/".join(parts[:i]) in layers:
            return layers["/".join(parts[:i])]
    return None


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(p for p in rel.parts if p != "__init__")


def _imports(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """(line, candidate module names, most specific last) of every speedbench import."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "speedbench":
            # `from speedbench.report import tables` imports the module speedbench.report.tables
            out.append((node.lineno, [node.module] + [f"{node.module}.{a.name}" for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, [a.name]) for a in node.names if a.name.split(".")[0] == "speedbench"]
    return out


def test_every_module_has_a_layer():
    layers = _layers()
    missing = [_module(f) for f in sorted(PACKAGE.rglob("*.py"))
               if f.parent != PACKAGE or f.name != "__init__.py"]
    missing = [m for m in missing if _layer(layers, m) is None]
    assert not missing, f"modules without a layer in docs/architecture.md: {missing}"


def test_no_import_runs_back_up_a_layer():
    layers = _layers()
    upward = []
    for f in sorted(PACKAGE.rglob("*.py")):
        me = _layer(layers, _module(f))
        if me is None:
            continue
        for line, names in _imports(ast.parse(f.read_text(encoding="utf-8"))):
            target = next((t for t in (_layer(layers, n) for n in reversed(names)) if t is not None), None)
            if target is not None and target < me:
                upward.append(f"{f.relative_to(ROOT)}:{line} (layer {me}) imports {names[0]} (layer {target})")
    assert not upward, "imports that run back up a layer:\n" + "\n".join(upward)


def _graph() -> dict[str, dict[str, str]]:
    """module -> {imported module: "path:line"}; ``from speedbench.a import b`` is the module
    ``speedbench.a.b`` if there is one, else ``speedbench.a``. The ``__init__`` run on the way
    to a submodule is no edge (a package re-exporting its submodules is no circle)."""
    files = {_module(f): f for f in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, dict[str, str]] = {m: {} for m in files}
    for me, f in files.items():
        for line, names in _imports(ast.parse(f.read_text(encoding="utf-8"))):
            targets = [n for n in names[1:] if n in files] or [names[0]]
            for target in targets:
                if target in files and target != me:
                    graph[me].setdefault(target, f"{f.relative_to(ROOT)}:{line}")
    return graph


def _cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The circles (a, b, ..., a) a depth-first walk closes; at least one per tangle."""
    out: list[list[str]] = []
    done: set[str] = set()

    def walk(path: list[str]) -> None:
        for w in sorted(graph[path[-1]]):
            if w in path:
                out.append(path[path.index(w):] + [w])
            elif w not in done:
                walk(path + [w])
        done.add(path[-1])

    for v in sorted(graph):
        if v not in done:
            walk([v])
    return out


def test_no_import_circle():
    graph = _graph()
    circles = _cycles(graph)
    shown = [" -> ".join(c) + "\n    " + ", ".join(graph[a][b] for a, b in zip(c, c[1:])) for c in circles]
    assert not circles, "import circles:\n" + "\n".join(shown)


def test_the_circle_check_finds_a_circle():
    graph = {"a": {"b": "a.py:1"}, "b": {"c": "b.py:1"}, "c": {"a": "c.py:1"}, "d": {"a": "d.py:1"}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]


def _package(module: str) -> str:
    return module.split(".")[1]


def _package_graph(graph: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """package -> {imported package: "path:line" of the first module import that makes the edge}."""
    out: dict[str, dict[str, str]] = {_package(m): {} for m in graph if m != "speedbench"}
    for me, targets in graph.items():
        for target, where in targets.items():
            if me != "speedbench" and target != "speedbench" and _package(me) != _package(target):
                out[_package(me)].setdefault(_package(target), where)
    return out


def test_no_package_circle():
    graph = _package_graph(_graph())
    circles = list(_cycles(graph))
    shown = [" -> ".join(c) + "\n    " + ", ".join(graph[a][b] for a, b in zip(c, c[1:])) for c in circles]
    assert not circles, "package circles:\n" + "\n".join(shown)


def test_the_package_check_sees_function_local_imports():
    src = "def f():\n    from speedbench.results.files import atomic_write\n"
    assert _imports(ast.parse(src)) == [(2, ["speedbench.results.files", "speedbench.results.files.atomic_write"])]
    graph = {"speedbench.a.x": {"speedbench.b.y": "a/x.py:3"}, "speedbench.b.y": {"speedbench.a.z": "b/y.py:9"},
             "speedbench.a.z": {}}
    assert _cycles(_package_graph(graph)) == [["a", "b", "a"]]
