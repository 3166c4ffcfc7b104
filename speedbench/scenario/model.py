"""The scenario model: validation, defaults and arm (sweep) expansion.

A scenario is data. Pydantic validates it; unknown keys are rejected everywhere except
inside ``speculative_config``, which passes vLLM's own keys through.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_serializer,
    model_validator,
)

from speedbench.errors import ScenarioError
from speedbench.metric_registry import GATE_METRIC_NAMES

ArgValue = bool | int | float | str | list[Any] | dict[str, Any] | None


def _safe_name(v: str, why: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", v):
        raise ValueError(f"{why}: use letters, digits, '.', '_' and '-', starting with a letter or digit")
    return v


EnvValue = str | int | float | bool


def _env_strings(v: dict[str, EnvValue]) -> dict[str, str]:
    # YAML reads `VAR: 1` as a number; environment values are strings either way.
    return {k: (str(x).lower() if isinstance(x, bool) else str(x)) for k, x in v.items()}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class DockerSpec(_Strict):
    image: str = "vllm/vllm-openai:v0.32.0"
    cache_dir: str = "~/.cache/huggingface"  # mounted at /root/.cache/huggingface
    extra_args: list[str] = Field(default_factory=list)  # appended to `docker run`
    shm_size: str | None = None


class ServerSpec(_Strict):
    launcher: Literal["local", "docker", "external"] = "local"
    model: str | None = None  # required unless every arm is external
    # Argv prefix that starts vLLM. `vllm serve` takes the model positionally; the CPU
    # package's `python -m vllm.entrypoints.openai.api_server` takes `--model`.
    command: list[str] = Field(default_factory=lambda: ["vllm", "serve"])
    model_arg: Literal["auto", "positional", "flag"] = "auto"
    args: dict[str, ArgValue] = Field(default_factory=dict)
    env: dict[str, EnvValue] = Field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int | None = None  # None = pick a free port per server
    ready_timeout_s: float = Field(1800.0, gt=0)
    shutdown_grace_s: float = Field(20.0, ge=0)
    # Name of an environment variable holding the API key; the key itself never
    # appears in the scenario or in results.
    api_key_env: str | None = None
    # GPUs available for placement on this host (None = detect / not applicable).
    gpus: list[int] | None = None
    docker: DockerSpec = Field(default_factory=DockerSpec)

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, EnvValue]) -> dict[str, str]:
        return _env_strings(v)

    @field_validator("command")
    @classmethod
    def _command_nonempty(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("the launch command must have at least one element")
        return v


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


class SweepSpec(_Strict):
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


class ArmSpec(_Strict):
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

    @field_validator("name")
    @classmethod
    def _name_chars(cls, v: str) -> str:
        return _safe_name(v, "arm names are used in file names")

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, EnvValue]) -> dict[str, str]:
        return _env_strings(v)

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


class VariantSpec(_Strict):
    """One point on a workload axis (system prompt, chat-template kwargs, length bucket)."""

    name: str = Field(min_length=1)
    system_prompt: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    input_tokens: int | None = Field(None, gt=0)  # pad prompts to this length (context bucket)
    config: str | None = None  # a SPEED-Bench config for this variant (e.g. throughput_8k)


class WorkloadSpec(_Strict):
    source: Literal["speed_bench", "sample", "jsonl", "random"] = "sample"
    path: str | None = None  # local SPEED-Bench folder, or the JSONL file
    config: str = "qualitative"
    categories: list[str] = Field(default_factory=list)
    entropy_tiers: list[str] = Field(default_factory=list)
    num_prompts: int | None = Field(None, gt=0)
    seed: int = 0
    api: Literal["chat", "completions"] = "chat"
    chat_template: Literal["server", "client"] = "server"
    tokenizer: str | None = None  # for client-side templating / padding; default: the model
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    system_prompt: str | None = None
    temperature: float = Field(0.0, ge=0)
    top_p: float | None = None
    max_tokens: int = Field(4096, gt=0)
    ignore_eos: bool = False
    warmup: int = Field(2, ge=0)
    request_timeout_s: float = Field(600.0, gt=0)
    idle_timeout_s: float = Field(60.0, gt=0)
    allow_random: bool = False  # random-token prompts overstate SD speedups; opt in explicitly
    variants: list[VariantSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> "WorkloadSpec":
        if self.source == "jsonl" and not self.path:
            raise ValueError("source 'jsonl' needs 'path' (a JSONL file of prompts or chat messages)")
        names = [v.name for v in self.variants]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate variant names: {sorted(dup)}")
        return self


class Reference(_Strict):
    """Published figures shown beside the measured ones. Keys are concurrency levels."""

    source: str = ""
    arm: str | None = None  # the speculative arm the figures refer to
    speedup: dict[int, float] = Field(default_factory=dict)
    acceptance_length: dict[str, float] = Field(default_factory=dict)  # per category


class GateSpec(_Strict):
    """One CI gate. See docs/gates.md."""

    metric: Literal[GATE_METRIC_NAMES]  # type: ignore[valid-type]  # metric_registry.GATES
    arm: str | None = None  # default: every speculative arm
    concurrency: int | None = None  # default: every level
    variant: str | None = None
    min: float | None = None
    max: float | None = None
    # Relative gate: fail when the value dropped by more than this fraction against the
    # baseline run AND the confidence intervals say the drop is real.
    max_regression: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _one_bound(self) -> "GateSpec":
        if self.min is None and self.max is None and self.max_regression is None:
            raise ValueError("a gate needs 'min', 'max' or 'max_regression'")
        return self


class Scenario(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    # Folder of tiny local fixtures (`speedbench fixtures tiny DIR`) that `run` builds
    # first when missing; relative to the working directory.
    fixtures: str | None = None
    server: ServerSpec = Field(default_factory=ServerSpec)
    arms: list[ArmSpec] = Field(min_length=1)
    baseline: str | None = None  # the arm speedups divide by; default: the first non-speculative arm
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    concurrency: list[int] = Field(default_factory=lambda: [1, 4, 16], min_length=1)
    repeats: int = Field(1, ge=1)
    # Latency percentiles reported for TTFT, TPOT, ITL (per token and per chunk) and E2E,
    # beside their mean and std (docs/metrics.md, "Latency distributions").
    percentiles: list[float] = Field(default_factory=lambda: [50.0, 90.0, 95.0, 99.0], min_length=1)
    # Keep running the remaining arms when one arm fails to start or dies.
    continue_on_arm_failure: bool = True
    reference: Reference = Field(default_factory=Reference)
    gates: list[GateSpec] = Field(default_factory=list)

    @field_validator("concurrency")
    @classmethod
    def _conc_positive(cls, v: list[int]) -> list[int]:
        bad = [c for c in v if c < 1]
        if bad:
            raise ValueError(f"concurrency levels must be positive integers, got {bad}")
        if len(set(v)) != len(v):
            raise ValueError(f"concurrency levels must be distinct, got {v}")
        return v

    @field_validator("percentiles")
    @classmethod
    def _percentiles(cls, v: list[float]) -> list[float]:
        bad = [p for p in v if not 0 < p < 100]
        if bad:
            raise ValueError(f"percentiles must lie strictly between 0 and 100 (use the mean/max otherwise), got {bad}")
        if len(set(v)) != len(v):
            raise ValueError(f"percentiles must be distinct, got {v}")
        return sorted(float(p) for p in v)

    @field_validator("name")
    @classmethod
    def _name_chars(cls, v: str) -> str:
        return _safe_name(v, "the scenario name is used as a folder name")

    @model_validator(mode="after")
    def _arms(self) -> "Scenario":
        names = [a.name for a in self.arms]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate arm names: {dup}; every arm needs its own name")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"baseline '{self.baseline}' is not an arm; arms are {names}")
        needs_model = any(a.base_url is None for a in self.arms) and self.server.launcher != "external"
        if needs_model and not self.server.model:
            raise ValueError("server.model is required when speedbench launches servers")
        if self.server.launcher == "external":
            missing = [a.name for a in self.arms if not a.base_url]
            if missing:
                raise ValueError(f"launcher 'external' needs a base_url on every arm; missing on {missing}")
        return self

    # ---- derived views -------------------------------------------------------------

    @property
    def baseline_arm(self) -> str | None:
        if self.baseline:
            return self.baseline
        for a in self.arms:
            if not a.is_speculative:
                return a.name
        return None

    def arm(self, name: str) -> ArmSpec:
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError(name)

    @property
    def variant_names(self) -> list[str]:
        return [v.name for v in self.workload.variants] or [""]


# ---- sweep expansion ---------------------------------------------------------------


def _fmt_value(v: Any) -> str:
    s = str(v).lower() if isinstance(v, bool) else str(v)
    s = s.rstrip("/").split("/")[-1]  # a draft path names the arm by its last component
    return re.sub(r"[^A-Za-z0-9_.\-]", "-", s)


def expand_arms(arms: list[ArmSpec]) -> list[ArmSpec]:
    """Replace every arm that has a ``sweep`` with one arm per combination of values."""
    out: list[ArmSpec] = []
    for arm in arms:
        if arm.sweep is None:
            out.append(arm)
            continue
        axes = arm.sweep.axes()
        if not axes:
            out.append(arm.model_copy(update={"sweep": None}))
            continue
        for combo in itertools.product(*[vals for _, _, vals in axes]):
            spec = arm.speculative_config
            args = dict(arm.args)
            values: dict[str, Any] = {}
            parts = [arm.name]
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
                parts.append(f"k{val}" if shown == "k" else
                             _fmt_value(val) if shown == "draft" else f"{_fmt_value(shown)}{_fmt_value(val)}")
            out.append(
                arm.model_copy(
                    update={
                        "name": "-".join(parts),
                        "speculative_config": spec,
                        "args": args,
                        "sweep": None,
                        "env": dict(arm.env),
                        "gpus": list(arm.gpus) if arm.gpus is not None else None,
                        "template": arm.name,
                        "sweep_values": values,
                    }
                )
            )
    return out


def select_arms(sc: Scenario, names: list[str]) -> Scenario:
    """Keep only the named arms (after sweep expansion); a sweep template name keeps all its arms."""
    known = {a.name for a in sc.arms} | {a.template for a in sc.arms if a.template}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ScenarioError(f"--arms: no arm named {unknown}; arms are {[a.name for a in sc.arms]}")
    keep = [a for a in sc.arms if a.name in names or (a.template and a.template in names)]
    baseline = sc.baseline if sc.baseline in {a.name for a in keep} else None
    return sc.model_copy(update={"arms": keep, "baseline": baseline})


def resolved_dict(sc: Scenario) -> dict[str, Any]:
    """The fully resolved scenario as plain data, for saving next to results."""
    return sc.model_dump(mode="json", exclude_none=False)
