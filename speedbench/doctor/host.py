"""The rest of the host: a fixed port, room for the run folder, the docker engine and
image, the workload source and the fixtures folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from speedbench.doctor.base import Check, Context
from speedbench.errors import SpeedbenchError
from speedbench.fixtures.weights import verify
from speedbench.results.files import free_space, human_bytes
from speedbench.workload import check_source as workload_check

def check_output_space(ctx: Context) -> list[Check]:
    """A full disk stops a run (exit 3) and resume finishes it, but it is cheaper to know."""
    if ctx.output is None:
        return []
    need = ctx.output_need
    if need is None:
        return [Check("output space", "ok", f"{ctx.output}: the run's size is unknown until the data is loaded")]
    folder, _ = free_space(ctx.output)
    free = ctx.facts.disk_free(folder)
    have = f"{human_bytes(free)} free in {folder}, the run writes up to about {human_bytes(need)}"
    if free < need:
        return [Check("output space", "warn", have,
                      "free space there or pass -o/--output on a larger disk; a full disk stops the run "
                      "(exit 3) and `speedbench run --resume RUN` finishes it once there is room")]
    return [Check("output space", "ok", have)]


def check_port(ctx: Context) -> list[Check]:
    server = ctx.scenario.server
    if server.port is None or not ctx.arms:
        return []
    if ctx.facts.port_free(server.host, server.port):
        return [Check("port", "ok", f"{server.host}:{server.port} is free")]
    return [Check("port", "fail", f"{server.host}:{server.port} is in use",
                  "stop what listens there, or set server.port: null so speedbench picks a free port per server")]


def check_docker(ctx: Context) -> list[Check]:
    server = ctx.scenario.server
    if server.launcher != "docker" or not ctx.arms:
        return []
    image = server.docker.image
    rc, info = ctx.facts.docker(["info", "--format", "{{json .}}"])
    if rc == 127:
        return [Check("docker engine", "fail", "docker is not installed (not on PATH)",
                      "install Docker Engine, or use launcher: local with vLLM installed here")]
    if rc != 0:
        first = info.splitlines()[0] if info else f"exit status {rc}"
        return [Check("docker engine", "fail", f"`docker info` failed: {first}",
                      "start the daemon (sudo systemctl start docker) or add yourself to the docker group")]
    out = [Check("docker engine", "ok", "the docker engine answers")]
    rc, text = ctx.facts.docker(["image", "inspect", "--format", "{{.Id}}", image])
    if rc == 0:
        out.append(Check("docker image", "ok", f"{image} is present locally"))
    else:
        out.append(Check("docker image", "warn",
                         f"{image} is not present locally: `docker run` pulls it at launch (many GB), "
                         "which counts against ready_timeout_s; whether it can be pulled is not checked offline",
                         f"docker pull {image}"))
    if "cpu" not in image.lower():
        out.append(_gpu_runtime(info))
    return out


def _gpu_runtime(info: str) -> Check:
    try:
        data = json.loads(info)
    except ValueError:
        data = {}
    runtimes = sorted((data.get("Runtimes") or {}).keys()) if isinstance(data, dict) else []
    # Newer setups expose GPUs through CDI (nvidia.com/gpu devices) instead of a runtime.
    cdi = "nvidia.com/gpu" in info
    if "nvidia" in runtimes or cdi:
        how = "the nvidia runtime" if "nvidia" in runtimes else "CDI nvidia.com/gpu devices"
        return Check("docker gpu runtime", "ok", f"docker has {how}")
    return Check("docker gpu runtime", "fail",
                 f"docker info shows no nvidia runtime (runtimes: {', '.join(runtimes) or 'none listed'}): `--gpus` "
                 "will fail",
                 "install the NVIDIA Container Toolkit, then: sudo nvidia-ctk runtime configure --runtime=docker && "
                 "sudo systemctl restart docker")


def check_workload(ctx: Context) -> list[Check]:
    check_source: Callable[[Any], Any] | None = ctx.facts.check_source
    if check_source is None:
        check_source = workload_check
    spec = ctx.scenario.workload
    try:
        res = check_source(spec)
    except SpeedbenchError as e:
        return [Check("workload", "fail", f"{spec.source}: {e}",
                      "see the message; `speedbench data` prepares SPEED-Bench")]
    except Exception as e:  # a loader bug must not hide the other checks
        return [Check("workload", "warn", f"the workload check itself failed: {type(e).__name__}: {e}")]
    ok, message = bool(getattr(res, "ok", False)), str(getattr(res, "message", "") or "")
    n_rows, n_ph = getattr(res, "n_rows", None), getattr(res, "n_placeholder", 0) or 0
    message, fix = _split_fix(message)
    counts = f"{n_rows} rows, {n_ph} placeholders" if n_rows is not None else ""
    detail = f"{spec.source}: {message or counts}"
    if ok:
        return [Check("workload", "ok", detail)]
    return [Check("workload", "fail", detail,
                  fix or "prepare the data (`speedbench data`, see README) or change workload.source")]


def _split_fix(message: str) -> tuple[str, str]:
    """Errors here read "problem -- fix: remedy"; the table keeps the two apart."""
    problem, _, fix = message.partition(" -- fix: ")
    return problem, fix


def check_fixtures(ctx: Context) -> list[Check]:
    folder = ctx.scenario.fixtures
    if not folder:
        return []
    try:
        verify()  # the committed weights the fixtures are assembled from (5.5 MB: fast)
    except SpeedbenchError as e:
        return [Check("fixtures", "fail", *_split_fix(str(e)))]
    if Path(folder).is_dir():
        return [Check("fixtures", "ok", f"{folder} exists; committed weights match SHA256SUMS")]
    return [Check("fixtures", "ok", f"{folder} does not exist yet: `speedbench run` assembles it on first run "
                  "(committed weights match SHA256SUMS)")]
