"""Reading a scenario file: YAML (duplicate keys are errors), ``--set`` overrides (applied
by overrides.py), and validation errors that name the file, the key path, the line, what
was expected and how to fix it (:class:`ScenarioError`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from speedbench.errors import ScenarioError, did_you_mean
from speedbench.scenario.arms import expand_arms
from speedbench.scenario.base import Strict
from speedbench.scenario.model import GateSpec, Scenario
from speedbench.scenario.overrides import apply_overrides


def _line_map(text: str) -> dict[tuple[Any, ...], int]:
    """Map key paths to 1-based line numbers using the YAML node tree."""
    lines: dict[tuple[Any, ...], int] = {}
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return lines

    def walk(node: yaml.Node, path: tuple[Any, ...]) -> None:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value
                lines[path + (key,)] = k.start_mark.line + 1
                walk(v, path + (key,))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                walk(v, path + (i,))

    if root is not None:
        walk(root, ())
    return lines


def _fmt_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


@dataclass(frozen=True)
class YamlKind:
    """What a YAML file holds, as its error messages name it: a scenario, or a gates
    file (``speedbench gate --gates``), read and reported by the same code."""

    name: str  # "scenario": "scenario file not found", "invalid scenario FILE:LINE"
    expected: str  # what a folder or unreadable file was expected to be
    not_found_fix: str
    reference: str  # where the keys are documented


SCENARIO = YamlKind("scenario", "a scenario YAML file, such as scenarios/cpu_tiny.yaml",
                    "check the path (scenarios live in scenarios/)", "the scenario reference in README.md")


def _hint(kind: YamlKind, error_type: str) -> str:
    return {"extra_forbidden": f"remove it or check its spelling against {kind.reference}",
            "missing": "add this key", "literal_error": "use one of the allowed values"}.get(error_type, "")


def _literal_guess(e: Any) -> str:
    """" (did you mean 'speedup'?)" for a value outside a Literal's choices (a metric, a
    launcher): pydantic names the choices in the error's context."""
    choices = re.findall(r"'([^']*)'", str((e.get("ctx") or {}).get("expected", "")))
    return did_you_mean(e.get("input"), choices) if isinstance(e.get("input"), str) else ""


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    # Pydantic inserts union-member and validator tags ("function-after[...]", "str") into
    # locations; users only care about their own keys.
    return tuple(p for p in loc if isinstance(p, int) or not re.match(
        r"^(function-|str$|int$|float$|bool$|list\[|dict\[|none$|json-or-python)", str(p)))


def _key_names() -> list[str]:
    """Every key a scenario may spell (each model's fields and their aliases): what an
    unknown key is matched against for "did you mean"."""
    names: set[str] = set()
    todo = [Strict]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        for name, f in cls.model_fields.items():
            names.update(n for n in (name, f.alias) if n)
    return sorted(names)


def _where(path: str, lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...],
           blame: dict[tuple[Any, ...], str]) -> str:
    """An override's value is its own fault, not the file's: ``--set repeats=abc``, never
    the line the file gives that key (or the closest key, for a value the file lacks)."""
    expr = next((x for at, x in blame.items() if loc[:len(at)] == at), None)
    if expr is not None:
        return f"--set {expr}"
    # a model_validator error has no field; point at the closest existing key
    line = None
    probe = loc
    while probe and line is None:
        line = lines.get(probe)
        probe = probe[:-1]
    return f"{path}:{line}" if line else path


def format_validation_error(path: str, text: str, err: ValidationError,
                            blame: dict[tuple[Any, ...], str] | None = None, *, kind: YamlKind = SCENARIO,
                            keys: list[str] | None = None) -> ScenarioError:
    """``blame``: where each ``--set`` wrote (its key path in the data) -> the override;
    ``keys``: what an unknown key is matched against (default: every scenario key)."""
    lines = _line_map(text)
    parts = []
    for e in err.errors():
        loc = _clean_loc(tuple(e["loc"]))
        where = _where(path, lines, loc, blame or {})
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = f"unknown key '{loc[-1]}'{did_you_mean(loc[-1], _key_names() if keys is None else keys)}"
        elif e["type"] == "literal_error":
            msg += _literal_guess(e)
        hint = _hint(kind, e["type"])
        item = f"{where}: {_fmt_path(loc)}: {msg}"
        if e["type"] not in ("extra_forbidden", "missing") and "input" in e and not isinstance(e["input"], dict):
            item += f" (got {e['input']!r})"
        if hint:
            item += f" -- fix: {hint}"
        parts.append(item)
    head = f"invalid {kind.name} {path} ({len(parts)} problem{'s' if len(parts) != 1 else ''}):"
    return ScenarioError(head + "\n  " + "\n  ".join(parts))


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, first: int, second: int):
        super().__init__(f"duplicate key {key!r}")
        self.key, self.first, self.second = key, first, second


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key written twice in one mapping.

    PyYAML keeps the last value silently, so a scenario with two ``args:`` under one arm
    would lose the first block without a word.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges are allowed to repeat keys on purpose
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # unhashable keys fail later with PyYAML's own message
            line = key_node.start_mark.line + 1
            if first is not None:
                raise _DuplicateKey(key, first, line)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 -- a SafeLoader subclass


