"""The docker launcher: the same server arguments, run in the engine's image (the
scenario's server.docker.image), whose entrypoint starts the server: the engine says which
of its arguments the image takes (LaunchSpec.image_args).

The container always listens on 8000; the host side gets the port speedbench chose.
Secrets travel by name only (``-e HF_TOKEN``): docker copies the value from its own
environment, so it never appears in argv, in ``ps`` or in saved provenance.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from speedbench.engine.base import LaunchSpec
from speedbench.secrets import SECRET_ENV_NAMES, is_secret_name
from speedbench.engine.local import LocalServer, ProgressFn
from speedbench.scenario import DockerSpec

CONTAINER_PORT = 8000
# the Hugging Face cache of an image that runs as root (the hub libraries' default there)
CONTAINER_CACHE = "/root/.cache/huggingface"
# Every container speedbench starts carries these labels, so `speedbench doctor` can find
# the ones an earlier run left behind (a killed harness cannot run its `docker stop`) and
# tell them from the containers of a run still in progress (its owner pid is alive).
LABEL = "speedbench"  # value "1"; the filter `docker ps --filter label=speedbench`
LABEL_KEYS = ("speedbench.scenario", "speedbench.arm", "speedbench.port", "speedbench.owner_host",
              "speedbench.owner_pid")


def container_labels(scenario: str, arm: str, port: int, *, owner_pid: int | None = None,
                     owner_host: str | None = None) -> dict[str, str]:
    values = (scenario, arm, str(port), owner_host or socket.gethostname(), str(owner_pid or os.getpid()))
    return {LABEL: "1", **dict(zip(LABEL_KEYS, values))}


def gpus_flag(gpus: list[int] | None) -> list[str]:
    if gpus is None:
        return ["--gpus", "all"]
    # The inner double quotes are part of the value: docker parses --gpus as CSV, and
    # the commas between device ids would otherwise split it.
    return ["--gpus", '"device=' + ",".join(str(g) for g in gpus) + '"']


def docker_run_argv(spec: LaunchSpec, docker: DockerSpec, port: int, name: str,
                    *, pass_env: Iterable[str] = (), labels: dict[str, str] | None = None) -> list[str]:
    """``docker run`` argv for one arm. ``pass_env``: extra variable names to forward by name.
    ``labels``: container labels (default :func:`container_labels` of ``name``'s arm)."""
    argv = ["docker", "run", "--rm", "--name", name]
    for key, value in (labels or container_labels("", spec.arm, port)).items():
        argv += ["--label", f"{key}={value}"]
    argv += ["--ipc=host", *gpus_flag(spec.gpus)]
    if docker.shm_size:
        argv += ["--shm-size", docker.shm_size]
    host = f"[{spec.host}]" if ":" in spec.host else spec.host
    argv += ["-p", f"{host}:{port}:{CONTAINER_PORT}"]
    argv += ["-v", f"{os.path.expanduser(docker.cache_dir)}:{CONTAINER_CACHE}"]
    # spec.env, not env_with_gpus(): GPUs are renumbered from 0 inside the container, so
    # a host CUDA_VISIBLE_DEVICES would point at the wrong devices (or none).
    forwarded: list[str] = []
    for key, value in {**spec.measurement_env, **spec.env}.items():
        argv += ["-e", key if is_secret_name(key) else f"{key}={value}"]
        forwarded.append(key)
    for key in pass_env:
        if key not in forwarded:
            argv += ["-e", key]
            forwarded.append(key)
    argv += list(docker.extra_args)
    argv.append(docker.image)
    # Inside the container the server listens on every interface at CONTAINER_PORT, given
    # as the launch gives any port (argv_with_port); the image's entrypoint starts the
    # server, so the engine strips its own command (LaunchSpec.image_args: vLLM's `vllm serve`).
    inside = replace(spec, host="0.0.0.0").argv_with_port(CONTAINER_PORT)
    argv += spec.image_args(inside) if spec.image_args is not None else inside
    return argv


def container_name(scenario: str, arm: str, port: int) -> str:
    raw = f"speedbench-{scenario}-{arm}-{port}"
    return re.sub(r"[^A-Za-z0-9_.-]", "-", raw)


class DockerServer(LocalServer):
    """A LocalServer whose process is ``docker run``; stopped with ``docker stop``."""

    def __init__(self, spec: LaunchSpec, docker: DockerSpec, log_path: Path, *, scenario: str,
                 ready_timeout_s: float, grace_s: float, on_progress: ProgressFn | None = None,
                 api_key: str | None = None):
        super().__init__(spec, log_path, ready_timeout_s=ready_timeout_s, grace_s=grace_s,
                         on_progress=on_progress, api_key=api_key)
        self.docker = docker
        self.scenario = scenario
        self._name: str | None = None

    @property
    def container(self) -> str | None:
        return self._name

    def command(self, port: int) -> list[str]:
        self._name = container_name(self.scenario, self.spec.arm, port)
        # Forward the usual hub tokens and the engine's own secrets when the user has them
        # set; by name only.
        names = dict.fromkeys((*SECRET_ENV_NAMES, *self.spec.secret_env))
        present = [k for k in names if k in os.environ and k not in self.spec.env]
        labels = container_labels(self.scenario, self.spec.arm, port)
        return docker_run_argv(self.spec, self.docker, port, self._name, pass_env=present, labels=labels)

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.spec.env)  # values for the `-e NAME` forwarded by name
        return env

    def cleanup_argv(self) -> list[str]:
        # Killing the `docker run` client leaves the container running: stop it by name.
        return ["docker", "stop", "-t", str(int(self.grace_s)), self._name] if self._name else []

    def stop(self) -> None:
        if self._name and self.pid is not None and not self._stopped:
            try:
                subprocess.run(["docker", "stop", "-t", str(int(self.grace_s)), self._name],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=self.grace_s + 30, check=False)
            except (OSError, subprocess.TimeoutExpired):
                pass  # the group kill below still ends the client; --rm removes the container
        super().stop()
