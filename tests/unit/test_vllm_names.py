"""Outside engine/vllm/ and testing/ (the fake server copies vLLM's wire), no code in
speedbench names vLLM's version key, request fields or variables: ``vllm_version``,
``ignore_eos``, ``continuous_usage_stats``, ``VLLM_``. Generic code reaches vLLM through
the run's engine (engine/base.py's Engine), so a second engine is one folder beside it.

Two names stay where they are, each for the reason :data:`EXCEPTIONS` gives.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "speedbench"
ALLOWED = (PACKAGE / "engine" / "vllm", PACKAGE / "testing")
NAMES = ("vllm_version", "ignore_eos", "continuous_usage_stats", "VLLM_")  # case-sensitive
EXCEPTIONS = {
    # `speedbench export --format vllm` writes vLLM's own benchmark format (vllm bench
    # serve's JSON), so it names vLLM's latency keys: the format is vLLM's, not the engine's.
    ("speedbench/results/exports.py", "VLLM_"): "the vLLM-format export",
    # The scenario key users write (workload.ignore_eos: the name the OpenAI-compatible
    # servers taught them). The code reads it as WorkloadSpec.exact_length.
    ("speedbench/scenario/model.py", "ignore_eos"): "the scenario's documented YAML key",
}


def vllm_names(root: Path = ROOT, allowed: tuple[Path, ...] = ALLOWED) -> list[str]:
    """``file:line: text`` of every vLLM name in ``root``/speedbench outside the ``allowed``
    folders and the exceptions."""
    found = []
    for f in sorted((root / "speedbench").rglob("*")):
        if not f.is_file() or "__pycache__" in f.parts or any(f.is_relative_to(a) for a in allowed):
            continue
        rel = f.relative_to(root).as_posix()
        try:
            text = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary data (parquet, weights) holds no code
        for i, line in enumerate(text.splitlines(), 1):
            if any(n in line and (rel, n) not in EXCEPTIONS for n in NAMES):
                found.append(f"{rel}:{i}: {line.strip()}")
    return found


def test_no_vllm_name_outside_engine_vllm():
    found = vllm_names()
    assert not found, ("vLLM names outside engine/vllm/ and testing/ (move them into the engine, or "
                       "name the exception in EXCEPTIONS with its reason):\n" + "\n".join(found))


def test_the_exceptions_are_still_there():
    # An exception that no longer holds its name is an allowance nobody needs: drop it.
    for (rel, name), why in EXCEPTIONS.items():
        assert name in (ROOT / rel).read_text(encoding="utf-8"), f"{rel} no longer names {name} ({why})"


def test_the_check_finds_a_name_and_lets_the_engine_and_the_exceptions_be(tmp_path):
    pkg = tmp_path / "speedbench"
    for folder in ("engine/vllm", "client", "results"):
        (pkg / folder).mkdir(parents=True)
    (pkg / "client" / "http.py").write_text('opts = {"continuous_usage_stats": True}\n')
    (pkg / "engine" / "vllm" / "payload.py").write_text('opts = {"continuous_usage_stats": True}\n')
    (pkg / "engine" / "local.py").write_text('key = env.get("VLLM_API_KEY")\n')
    (pkg / "results" / "exports.py").write_text('VLLM_LATENCIES = ("ttft",)  # vllm_version\n')
    assert vllm_names(tmp_path, (pkg / "engine" / "vllm",)) == [
        'speedbench/client/http.py:1: opts = {"continuous_usage_stats": True}',
        'speedbench/engine/local.py:1: key = env.get("VLLM_API_KEY")',
        'speedbench/results/exports.py:1: VLLM_LATENCIES = ("ttft",)  # vllm_version',  # only VLLM_ is excepted
    ]
