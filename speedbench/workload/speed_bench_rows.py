"""One SPEED-Bench row -> :class:`Prompt`: its turns (or NeMo-Skills' ``messages`` of user
turns), and its tags (config, entropy tier, difficulty, system prompt). The bundled sample
and JSONL files in this schema are read with it too."""

from __future__ import annotations

from typing import Any

from speedbench.errors import ScenarioError
from speedbench.records import Prompt

ENTROPY_TIERS = ("low_entropy", "mixed", "high_entropy")
REQUIRED_COLUMNS = ("question_id", "category")  # plus "turns" or "messages"
# The published schema (dataset card) has no entropy column; a prepared copy may add one
# under any of these names. Without one, a throughput row whose `category` is itself a
# tier name ("low_entropy", "mixed", ...) takes its tier from there.
ENTROPY_COLUMNS = ("entropy_tier", "entropy", "entropy_level", "entropy_bucket", "tier")

_TIER_ALIASES = {
    "low": "low_entropy", "low_entropy": "low_entropy", "lowentropy": "low_entropy",
    "high": "high_entropy", "high_entropy": "high_entropy", "highentropy": "high_entropy",
    "mixed": "mixed", "mixed_entropy": "mixed", "mid": "mixed", "medium": "mixed",
}


def normalize_tier(value: Any) -> str:
    """'Low-Entropy', 'low', 'low_entropy' -> 'low_entropy'; unknown names are kept, lowercased."""
    key = str(value).strip().lower().replace("-", "_").replace(" ", "_")
    return _TIER_ALIASES.get(key, key)


def turns_from_messages(messages: Any, at: str) -> tuple[tuple[str, ...], str]:
    """User turns and a leading system message of an OpenAI-style ``messages`` list."""
    if not isinstance(messages, list) or not messages:
        raise ScenarioError(f"{at}: 'messages' must be a non-empty list of {{role, content}} objects")
    turns: list[str] = []
    system = ""
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or not isinstance(m.get("content"), str):
            raise ScenarioError(f"{at}: messages[{i}] needs a 'role' and a string 'content'")
        role = m["role"]
        if role == "system":
            if turns:
                raise ScenarioError(f"{at}: messages[{i}]: a system message is only accepted first")
            system = m["content"]
        elif role == "user":
            turns.append(m["content"])
        elif role != "assistant":  # assistant answers are replaced by the model's own
            raise ScenarioError(f"{at}: messages[{i}]: unsupported role '{role}' (use system, user, assistant)")
    if not turns:
        raise ScenarioError(f"{at}: 'messages' has no user message")
    return tuple(turns), system


def row_to_prompt(row: dict[str, Any], config: str, *, where: str) -> Prompt:
    at = f"{where}:{row['_line']}" if "_line" in row else where
    missing = [c for c in REQUIRED_COLUMNS if c not in row]
    if "turns" not in row and "messages" not in row:
        missing.append("turns")
    if missing:
        raise ScenarioError(
            f"{at}: missing column(s) {missing}; a SPEED-Bench row has question_id, category, "
            "sub_category, turns (or NeMo-Skills' messages), source, src_id, difficulty, multiturn"
        )
    if "turns" in row:
        turns = row["turns"]
        if isinstance(turns, str):  # some exports flatten a single turn
            turns = [turns]
        turns = tuple(str(t) for t in (turns or ()))
    else:
        # NeMo-Skills' prepare script replaces `turns` with one user message per turn.
        turns, system = turns_from_messages(list(row["messages"] or ()), at)
    if not turns:
        raise ScenarioError(f"{at}: row {row['question_id']!r} has no turns")
    # config "" = not a SPEED-Bench config (the bundled sample, JSONL files in this schema)
    tags: list[tuple[str, str]] = [("config", config)] if config else []
    tier = entropy_tier(row, config)
    if tier:
        tags.append(("entropy_tier", tier))
    if row.get("difficulty"):
        tags.append(("difficulty", str(row["difficulty"])))
    if "turns" not in row and system:
        tags.append(("system_prompt", system))
    return Prompt(
        id=str(row["question_id"]),
        turns=turns,
        category=str(row.get("category") or ""),
        sub_category=str(row.get("sub_category") or ""),
        source=str(row.get("source") or ""),
        tags=tuple(tags),
    )


def entropy_tier(row: dict[str, Any], config: str) -> str:
    for col in ENTROPY_COLUMNS:
        if row.get(col) not in (None, ""):
            return normalize_tier(row[col])
    if config.startswith("throughput"):
        guess = normalize_tier(row.get("category") or "")
        if guess in ENTROPY_TIERS:
            return guess
    return ""
