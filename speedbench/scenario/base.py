"""What every scenario model shares: strict models, argument and environment values,
and the name rule."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict


ArgValue = bool | int | float | str | list[Any] | dict[str, Any] | None


def safe_name(v: str, why: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", v):
        raise ValueError(f"{why}: use letters, digits, '.', '_' and '-', starting with a letter or digit")
    return v


EnvValue = str | int | float | bool


def env_strings(v: dict[str, EnvValue]) -> dict[str, str]:
    # YAML reads `VAR: 1` as a number; environment values are strings either way.
    return {k: (str(x).lower() if isinstance(x, bool) else str(x)) for k, x in v.items()}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
