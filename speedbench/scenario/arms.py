"""Arms: the typed speculative config, sweeps over dotted keys, and their expansion into
one arm per combination of values."""

from __future__ import annotations

import itertools
import re
from typing import Literal, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_serializer, model_validator

from speedbench.scenario.base import ArgValue, EnvValue, Strict, env_strings, safe_name


class SpeculativeConfig(BaseModel):
    """vLLM's ``--speculative-config``: ``method``, ``model`` and ``num_speculative_tokens``
    are typed; any other key vLLM accepts passes through unchanged. Keys keep the order
    they were written in, so the command line matches the scenario."""

    model_config = ConfigDict(extra="allow")

    method: str = Field(min_length=1)
    model: str | None = None
    num_speculative_tokens: int | None = Field(None, ge=1)
    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: Any) -> "SpeculativeConfig":
        cfg = handler(data)
        if isinstance(data, dict):
            cfg._order = tuple(data)
        return cfg

    @model_serializer(mode="wrap")
    def _in_written_order(self, handler: Any) -> dict[str, Any]:
        d = handler(self)
        # typed keys the scenario did not write stay out (vLLM applies its defaults)
        d = {k: v for k, v in d.items() if k in self.model_fields_set or k not in type(self).model_fields}
        order = [k for k in self._order if k in d] + [k for k in d if k not in self._order]
        return {k: d[k] for k in order}

    @property
    def k(self) -> int | None:
        """Draft tokens per step (``num_speculative_tokens``); None lets vLLM decide."""
        return self.num_speculative_tokens

    def to_dict(self) -> dict[str, Any]:
        """The JSON object vLLM receives."""
        return self.model_dump(mode="json")

    def with_value(self, key: str, value: Any) -> "SpeculativeConfig":
        """A copy with one key set (typed keys are validated again)."""
        return SpeculativeConfig.model_validate({**self.to_dict(), key: value})


# Sweep keys are dotted paths into an arm: the speculative config or the server args.
SWEEP_ROOTS = ("speculative_config", "args")
# The named axes stay as shorthand: (dotted key, what the expanded arm's name shows).
SWEEP_SUGAR = {"draft_models": ("speculative_config.model", "draft"),
               "num_speculative_tokens": ("speculative_config.num_speculative_tokens", "k")}