def read_yaml(path: str | Path, kind: YamlKind = SCENARIO) -> tuple[str, Any]:
    """A YAML file's text and data; every way it can fail is a ScenarioError that names
    the file (and line), what was expected and the fix."""
    p = Path(path)
    if not p.exists():
        raise ScenarioError(f"{kind.name} file not found: {p} -- fix: {kind.not_found_fix}")
    if p.is_dir():
        raise ScenarioError(f"{p} is a folder -- expected {kind.expected}")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"{kind.name} file {p} cannot be read ({getattr(e, 'strerror', None) or e}) -- "
                            "expected a YAML text file") from None
    try:
        return text, _load_yaml(text)
    except _DuplicateKey as e:
        raise ScenarioError(
            f"invalid {kind.name} {p}:{e.second}: duplicate key '{e.key}' (first at line {e.first}, again at line "
            f"{e.second}) -- fix: keep one of them; YAML would silently use only the last"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark else str(p)
        problem = getattr(e, "problem", None) or str(e)
        raise ScenarioError(
            f"invalid {kind.name} {where}: YAML syntax error: {problem} -- fix: check indentation and quoting near "
            "that line"
        ) from None


def load_raw(path: str | Path) -> tuple[str, dict[str, Any]]:
    text, data = read_yaml(path)
    if not isinstance(data, dict):
        raise ScenarioError(f"invalid scenario {path}: the top level must be a mapping with 'name', 'server', "
                            "'arms', ...")
    return text, data


def validate_data(data: dict[str, Any], path: str = "<scenario>", text: str = "",
                  blame: dict[tuple[Any, ...], str] | None = None) -> Scenario:
    """``blame``: apply_overrides' ``touched`` (errors in overridden values name the --set)."""
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as e:
        raise format_validation_error(path, text, e, blame) from None
    try:
        arms = expand_arms(sc.arms)
    except ValueError as e:
        raise ScenarioError(f"invalid scenario {path}: arms: {e}") from None
    names = [a.name for a in arms]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ScenarioError(f"invalid scenario {path}: arms: sweep expansion produced duplicate arm names {dup}")
    if sc.baseline is not None and sc.baseline not in names:
        raise ScenarioError(
            f"invalid scenario {path}: baseline: '{sc.baseline}' is a sweep template; "
            f"name one expanded arm instead (one of {names})"
        )
    _check_gate_arms(sc, names, path, text)
    update: dict[str, Any] = {"arms": arms}
    if sc.aa_check:
        update.update(_with_aa_arm(sc.model_copy(update={"arms": arms}), path))
    return sc.model_copy(update=update)


def _check_gate_arms(sc: Scenario, names: list[str], path: str, text: str) -> None:
    """A gate names an arm (after sweep expansion), a sweep's template, or the A/A twin: a
    misspelt arm would gate nothing."""
    known = [*names, *(a.name for a in sc.arms), *([sc.aa_arm] if sc.aa_arm else [])]
    check_gate_arms(sc.gates, known, names, path, text)


def check_gate_arms(gates: Sequence[GateSpec], known: Sequence[str], shown: Sequence[str], path: str,
                    text: str = "", at: tuple[Any, ...] = ("gates",), kind: YamlKind = SCENARIO) -> None:
    """The first gate whose arm is not ``known``, as an error at its line (``at``: where
    the gate list is in the file) with the closest arm; ``shown``: the arms listed."""
    lines = _line_map(text)
    for i, g in enumerate(gates):
        if g.arm is not None and g.arm not in known:
            loc = (*at, i, "arm")
            where = _where(path, lines, loc, {})
            raise ScenarioError(f"invalid {kind.name} {where}: {_fmt_path(loc)}: no arm named {g.arm!r}"
                                f"{did_you_mean(g.arm, known)}; arms are {list(shown)} -- fix: name one of them")


def _with_aa_arm(sc: Scenario, path: str) -> dict[str, Any]:
    """The A/A arm right after the baseline: the same launch, a second server."""
    base = sc.baseline_arm
    if base is None:
        raise ScenarioError(f"invalid scenario {path}: aa_check: there is no baseline arm to repeat; "
                            "add an arm without speculative_config or set aa_check: false")
    name = sc.aa_arm
    i = [a.name for a in sc.arms].index(base)
    aa = sc.arms[i].model_copy(update={
        "name": name, "description": f"A/A check: a second server of {base}'s exact configuration"})
    existing = next((a for a in sc.arms if a.name == name), None)
    if existing is not None:
        if existing == aa:  # already expanded (a re-validated, dumped scenario): nothing to add
            return {"baseline": base}
        raise ScenarioError(f"invalid scenario {path}: aa_check: an arm is already named '{name}'; rename it")
    return {"arms": [*sc.arms[:i + 1], aa, *sc.arms[i + 1:]], "baseline": base}


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    """Read, override, validate and expand a scenario file."""
    text, data = load_raw(path)
    touched: dict[tuple[Any, ...], str] = {}
    if overrides:
        data = apply_overrides(data, overrides, touched)
    return validate_data(data, str(path), text, touched)
