"""``--set KEY.PATH=VALUE`` overrides of a scenario's data, before it is validated: list
items addressed by index or by name, and where each override wrote (so a validation error
can blame it)."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from speedbench.errors import ScenarioError, did_you_mean


def parse_override(expr: str) -> tuple[list[str], Any]:
    if "=" not in expr:
        raise ScenarioError(f"--set {expr!r}: expected KEY.PATH=VALUE, e.g. --set workload.max_tokens=256")
    key, raw = expr.split("=", 1)
    if not key:
        raise ScenarioError(f"--set {expr!r}: the key path is empty")
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str],
                    touched: dict[tuple[Any, ...], str] | None = None) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides; list items are addressed by index or by name.

    Names may contain dots (``arms.eagle3.1.args.x=1``): at a list, the longest run of
    path parts that spells an item's name wins. ``touched`` collects where each override
    wrote (list indices resolved), so a validation error can blame the override.
    """
    data = copy.deepcopy(data)
    for expr in overrides:
        loc = _apply_one(data, expr)
        if touched is not None:
            touched[loc] = expr
    return data


def _apply_one(data: dict[str, Any], expr: str) -> tuple[Any, ...]:
    """Set one ``KEY.PATH=VALUE`` in ``data``; returns the key path it wrote."""
    keys, value = parse_override(expr)
    node: Any = data
    loc: list[Any] = []
    i = 0
    while i < len(keys):
        if isinstance(node, list):
            idx, used = _list_index(node, keys[i:], expr)
            i += used
            loc.append(idx)
            if i == len(keys):
                node[idx] = value
            else:
                node = node[idx]
            continue
        if not isinstance(node, dict):
            raise ScenarioError(f"--set {expr!r}: '{'.'.join(keys[:i])}' is not a mapping or list")
        key = keys[i]
        i += 1
        loc.append(key)
        if i == len(keys):
            node[key] = value
        else:
            if node.get(key) is None:
                node[key] = {}
            node = node[key]
    return tuple(loc)


def _list_index(node: list[Any], keys: list[str], expr: str) -> tuple[int, int]:
    for n in range(len(keys), 0, -1):
        name = ".".join(keys[:n])
        for j, item in enumerate(node):
            if isinstance(item, dict) and item.get("name") == name:
                return j, n
    if keys[0].isdigit() and int(keys[0]) < len(node):
        return int(keys[0]), 1
    names = [str(item["name"]) for item in node if isinstance(item, dict) and item.get("name")]
    raise ScenarioError(f"--set {expr!r}: no list item '{keys[0]}'{did_you_mean(keys[0], names)} (use an index or "
                        f"a name: {', '.join(names) or 'none'})")