class SweepSpec(Strict):
    """Expands one arm template into several arms (issue: drift sweeps).

    Any dotted key is an axis: ``speculative_config.<key>`` or ``args.<flag>`` mapped to a
    list of values. ``num_speculative_tokens`` and ``draft_models`` are shorthand for the
    two speculative axes; ``args`` maps a `vllm serve` argument to a list of values. All
    lists are crossed.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    num_speculative_tokens: list[int] = Field(default_factory=list)
    draft_models: list[str] = Field(default_factory=list)
    args: dict[str, list[ArgValue]] = Field(default_factory=dict)

    @field_validator("num_speculative_tokens")
    @classmethod
    def _k_positive(cls, v: list[int]) -> list[int]:
        if any(k < 1 for k in v):
            raise ValueError("every num_speculative_tokens value must be at least 1")
        return v

    @field_validator("args")
    @classmethod
    def _args_nonempty(cls, v: dict[str, list[ArgValue]]) -> dict[str, list[ArgValue]]:
        empty = [k for k, vals in v.items() if not vals]
        if empty:
            raise ValueError(f"sweep.args lists must not be empty (empty: {empty}); an empty axis would drop the arm")
        return v

    @model_validator(mode="after")
    def _dotted_keys(self) -> "SweepSpec":
        for key, vals in (self.model_extra or {}).items():
            root, dot, rest = key.partition(".")
            if root not in SWEEP_ROOTS or not dot or not rest:
                raise ValueError(f"unknown sweep key '{key}': use num_speculative_tokens, draft_models, args, or a "
                                 f"dotted key under {' / '.join(SWEEP_ROOTS)} (e.g. speculative_config.model)")
            if not isinstance(vals, list) or not vals:
                raise ValueError(f"sweep.{key} must be a non-empty list of values")
        return self

    def axes(self) -> list[tuple[str, str, list[Any]]]:
        """(dotted key, name shown in arm names and sweep_values, values) per axis, in order:
        draft models, k, then args, then other dotted keys as written."""
        out: list[tuple[str, str, list[Any]]] = []
        if self.draft_models:
            out.append((*SWEEP_SUGAR["draft_models"], list(self.draft_models)))
        if self.num_speculative_tokens:
            out.append((*SWEEP_SUGAR["num_speculative_tokens"], list(self.num_speculative_tokens)))
        out += [(f"args.{k}", k, list(v)) for k, v in self.args.items()]
        for key, vals in (self.model_extra or {}).items():
            named = next((n for d, n in SWEEP_SUGAR.values() if d == key), None)
            out.append((key, named or (key.partition(".")[2] if key.startswith("args.") else key), list(vals)))
        return out


class ArmSpec(Strict):
    name: str = Field(min_length=1)
    description: str = ""
    speculative_config: SpeculativeConfig | None = None
    args: dict[str, ArgValue] = Field(default_factory=dict)  # merged over server.args
    env: dict[str, EnvValue] = Field(default_factory=dict)
    base_url: str | None = None  # an already-running endpoint: health-checked, never stopped
    gpus: list[int] | None = None
    sweep: SweepSpec | None = None
    # Filled in by sweep expansion so reports can group arms of one template.
    template: str | None = None
    sweep_values: dict[str, Any] = Field(default_factory=dict)
    # Arms of one series differ only in k and form one depth curve (docs/drift.md). Sweep
    # expansion sets it (the arm's name without its k part); hand-named arms may set it too.
    series: str | None = None
    # A control whose result is known in advance (metrics/controls.py checks it): a draft
    # that accepts nothing (untrained) or a draft as costly as the target (self_draft, also
    # recognised when the draft model is the target) cannot make the arm faster.
    control: Literal["self_draft", "untrained"] | None = None

    @field_validator("name")
    @classmethod
    def _name_chars(cls, v: str) -> str:
        return safe_name(v, "arm names are used in file names")

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, EnvValue]) -> dict[str, str]:
        return env_strings(v)

    @model_validator(mode="after")
    def _spec_needs_method(self) -> "ArmSpec":
        sc = self.speculative_config
        if sc is not None:
            method = sc.method
            swept = {key for key, _, _ in self.sweep.axes()} if self.sweep else set()
            if method not in ("ngram", "suffix") and not sc.model and "speculative_config.model" not in swept:
                raise ValueError(
                    f"speculative_config with method '{method}' needs a draft 'model' "
                    "(a local path or a Hugging Face name)"
                )
        return self

    @property
    def is_speculative(self) -> bool:
        return self.speculative_config is not None


# ---- sweep expansion ---------------------------------------------------------------


def _fmt_value(v: Any) -> str:
    s = str(v).lower() if isinstance(v, bool) else str(v)
    s = s.rstrip("/").split("/")[-1]  # a draft path names the arm by its last component
    return re.sub(r"[^A-Za-z0-9_.\-]", "-", s)


def expand_arms(arms: list[ArmSpec]) -> list[ArmSpec]:
    """Replace every arm that has a ``sweep`` with one arm per combination of values."""
    out: list[ArmSpec] = []
    for arm in arms:
        axes = arm.sweep.axes() if arm.sweep is not None else []
        if not axes:
            # An arm saved by a run before series was stored (expanded, so it has sweep
            # values) keeps None: its series is not known, and readers fall back to its name.
            name = arm.series or (None if arm.sweep_values else arm.name)
            out.append(arm.model_copy(update={"sweep": None, "series": name}))
            continue
        for combo in itertools.product(*[vals for _, _, vals in axes]):
            out.append(_combination(arm, axes, combo))
    return out


def _combination(arm: ArmSpec, axes: list[tuple[str, str, list[Any]]], combo: tuple[Any, ...]) -> ArmSpec:
    """One arm of a sweep: ``arm`` with one value per axis (``combo``), named after them."""
    spec = arm.speculative_config
    args = dict(arm.args)
    values: dict[str, Any] = {}
    parts = [arm.name]
    series_parts = [arm.name]
    for (key, shown, _), val in zip(axes, combo):
        values[shown] = val
        root, _, rest = key.partition(".")
        if root == "speculative_config":
            if spec is None:
                what = next((n for n, (d, _) in SWEEP_SUGAR.items() if d == key), key)
                raise ValueError(f"arm '{arm.name}': sweep.{what} needs a speculative_config")
            spec = spec.with_value(rest, val)
        else:
            args[rest] = val
        part = (f"k{val}" if shown == "k" else
                _fmt_value(val) if shown == "draft" else f"{_fmt_value(shown)}{_fmt_value(val)}")
        parts.append(part)
        series_parts += [] if shown == "k" else [part]
    return arm.model_copy(
        update={
            "name": "-".join(parts),
            "speculative_config": spec,
            "args": args,
            "sweep": None,
            "env": dict(arm.env),
            "gpus": list(arm.gpus) if arm.gpus is not None else None,
            "template": arm.name,
            "sweep_values": values,
            "series": arm.series or "-".join(series_parts),
        }
    )
