"""The scenario model: server, workload, gates and the whole scenario (arms: arms.py).

A scenario is data. Pydantic validates it; unknown keys are rejected everywhere except
inside ``speculative_config``, which passes vLLM's own keys through.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from speedbench.errors import ScenarioError, did_you_mean
from speedbench.metrics.gates import DEFAULT_GATES, GATE_METRIC_NAMES
from speedbench.scenario.arms import ArmSpec
from speedbench.scenario.base import ArgValue, EnvValue, Strict, env_strings, safe_name
from speedbench.scenario.executor import ExecutorSpec
from speedbench.scenario.stopping import BaselineFromSpec, StopSpec
from speedbench.scenario.tracking import MlflowSpec
from speedbench.scenario.traffic import LoadSpec, PromoteSpec, SloSpec, load_points


class DockerSpec(Strict):
    image: str = "vllm/vllm-openai:v0.32.0"
    cache_dir: str = "~/.cache/huggingface"  # mounted at /root/.cache/huggingface
    extra_args: list[str] = Field(default_factory=list)  # appended to `docker run`
    shm_size: str | None = None


class ServerSpec(Strict):
    # The engine: a name in speedbench.engine.ENGINES ("vllm"), or "package.module:Class" for
    # an Engine class outside speedbench (engine/base.py; a stand-in in tests, a plugin).
    engine: str = Field("vllm", pattern=r"^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$")
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
    # Add the flags that only make vLLM report more (per-request timing and acceptance)
    # to every launched server; false runs the scenario's command exactly.
    measurement_flags: bool = True

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, EnvValue]) -> dict[str, str]:
        return env_strings(v)

    @field_validator("command")
    @classmethod
    def _command_nonempty(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("the launch command must have at least one element")
        return v


class VariantSpec(Strict):
    """One point on a workload axis (system prompt, chat-template kwargs, length bucket)."""

    name: str = Field(min_length=1)
    system_prompt: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    input_tokens: int | None = Field(None, gt=0)  # pad prompts to this length (context bucket)
    config: str | None = None  # a SPEED-Bench config for this variant (e.g. throughput_8k)


# The YAML key of WorkloadSpec.exact_length, as the dry-run names it.
EXACT_LENGTH_KEY = "ignore_eos"


class WorkloadSpec(Strict):
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
    # Generate exactly max_tokens tokens, past the end of sequence. The key takes the name
    # users know from the OpenAI-compatible servers (vLLM's request field); the code says
    # exact_length, and the engine decides the request's fields (Engine.request_fields).
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

    @property
    def exact_length(self) -> bool:
        """Each request generates exactly ``max_tokens`` tokens (the key :data:`EXACT_LENGTH_KEY`)."""
        return self.ignore_eos


class Reference(Strict):
    """Published figures shown beside the measured ones. Keys are concurrency levels."""

    source: str = ""
    arm: str | None = None  # the speculative arm the figures refer to
    speedup: dict[int, float] = Field(default_factory=dict)
    acceptance_length: dict[str, float] = Field(default_factory=dict)  # per category


class GateSpec(Strict):
    """One CI gate. See docs/gates.md."""

    metric: Literal[GATE_METRIC_NAMES]  # type: ignore[valid-type]  # metrics.gates.GATES
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
            raise ValueError("a gate needs 'min', 'max' or 'max_regression' -- fix: add one, such as min: 1.5")
        return self


AA_SUFFIX = "-aa"


class Scenario(Strict):
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
    # Rounds of fresh server starts: each repeat starts every arm's server again, arms in
    # ABBA order (docs/metrics.md, "Run-to-run noise").
    repeats: int = Field(1, ge=1)
    # A second server of the baseline's exact configuration (arm "<baseline>-aa"); its
    # speedup over the baseline must contain 1.0 and is the run's noise floor.
    aa_check: bool = False
    # Latency percentiles reported for TTFT, TPOT, ITL (per token and per chunk) and E2E,
    # beside their mean and std (docs/metrics.md, "Latency distributions").
    percentiles: list[float] = Field(default_factory=lambda: [50.0, 90.0, 95.0, 99.0], min_length=1)
    # Keep running the remaining arms when one arm fails to start or dies.
    continue_on_arm_failure: bool = True
    reference: Reference = Field(default_factory=Reference)
    # The checkpoint the others are held against across nights (`compare --checkpoints`
    # and the dashboard default to it): the arm that plays "production".
    checkpoint_reference: str | None = None
    gates: list[GateSpec] = Field(default_factory=list)
    # Default gates turned off by name (metrics/gates.py DEFAULT_GATES: "lossless"); every
    # other one applies to every run it can judge (docs/gates.md, "Default gates").
    gates_off: list[str] = Field(default_factory=list)
    # Where the arms run: this process (local) or one batch job per arm (slurm).
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)
    load: LoadSpec = Field(default_factory=LoadSpec)  # closed loop (default) or request rates
    slo: SloSpec = Field(default_factory=SloSpec)  # goodput thresholds (docs/metrics.md, "Goodput")
    # Sequential stopping and a reused baseline (docs/metrics.md, "Sequential stopping").
    stop: StopSpec | None = None
    baseline_from: BaselineFromSpec | None = None
    # Calibration files (speedbench calibrate) for speedup_predicted; default: the folder
    # "calibrations" beside the run's scenario folders (results/calibrations).
    calibrations: str | None = None
    # Screening (load.mode: screen): which arms get a full speed run afterwards.
    promote: PromoteSpec | None = None
    # Log the finished run to MLflow, one MLflow run per arm (docs/results.md, "MLflow").
    mlflow: MlflowSpec | None = None

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
        return safe_name(v, "the scenario name is used as a folder name")

    @field_validator("gates_off")
    @classmethod
    def _gates_off(cls, v: list[str]) -> list[str]:
        for name in v:
            if name not in DEFAULT_GATES:
                raise ValueError(f"no default gate named {name!r}{did_you_mean(name, list(DEFAULT_GATES))} "
                                 f"(default gates: {', '.join(DEFAULT_GATES)})")
        return list(dict.fromkeys(v))

    @model_validator(mode="after")
    def _screen(self) -> "Scenario":
        """Screening measures AL only: the non-speculative arms (the baseline) and the A/A
        twin start no server. The scenario keeps its concurrency levels: the speedups are
        predicted there."""
        if self.load.mode == "screen":
            self.arms = [a for a in self.arms if a.is_speculative]
            # nor is a baseline reused: the full run a promoted checkpoint gets does that
            self.baseline, self.aa_check, self.baseline_from = None, False, None
            if not self.arms:
                raise ValueError("load mode 'screen' needs a speculative arm")
        if self.promote and self.promote.beats and self.load.mode == "screen" \
                and self.promote.beats not in {a.name for a in self.arms}:
            raise ValueError(f"promote.beats: no speculative arm named {self.promote.beats!r}")
        return self

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
        if self.checkpoint_reference is not None and self.checkpoint_reference not in names:
            raise ValueError(f"checkpoint_reference '{self.checkpoint_reference}' is not an arm"
                             f"{did_you_mean(self.checkpoint_reference, names)}; arms are {names}")
        if self.stop is not None and self.load.mode == "rate":
            raise ValueError("stop (sequential stopping) needs the closed loop: an arrival schedule is one "
                             "whole pass, it cannot end at a look")
        if self.baseline_from is not None and self.baseline_arm is None:
            raise ValueError("baseline_from needs a baseline arm")
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

    @property
    def aa_arm(self) -> str | None:
        """The A/A arm's name, when the scenario asks for the A/A check."""
        base = self.baseline_arm
        return f"{base}{AA_SUFFIX}" if self.aa_check and base else None

    def arm(self, name: str) -> ArmSpec:
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError(name)

    @property
    def variant_names(self) -> list[str]:
        return [v.name for v in self.workload.variants] or [""]

    def load_points(self, variant: str) -> list[tuple[int, str, float | None]]:
        return load_points(self.load, self.concurrency, variant)


