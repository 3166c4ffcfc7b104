"""A one-node Slurm (munged + slurmctld + slurmd) in a temporary folder, for the Slurm tier.

Everything lives under one folder: the config (found through ``SLURM_CONF``), the munge
key and socket, spool, logs and pid files. Nothing under /etc changes. The daemons are
stopped by the pids in their pid files. See ../shared/docs/SLURM.md for the origin of the
configuration. Usable by hand: ``python tests/helpers/slurm_cluster.py DIR`` starts one and prints
the ``SLURM_CONF`` to export.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
# A requeued job is held until its old credential expires: cred_expire, 120 s by default.
# 10 s lets a requeue test finish in about a minute; production clusters keep the default.
# The held job then waits for the next full scheduling pass (every 60 s by default): 2 s here.
CRED_EXPIRE_S = 10


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unavailable() -> str | None:
    """Why this machine cannot run the cluster, or None."""
    missing = [d for d in (*DAEMONS, "sbatch", "squeue", "scancel", "scontrol") if not shutil.which(d)]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} missing): "
                "apt-get install -y slurm-wlm munge (scripts/test.sh does it as root)")
    if os.geteuid() != 0:
        return "the single-node Slurm runs its daemons as root; run the tests as root"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no 'munge' user (the munge package creates it)"
    return None


class Cluster:
    def __init__(self, root: Path, cpus: int = 2, memory_mb: int = 8000, gpus: int = 2):
        self.root = Path(root)
        self.gpus = gpus  # fake GPUs: device nodes under root/dev (see _fake_gpus)
        self.host = socket.gethostname().split(".")[0]
        self.cpus, self.memory_mb = cpus, memory_mb
        self.conf = self.root / "slurm.conf"
        self.munge_dir = self.root / "munge"
        self.socket = self.munge_dir / "munge.socket"
        self.ports = (_free_port(), _free_port())

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def _fake_gpus(self) -> int:
        """Make ``gpus`` character devices (NVIDIA's major 195) under root/dev for gres.conf.

        slurmd takes a GPU's index from its File= name and sets CUDA_VISIBLE_DEVICES from
        it. A Count= without File= does not do: slurmd 22.05 then reports 0 GPUs and
        slurmctld marks the node INVAL. The nodes are never opened, so they need no driver.
        Returns 0 (no GPUs declared) where mknod is not allowed, so that the rest of the tier
        still runs."""
        dev = self.root / "dev"
        dev.mkdir(exist_ok=True)
        try:
            for i in range(self.gpus):
                p = dev / f"nvidia{i}"
                if not p.exists():
                    os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(195, i))
        except OSError:
            return 0
        (self.root / "gres.conf").write_text(f"NodeName={self.host} Name=gpu File={dev}/nvidia[0-{self.gpus - 1}]\n")
        return self.gpus

    def _write(self) -> None:
        r = self.root
        for d in ("spool/slurmd", "spool/slurmctld", "log", "run"):
            (r / d).mkdir(parents=True, exist_ok=True)
        self.gpus = self._fake_gpus() if self.gpus else 0
        gres = ("GresTypes=gpu\n", f" Gres=gpu:{self.gpus}") if self.gpus else ("", "")
        self.conf.write_text(f"""\
ClusterName=sbtest
SlurmctldHost={self.host}
AuthType=auth/munge
AuthInfo=socket={self.socket},cred_expire={CRED_EXPIRE_S}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
SlurmUser=root
SlurmctldPort={self.ports[0]}
SlurmdPort={self.ports[1]}
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd.pid
SlurmdSpoolDir={r}/spool/slurmd
StateSaveLocation={r}/spool/slurmctld
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
JobCompType=jobcomp/none
KillWait=5
MinJobAge=300
SchedulerParameters=sched_interval=2,bf_interval=2
DefMemPerCPU=1000
{gres[0]}NodeName={self.host} CPUs={self.cpus} RealMemory={self.memory_mb}{gres[1]} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")

    def start(self, timeout: float = 60) -> None:
        self._write()
        m = self.munge_dir
        m.mkdir(mode=0o700, exist_ok=True)
        pw = pwd.getpwnam("munge")
        key = m / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o400)
        for p in (m, key):
            os.chown(p, pw.pw_uid, pw.pw_gid)
        # munged refuses a socket folder that others can write; the temp root must be
        # traversable by the munge user.
        self.root.chmod(0o755)
        res = subprocess.run(
            ["runuser", "-u", "munge", "--", "munged", f"--key-file={key}", f"--socket={self.socket}",
             f"--pid-file={m}/munged.pid", f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed",
             "--force"],
            capture_output=True, text=True, timeout=30)
        env = {**os.environ, **self.env}
        for argv in (["slurmctld", "-c"], ["slurmd"]):  # -c: no old state
            if res.returncode == 0:
                res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        if res.returncode != 0:
            raise RuntimeError(f"{res.args[0]} did not start: {res.stderr or res.stdout}\n{self.logs()}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip() in ("idle", "mixed", "allocated"):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the node never became idle: {out.stdout} {out.stderr}\n{self.logs()}")

    def logs(self) -> str:
        out = []
        for p in sorted(self.root.glob("log/*.log")) + [self.munge_dir / "munged.log"]:
            if p.exists():
                out.append(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:])
        return "\n".join(out)

    def stop(self) -> None:
        for pidfile in (self.root / "run/slurmd.pid", self.root / "run/slurmctld.pid", self.munge_dir / "munged.pid"):
            try:
                pid = int(pidfile.read_text().strip())
            except (OSError, ValueError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


if __name__ == "__main__":
    c = Cluster(Path(sys.argv[1]))
    if len(sys.argv) > 2 and sys.argv[2] == "stop":
        c.stop()
    else:
        c.start()
        print(f"export SLURM_CONF={c.conf}")
