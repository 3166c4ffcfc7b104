"""The bundled sample: 36 coding prompts plus a few other categories, in SPEED-Bench's schema.

The prompts were written for speedbench (source ``speedbench-sample``); none is taken from
SPEED-Bench. They are short so that a CPU model with a 1024-token context can answer
them, and four coding rows are multi-turn. The sample exists so that the CPU scenario
and the tests run without any download; it is not a substitute for SPEED-Bench when
reproducing published numbers.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from speedbench.errors import ScenarioError
from speedbench.records import Prompt
from speedbench.scenario import VariantSpec, WorkloadSpec
from speedbench.workload.base import Source
from speedbench.workload.speed_bench import fingerprint
from speedbench.workload.speed_bench_rows import row_to_prompt

SAMPLE_FILE = "coding_sample.jsonl"
SOURCE_NAME = "speedbench-sample"


def load_sample() -> list[Prompt]:
    """Every sample row, in file order."""
    try:
        text = resources.files("speedbench").joinpath("data").joinpath(SAMPLE_FILE).read_text(encoding="utf-8")
    except (OSError, FileNotFoundError) as e:
        raise ScenarioError(
            f"the bundled sample speedbench/data/{SAMPLE_FILE} is missing ({e}) -- fix: reinstall "
            "speedbench; the file ships as package data"
        ) from None
    prompts = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            prompts.append(row_to_prompt(row, "", where=f"{SAMPLE_FILE}:{lineno}"))
    return prompts


class SampleSource(Source):
    name = "sample"
    counts_cheaply = True

    def read(self, spec: WorkloadSpec, config: str, *, base_dir: Path | None, variant: VariantSpec | None,
             tokenizer: Any) -> tuple[list[Prompt], list[str]]:
        return load_sample(), []

    def fingerprint(self, spec: WorkloadSpec, base_dir: Path | None) -> dict[str, object]:
        f = Path(str(resources.files("speedbench").joinpath("data").joinpath(SAMPLE_FILE)))
        return {"layout": "file", **fingerprint([f], f.parent)}


SOURCE = SampleSource()