def select_arms(sc: Scenario, names: list[str]) -> Scenario:
    """Keep only the named arms (after sweep expansion); a sweep template name keeps all its arms."""
    known = {a.name for a in sc.arms} | {a.template for a in sc.arms if a.template}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ScenarioError(f"--arms: no arm named {unknown}; arms are {[a.name for a in sc.arms]}")
    if sc.aa_arm and sc.baseline_arm in names and sc.aa_arm not in names:
        names = [*names, sc.aa_arm]  # the A/A arm goes with its baseline
    keep = [a for a in sc.arms if a.name in names or (a.template and a.template in names)]
    kept = {a.name for a in keep}
    baseline = sc.baseline if sc.baseline in kept else None
    # without its baseline the A/A check has nothing to compare: it goes too
    aa_check = bool(sc.aa_check and sc.baseline_arm in kept)
    # a gate on an arm left out measures nothing in this run (cpu_tiny's AL gate names
    # self-draft): it goes with its arm, and the saved scenario says so
    names_kept = kept | {a.template for a in keep if a.template}
    gates = [g for g in sc.gates if g.arm is None or g.arm in names_kept]
    return sc.model_copy(update={"arms": keep, "baseline": baseline, "aa_check": aa_check, "gates": gates})


def resolved_dict(sc: Scenario) -> dict[str, Any]:
    """The fully resolved scenario as plain data, for saving next to results. The A/A arm
    is left out: ``aa_check: true`` adds it again when the file is read."""
    data = sc.model_dump(mode="json", exclude_none=False)
    if data["server"]["engine"] == "vllm":  # the default stays unwritten: saved scenarios keep their bytes
        del data["server"]["engine"]
    if not data["gates_off"]:  # likewise
        del data["gates_off"]
    if sc.aa_arm:
        data["arms"] = [a for a in data["arms"] if a["name"] != sc.aa_arm]
    return data
