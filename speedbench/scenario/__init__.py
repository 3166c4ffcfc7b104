"""The scenario: the pydantic model (model.py; arms, speculative config and sweeps in
arms.py; load shape and SLOs in traffic.py; shared types in base.py) and reading it
from YAML (load.py).

Everything is importable from ``speedbench.scenario`` as before the split.
"""

from speedbench.scenario.load import (
    format_validation_error,
    load_raw,
    load_scenario,
    validate_data,
)
from speedbench.scenario.overrides import apply_overrides, parse_override
from speedbench.scenario.arms import SWEEP_ROOTS, SWEEP_SUGAR, ArmSpec, SpeculativeConfig, SweepSpec, expand_arms
from speedbench.scenario.base import ArgValue, EnvValue
from speedbench.scenario.executor import ExecutorSpec, SlurmSpec
from speedbench.scenario.traffic import LoadSpec, SloSpec, rate_label
from speedbench.scenario.stopping import BaselineFromSpec, StopSpec
from speedbench.scenario.model import (
    EXACT_LENGTH_KEY,
    DockerSpec,
    GateSpec,
    Reference,
    Scenario,
    ServerSpec,
    VariantSpec,
    WorkloadSpec,
    resolved_dict,
    select_arms,
)

__all__ = [
    "EXACT_LENGTH_KEY",
    "SWEEP_ROOTS", "SWEEP_SUGAR", "ArgValue", "ArmSpec", "DockerSpec", "EnvValue", "ExecutorSpec", "GateSpec",
    "Reference", "Scenario", "ServerSpec", "SlurmSpec", "SpeculativeConfig", "SweepSpec", "VariantSpec", "WorkloadSpec",
           "apply_overrides",
    "expand_arms", "format_validation_error", "load_raw", "load_scenario", "parse_override", "resolved_dict",
    "select_arms", "validate_data", "LoadSpec", "SloSpec", "rate_label", "BaselineFromSpec", "StopSpec",
]
