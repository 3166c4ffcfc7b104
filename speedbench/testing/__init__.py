"""Test tools: a scripted fake OpenAI-style server. Never used to produce measurements.

- script.py       FakeConfig, Fault, the scripted plan of each request
- fake_server.py  the server (``python -m speedbench.testing.fake_server``)
- fake_stream.py  its streamed answers (steps when due, faults, the usage chunk)
- fake_state.py   what it did per request (Emission), its counters and Prometheus text
- fake_sglang.py  its second wire (``--shape sglang``), which shares none of vLLM's names
- hosting.py      FakeServer (a background thread) and FakeProcess (a child process)

The server classes are imported from hosting.py itself, not re-exported here: importing
the package must not import fake_server, or ``python -m speedbench.testing.fake_server``
would import its own module twice (runpy warns about that).
"""

from speedbench.testing.script import FakeConfig, Fault, plan, true_per_user_tps

__all__ = ["FakeConfig", "Fault", "plan", "true_per_user_tps"]
