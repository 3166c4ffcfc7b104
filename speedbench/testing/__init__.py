"""Test tools: a scripted fake OpenAI-style server. Never used to produce measurements.

The server classes load lazily so that ``python -m speedbench.testing.fake_server``
does not import its own module twice (runpy warns about that).
"""

from importlib import import_module
from typing import Any

from speedbench.testing.script import FakeConfig, Fault, plan, true_per_user_tps

_LAZY = {
    "Emission": "speedbench.testing.fake_state",
    "FakeServer": "speedbench.testing.hosting",
    "FakeProcess": "speedbench.testing.hosting",
}

__all__ = ["Emission", "FakeConfig", "FakeProcess", "FakeServer", "Fault", "plan", "true_per_user_tps"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'speedbench.testing' has no attribute {name!r}")
