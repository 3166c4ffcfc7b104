"""The metrics a CI gate may name (``GateSpec.metric``): which summary-row column holds each
and which way is better (from its declaration in metrics/registry.py)."""

from __future__ import annotations

from dataclasses import dataclass

from speedbench.metrics.registry import BY_KEY


@dataclass(frozen=True)
class GateMetric:
    """A metric a gate may name: which row column holds it, and which way is better."""

    name: str
    column: str
    fallback: str = ""  # a column to read when ``column`` is empty (AL without per-request data)
    suffix: str = ""  # unit as gate messages print it after a number
    speculative_only: bool = False  # without an arm, the gate applies to speculative arms only

    @property
    def better(self) -> str:
        return BY_KEY[self.column].better

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"


GATES: tuple[GateMetric, ...] = (
    # `speedup` reads the headline clock (metrics/headline.py); the other two name a clock
    GateMetric(name="speedup", column="speedup_headline_mean", suffix="×", speculative_only=True),
    GateMetric(name="speedup_client", column="speedup_mean", suffix="× (client clock)", speculative_only=True),
    GateMetric(name="speedup_engine", column="speedup_engine_mean", suffix="× (engine clock)",
               speculative_only=True),
    GateMetric(name="acceptance_length", column="al_tokens", fallback="al_prometheus",
               suffix=" tok/step (AL pooled over steps)",
               speculative_only=True),
    GateMetric(name="per_user_tps", column="per_user_tps_mean", suffix=" tok/s (client clock)"),
    GateMetric(name="error_rate", column="error_rate"),
    GateMetric(name="output_tps", column="output_tps", suffix=" tok/s"),
)
GATE_METRICS: dict[str, GateMetric] = {g.name: g for g in GATES}
GATE_METRIC_NAMES: tuple[str, ...] = tuple(GATE_METRICS)


@dataclass(frozen=True)
class DefaultGate:
    """A gate every run gets without a line in its scenario, until the scenario turns it
    off by name (``gates_off: [lossless]``). It has no bounds: its rule is its own. The
    fields a scenario's GateSpec has, so every gate's lines, JUnit and Markdown read both."""

    metric: str
    rule: str  # what passing means, where a GateSpec shows its bounds
    arm: str | None = None
    concurrency: int | None = None
    variant: str | None = None
    min: float | None = None
    max: float | None = None
    max_regression: float | None = None


# At temperature 0 speculative decoding must return the target's own tokens: a point whose
# outputs verdict is "lossy" (metrics/outputs.py) fails it, whatever its speedup.
LOSSLESS = DefaultGate(metric="lossless", rule="no lossy point")
DEFAULT_GATES: dict[str, DefaultGate] = {g.metric: g for g in (LOSSLESS,)}
