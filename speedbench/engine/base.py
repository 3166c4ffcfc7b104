"""The engine interface: everything speedbench needs from an inference engine, and the
launch spec every launcher (local process, docker, external endpoint) starts from.

The run holds one engine (``Plan.engine``, from :func:`speedbench.engine.engine_for`)
and reaches the engine's specifics only through it: the launch command and measurement
flags, the per-request fields and stream (the token-ids field, its usage and choice figures), the
Prometheus scrape and spec-decode counters, the speculative config's flag, provenance,
the hardware record and the doctor's checks. Packages below engine/ (client/, loadgen/,
results/) declare the part they call as a Protocol of their own and are handed the engine.

vLLM is the one engine (engine/vllm/). A second one (SGLang, TensorRT-LLM) is one new
folder, ``engine/sglang/``, whose class implements :class:`Engine`, and one more entry in
``speedbench.engine.ENGINES`` (or ``server.engine: module:Class`` in a scenario).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from speedbench.client.scrape import SpecCounters
from speedbench.engine.preflight import Check, Context, Facts, Installed
from speedbench.engine.server_log import Death
from speedbench.engine.provenance import Provenance
from speedbench.records import RequestRecord
from speedbench.scenario import ArmSpec, Scenario

CheckFn = Callable[[Context], list[Check]]


def argv_value(argv: list[str], *flags: str) -> str | bool | None:
    """The value after ``--flag`` (or in ``--flag=value``); True for a bare flag; None if absent."""
    for i, tok in enumerate(argv):
        for flag in flags:
            if tok == flag:
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                return nxt if nxt is not None and not nxt.startswith("--") else True
            if tok.startswith(flag + "="):
                return tok.split("=", 1)[1]
    return None


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value given to ``flag`` (``--flag v`` or ``--flag=v``); None when absent or bare."""
    value = argv_value(argv, flag)
    return value if isinstance(value, str) else None


@dataclass
class LaunchSpec:
    """Everything needed to start one arm's server, before a port is chosen."""

    arm: str
    argv: list[str]  # without --host/--port; the measurement flags come last
    env: dict[str, str] = field(default_factory=dict)  # only what the scenario sets
    host: str = "127.0.0.1"
    port: int | None = None
    gpus: list[int] | None = None
    base_url: str | None = None  # external endpoint: nothing to launch
    measurement: list[str] = field(default_factory=list)  # the measurement flags at argv's end
    measurement_env: dict[str, str] = field(default_factory=dict)  # speedbench's, apart from env
    # variables naming a folder the server keeps its sockets and temporary files in: a
    # local launcher points each at a fresh folder of the server's own, removed when it stops
    scratch_env: tuple[str, ...] = ()
    # What the engine read from its own flags: the model name the server will serve, and the
    # key it will demand (its --api-key or its environment's), which the client then sends.
    # The key is never shown (repr) nor written (secrets.py).
    served_model: str | None = None
    server_key: str | None = field(default=None, repr=False)
    # Environment variables the engine reads a secret from (its API key): a container is
    # passed each by name when it is set (docker.py), as the hub tokens are.
    secret_env: tuple[str, ...] = ()
    # Lines the engine writes to its log when its engine process is gone while its API
    # server still runs (the launcher then stops it: engine/local.py).
    death_marks: tuple[str, ...] = ()
    # The engine's reading of its server's log after a death: (log, argv) -> the cause, or
    # None when the log names none (vLLM's: engine/vllm/diagnose.py); None: no reader.
    diagnose: Callable[[str, list[str]], Death | None] | None = field(default=None, repr=False, compare=False)
    # The server arguments in the engine's image, whose entrypoint starts its server (the
    # docker launcher): argv less the engine's own command. None: argv as it is.
    image_args: Callable[[list[str]], list[str]] | None = field(default=None, repr=False, compare=False)

    def argv_with_port(self, port: int) -> list[str]:
        return [*self.argv, "--host", self.host, "--port", str(port)]

    def env_with_gpus(self) -> dict[str, str]:
        env = {**self.measurement_env, **self.env}
        if self.gpus is not None and "CUDA_VISIBLE_DEVICES" not in env:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpus)
        return env

    def shell(self, port: int | None = None) -> str:
        argv = self.argv_with_port(port) if port is not None else self.argv
        return shlex.join(argv)


