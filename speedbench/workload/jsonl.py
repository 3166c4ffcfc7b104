"""Prompts from a JSONL file.

One JSON object per line, in any of these shapes:

* ``{"prompt": "..."}`` or ``{"text": "..."}``: one user turn.
* ``{"messages": [{"role": "user", "content": "..."}, ...]}``: a chat. Each user message is
  one turn. Assistant messages are dropped: the runner feeds back the model's own answers,
  as SPEED-Bench does. A leading system message is kept in the prompt's tags as
  ``system_prompt`` and used unless the workload or variant sets one.
* ``{"turns": [...], ...}``: SPEED-Bench's own schema.

Optional keys on any shape: ``id`` (or ``question_id``), ``category``, ``sub_category``,
``source``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speedbench.errors import ScenarioError
from speedbench.records import Prompt
from speedbench.scenario import VariantSpec, WorkloadSpec
from speedbench.workload.base import Source
from speedbench.workload.speed_bench import fingerprint, read_jsonl, resolve_path
from speedbench.workload.speed_bench_rows import turns_from_messages as _from_messages

DEFAULT_CATEGORY = "uncategorized"


def load_jsonl(path: str, *, base_dir: Path | None = None) -> list[Prompt]:
    p = resolve_path(path, base_dir)
    if not p.is_file():
        raise ScenarioError(
            f"workload.path: JSONL file {p} does not exist -- fix: point workload.path at a file "
            'with one {"prompt": ...} or {"messages": [...]} object per line'
        )
    rows = read_jsonl(p)
    if not rows:
        raise ScenarioError(f"workload.path: {p} holds no rows")
    return [_row_to_prompt(row, p) for row in rows]


def _row_to_prompt(row: dict[str, Any], path: Path) -> Prompt:
    line = row.get("_line", 0)
    at = f"{path}:{line}"
    tags: list[tuple[str, str]] = []
    if "messages" in row:
        turns, system = _from_messages(row["messages"], at)
        if system:
            tags.append(("system_prompt", system))
    elif "turns" in row:
        raw = row["turns"]
        turns = (raw,) if isinstance(raw, str) else tuple(str(t) for t in raw or ())
    elif "prompt" in row or "text" in row:
        text = row.get("prompt", row.get("text"))
        if not isinstance(text, str):
            raise ScenarioError(f"{at}: 'prompt'/'text' must be a string, got {type(text).__name__}")
        turns = (text,)
    else:
        keys = sorted(k for k in row if k != "_line")
        raise ScenarioError(
            f'{at}: no prompt in this row (keys {keys}) -- fix: use {{"prompt": "..."}}, '
            '{"text": "..."}, {"messages": [{"role": "user", "content": "..."}]} or {"turns": [...]}'
        )
    if not turns or not all(t.strip() for t in turns):
        raise ScenarioError(f"{at}: empty prompt")
    return Prompt(
        id=str(row.get("id", row.get("question_id", f"{path.stem}-{line}"))),
        turns=turns,
        category=str(row.get("category") or DEFAULT_CATEGORY),
        sub_category=str(row.get("sub_category") or ""),
        source=str(row.get("source") or path.name),
        tags=tuple(tags),
    )


class JsonlSource(Source):
    name = "jsonl"
    counts_cheaply = True

    def read(self, spec: WorkloadSpec, config: str, *, base_dir: Path | None, variant: VariantSpec | None,
             tokenizer: Any) -> tuple[list[Prompt], list[str]]:
        return load_jsonl(spec.path or "", base_dir=base_dir), []

    def fingerprint(self, spec: WorkloadSpec, base_dir: Path | None) -> dict[str, object]:
        f = resolve_path(spec.path or "", base_dir)
        return {"layout": "file", **fingerprint([f], f.parent)}


SOURCE = JsonlSource()
