"""What one run shares across its arms and points. Passed explicitly; nothing is global."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from speedbench.engine import Server
from speedbench.errors import OutputError
from speedbench.run.plan import Plan
from speedbench.records import PointKey
from speedbench.run.live import LiveProgress
from speedbench.results import RunDir
from speedbench.scenario import Scenario
from speedbench.results.tail import RecordTail
from speedbench.workload import Workload


@dataclass
class Prepared:
    """Inputs loaded before any server starts, so bad data fails in seconds."""

    workloads: dict[str, Workload]  # variant name ("" without variants) -> prompts
    tokenizer: Any = None  # a Hugging Face tokenizer, or None when the workload needs none

    @property
    def n_prompts(self) -> int:
        return len(next(iter(self.workloads.values())).measured)


@dataclass
class RunContext:
    scenario: Scenario
    plan: Plan
    run_dir: RunDir
    live: LiveProgress
    prepared: Prepared
    done_points: set[tuple[PointKey, int]]  # finished (point, repeat) rounds a resumed run keeps
    stop: threading.Event = field(default_factory=threading.Event)
    servers: list[Server] = field(default_factory=list)  # running now; Ctrl-C stops them
    lock: threading.Lock = field(default_factory=threading.Lock)
    failures: dict[str, str] = field(default_factory=dict)  # arm -> why it failed
    interrupted: bool = False  # Ctrl-C / SIGTERM seen; servers are being stopped
    # The run folder could not be written (disk full, read-only): the first such error.
    # Every arm stops; the session prints the folder, the free space and how to resume.
    output_error: OutputError | None = None
    # Sequential stopping: the baseline's records, read as they grow, shared by every look.
    base_records: RecordTail | None = None

    def output_failed(self, e: OutputError) -> None:
        with self.lock:
            if self.output_error is None:
                self.output_error = e
        self.stop.set()