class Engine(Protocol):
    """One inference engine: how to start it, what it reports and how to read it."""

    name: str  # as ``server.engine`` names it ("vllm")

    # -- launching (run/plan.py, run/arms.py, run/session.py)
    def launch_spec(self, sc: Scenario, arm: ArmSpec, gpus: list[int] | None = None) -> LaunchSpec:
        """The argv and environment that start this arm's server (measurement flags last)."""
        ...

    def provenance(self, sc: Scenario, arm: ArmSpec, launch: LaunchSpec, argv: list[str],
                   env: Mapping[str, str], base_url: str | None = None) -> Provenance:
        """The arm's provenance (engine version, argv, env redacted, draft, hardware); its
        ``saved`` is what provenance.json holds for the arm."""
        ...

    def read_provenance(self, saved: Mapping[str, Any]) -> Provenance:
        """An arm's provenance.json entry read back (old folders' shapes too)."""
        ...

    def hardware(self) -> dict[str, Any]:
        """The machine this process runs on, as provenance records it (host.json)."""
        ...

    # -- the per-request stream (client/extensions.py's StreamExtensions)
    token_ids_field: str  # the request field asking for per-chunk token ids ("" if it has none)
    chunk_ids_field: str  # the field of a streamed choice that holds its token ids ("" if none)

    def request_fields(self, exact_length: bool, templated: bool) -> dict[str, Any]:
        """The body fields asking for exactly ``max_tokens`` tokens and for a prompt taken
        as it is (the chat template rendered by the client); workload/chat.py adds them."""
        ...

    def usage_options(self, per_chunk: bool) -> dict[str, Any]:
        """The ``stream_options`` fields beside ``include_usage``: usage per chunk or once."""
        ...

    def read_usage(self, obj: dict, usage: dict, rec: RequestRecord) -> None:
        """The engine's own figures beside the usage counts (engine timing, spec stats)."""
        ...

    def read_choice(self, choice: dict, rec: RequestRecord) -> None:
        """The engine's own figures inside one choice of an event."""
        ...

    def read_event(self, obj: dict, rec: RequestRecord) -> None:
        """The engine's own figures at an event's top level (the prompt's token ids)."""
        ...

    # -- the output check (run/output_check.py): the target's distribution at a prefix
    def margin_request(self, model: str, prompt_ids: list[int], prefix: list[int], top: int) -> tuple[str, dict] | None:
        """(path, body) of a request for the target's ``top`` most likely next tokens after
        ``prompt_ids + prefix``, by token id, generating one token; None if it has none."""
        ...

    def read_top(self, body: Any) -> dict[int, float] | None:
        """The answer to :meth:`margin_request`: {token id: logprob}, None if unreadable."""
        ...

    # -- Prometheus (loadgen/job.py's Metrics; results/summary.py and exports)
    settle_prefixes: tuple[str, ...]  # the lines two scrapes must agree on to be settled

    async def scrape(self, base_url: str) -> str:
        """The server's Prometheus text."""
        ...

    def spec_counters(self, text: str) -> SpecCounters:
        """Spec-decode counter totals from one scrape's text (each series kept for deltas)."""
        ...

    # -- the speculative config (report/drift.py's optimal-k table)
    speculative_flag: str  # the launch flag that takes a speculative config

    def speculative_args(self, config: dict[str, Any]) -> list[str]:
        """The launch arguments that set ``config`` (the flag and its value)."""
        ...

    # -- calibration keys (calibration/store.py's system_args)
    not_system_args: frozenset[str]  # launch args that leave the step cost as it is (reporting, port, draft)

    # -- the doctor (doctor/__init__.py runs these among its own)
    # (name, check) in table order: one named after a doctor's row (doctor/__init__.py's
    # SECTIONS: "cpu kernel", "quantization", ...) runs in that row, the others first
    doctor_checks: tuple[tuple[str, CheckFn], ...]
    draft_checks: CheckFn  # one row per speculative arm; records what each draft needs in the Context

    def gpus_per_server(self, argv: list[str], env: Mapping[str, str]) -> int:
        """GPUs one server started with ``argv`` and ``env`` spans (0 when it runs on the CPU)."""
        ...

    def installed(self, sc: Scenario, facts: Facts) -> Installed:
        """Which build of the engine the scenario will run, as far as can be told."""
        ...
