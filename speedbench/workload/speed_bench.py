"""SPEED-Bench rows -> :class:`Prompt`: the hub dataset, or a local copy of it.

Where the rows come from:

* ``workload.path`` set: a local folder (or one file) holding parquet or JSONL files in
  the dataset's schema, or prepared by one of the public prepare scripts. The accepted
  layouts are :data:`LAYOUTS`, tried in that order. Rows may carry SPEED-Bench's
  ``turns`` or, as NeMo-Skills writes them, ``messages`` of user turns.
* ``workload.path`` unset: ``datasets.load_dataset("nvidia/SPEED-Bench", C, split="test")``,
  only when the ``datasets`` package is importable.

The rows in the hub may carry a placeholder instead of the prompt (sources that cannot
be redistributed); :mod:`speedbench.workload` refuses to benchmark those.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from speedbench.errors import ScenarioError
from speedbench.records import Prompt
from speedbench.scenario import VariantSpec, WorkloadSpec
from speedbench.workload.base import Source, SourceCheck
from speedbench.workload.speed_bench_rows import row_to_prompt

HUB_NAME = "nvidia/SPEED-Bench"
QUALITATIVE = "qualitative"
CONFIGS = (QUALITATIVE, "throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k", "throughput_32k")
# The input length each throughput config is built to (the dataset card sizes them so).
CONFIG_INPUT_TOKENS = {"throughput_1k": 1024, "throughput_2k": 2048, "throughput_8k": 8192,
                       "throughput_16k": 16384, "throughput_32k": 32768}
CATEGORIES = ("coding", "humanities", "math", "multilingual", "qa", "rag", "reasoning",
              "roleplay", "stem", "summarization", "writing")
PLACEHOLDER_PREFIX = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE"
DATA_SUFFIXES = (".parquet", ".jsonl")
DOCS = "docs/workloads.md"
# Model-Optimizer's examples/specdec_bench/prepare_data.py writes OUT/speed/C/test.parquet
# (OUT defaults to data/); users point workload.path at OUT or at OUT/speed.
SPECDEC_BENCH_DIR = "speed"

# (name, pattern for config C, where it comes from), in the order they are tried.
LAYOUTS: tuple[tuple[str, str, str], ...] = (
    ("file", "PATH is one .parquet or .jsonl file", "any export of one config"),
    ("hub", "PATH/C/**/*.parquet (or *.jsonl)",
     "the dataset repository itself (huggingface-cli download), or specdec_bench's OUT/speed"),
    ("specdec_bench", "PATH/speed/C/*.parquet",
     "Model-Optimizer examples/specdec_bench/prepare_data.py --output_dir PATH (default data/)"),
    ("file_per_config", "PATH/C.parquet or PATH/C.jsonl",
     "NeMo-Skills nemo_skills/dataset/speed-bench/prepare.py --output_dir PATH (one .jsonl per config, with messages)"),
    ("flat", "PATH/*.parquet or PATH/*.jsonl", "a folder that holds only this config"),
)

def check_config(config: str) -> str:
    if config not in CONFIGS:
        raise ScenarioError(
            f"workload.config: unknown SPEED-Bench config '{config}' -- fix: use one of {', '.join(CONFIGS)}"
        )
    return config


def is_placeholder(prompt: Prompt) -> bool:
    return any(t.lstrip().startswith(PLACEHOLDER_PREFIX) for t in prompt.turns)


def load(path: str | None, config: str, *, base_dir: Path | None = None) -> list[Prompt]:
    """All rows of one config in file order (no filtering, no placeholder check)."""
    check_config(config)
    if path:
        prompts: list[Prompt] = []
        for f in locate(resolve_path(path, base_dir), config).files:
            prompts.extend(row_to_prompt(r, config, where=str(f)) for r in read_file(f))
        return prompts
    return [row_to_prompt(r, config, where=f"{HUB_NAME}/{config}") for r in _load_hub(config)]


def resolve_path(path: str, base_dir: Path | None) -> Path:
    """Relative paths are taken from ``base_dir`` (the scenario's folder) when given."""
    p = Path(path).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    return p


@dataclass(frozen=True)
class Located:
    layout: str  # a name from LAYOUTS
    root: Path
    files: tuple[Path, ...]


def layouts_text(config: str) -> str:
    return "; ".join(f"{pat.replace('/C', '/' + config).replace('C.', config + '.')} ({src})"
                     for _, pat, src in LAYOUTS)


def locate(root: Path, config: str) -> Located:
    """Which layout ``root`` uses for ``config`` and the data files it holds (see LAYOUTS)."""
    if not root.exists():
        raise ScenarioError(
            f"workload.path: {root} does not exist -- fix: set workload.path to a local SPEED-Bench "
            f"copy in one of these layouts: {layouts_text(config)}; or remove it to read "
            f"{HUB_NAME} from the hub; see {DOCS} for how to prepare the data"
        )
    if root.is_file():
        if root.suffix not in DATA_SUFFIXES:
            raise ScenarioError(
                f"workload.path: {root} is neither .parquet nor .jsonl -- fix: use one of these layouts: "
                f"{layouts_text(config)}"
            )
        return Located("file", root.parent, (root,))
    for layout, sub in (("hub", root / config), ("specdec_bench", root / SPECDEC_BENCH_DIR / config)):
        if sub.is_dir():
            files = _data_files(sorted(sub.rglob("*")))
            if files:
                return Located(layout, root, tuple(files))
    for suffix in DATA_SUFFIXES:
        single = root / f"{config}{suffix}"
        if single.is_file():
            return Located("file_per_config", root, (single,))
    # A folder named after another config is almost certainly the wrong one.
    if root.name in CONFIGS and root.name != config:
        raise ScenarioError(
            f"workload.path: {root} holds config '{root.name}', but config '{config}' was asked for "
            f"-- fix: point workload.path at the parent folder or set workload.config: {root.name}"
        )
    others = [c for c in CONFIGS if c != config]
    direct = [f for f in _data_files(sorted(root.iterdir()))
              if not any(f.name.startswith(o) for o in others)]
    if direct:
        return Located("flat", root, tuple(direct))
    raise _no_layout(root, config)


def _no_layout(root: Path, config: str) -> ScenarioError:
    """A folder in none of the layouts: the error names the configs it does hold."""
    found = [c for c in CONFIGS
             if (root / c).is_dir() or (root / SPECDEC_BENCH_DIR / c).is_dir()
             or any((root / f"{c}{s}").is_file() for s in DATA_SUFFIXES)]
    return ScenarioError(
        f"workload.path: {root} is not a recognised layout for config '{config}'"
        + (f" (configs found there: {', '.join(found)})" if found else "")
        + f". Recognised layouts: {layouts_text(config)} -- fix: point workload.path at one of them; see {DOCS}"
    )


def fingerprint(files: Iterable[Path], root: Path) -> dict[str, Any]:
    """Content hashes of prepared data files, and one hash over all of them.

    The combined hash covers each file's path relative to ``root`` and its bytes, so a
    copy of the same data elsewhere hashes the same, and any edit or re-preparation
    changes it.
    """
    entries = []
    for f in sorted(set(files)):
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        rel = f.relative_to(root).as_posix() if f.is_relative_to(root) else f.name
        entries.append({"path": rel, "bytes": f.stat().st_size, "sha256": h.hexdigest()})
    total = hashlib.sha256()
    for e in entries:
        total.update(f"{e['path']}\0{e['sha256']}\n".encode())
    return {"sha256": total.hexdigest(), "files": entries}


def _data_files(paths: Iterable[Path]) -> list[Path]:
    paths = [p for p in paths if p.is_file()]
    # Prefer parquet: a folder holding both formats is usually one export in two forms.
    parquet = [p for p in paths if p.suffix == ".parquet"]
    return parquet or [p for p in paths if p.suffix == ".jsonl"]


def read_file(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq  # heavy: only for parquet data

        try:
            return pq.read_table(path).to_pylist()
        except Exception as e:  # pyarrow raises several unrelated types for bad files
            raise ScenarioError(f"{path}: cannot read parquet: {e}") from None
    return read_jsonl(path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"{path}: cannot read: {e}") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ScenarioError(f"{path}:{lineno}: invalid JSON: {e.msg} -- fix: one JSON object per line") from None
        if not isinstance(row, dict):
            raise ScenarioError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
        row.setdefault("_line", lineno)
        rows.append(row)
    return rows


def _load_hub(config: str) -> list[dict[str, Any]]:
    try:
        import datasets  # optional: only for reading straight from the hub
    except ImportError:
        raise ScenarioError(
            f"workload.path is not set and the 'datasets' package is not installed, so {HUB_NAME} "
            "cannot be read -- fix: set workload.path to a local copy of the data "
            f"(see {DOCS}), or `pip install datasets` on a machine that can reach the hub"
        ) from None
    try:
        ds = datasets.load_dataset(HUB_NAME, config, split="test")
    except Exception as e:  # network, auth and cache errors all land here
        raise ScenarioError(
            f"could not load {HUB_NAME} config '{config}' from the hub: {type(e).__name__}: {e} "
            f"-- fix: set workload.path to a local copy (see {DOCS})"
        ) from None
    return [dict(r) for r in ds]


class SpeedBenchSource(Source):
    name = "speed_bench"
    takes_configs = True

    def read(self, spec: WorkloadSpec, config: str, *, base_dir: Path | None, variant: VariantSpec | None,
             tokenizer: Any) -> tuple[list[Prompt], list[str]]:
        return load(spec.path, config, base_dir=base_dir), []

    def describe(self, spec: WorkloadSpec, config: str) -> str:
        return f"{HUB_NAME} config '{config}'"

    def fingerprint(self, spec: WorkloadSpec, base_dir: Path | None) -> dict[str, object]:
        if not spec.path:
            return {"sha256": "", "note": f"read from the hub ({HUB_NAME}); no local files to hash"}
        root = resolve_path(spec.path, base_dir)
        configs: dict[str, str] = {}
        files: list[Path] = []
        for config in dict.fromkeys((v.config if v and v.config else spec.config) for v in [None, *spec.variants]):
            found = locate(root, config)
            configs[config] = found.layout
            files.extend(found.files)
        base = root if root.is_dir() else root.parent
        return {"configs": configs, **fingerprint(files, base)}

    def unchecked(self, spec: WorkloadSpec) -> SourceCheck | None:
        """The doctor reads local data only: without ``workload.path`` the hub is not contacted."""
        if spec.path:
            return None
        if importlib.util.find_spec("datasets") is None:
            return SourceCheck(False, 0, 0, (
                f"workload.path is not set and 'datasets' is not installed, so {HUB_NAME} "
                f"cannot be read -- fix: set workload.path to a prepared local copy (see {DOCS})"))
        return SourceCheck(True, 0, 0, (
            f"rows will be read from the hub ({HUB_NAME}) at run time and are not checked "
            f"here; hub rows of some sources are placeholders -- set workload.path to a prepared copy (see {DOCS})"))


SOURCE = SpeedBenchSource()
