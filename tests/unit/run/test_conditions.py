"""The point's conditions sampler, over a planted /proc: the host's busy cores, the
engine's process group, the client's own CPU, and the rest as other work."""

from __future__ import annotations

from pathlib import Path

from speedbench.run import conditions

HZ = 100.0


def _stat(pid: int, pgrp: int, utime: int, stime: int) -> str:
    # pid (comm with spaces) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
    return f"{pid} (python3 -m x) S 1 {pgrp} {pgrp} 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0\n"


def _proc(root: Path, *, busy: int, idle: int, steal: int, engine: tuple[int, int], client: int,
          other_pid_jiffies: int, load: float) -> Path:
    """/proc/stat (user nice system idle iowait irq softirq steal), loadavg, self, and
    three processes: two of the engine's group 500 and one outsider."""
    root.mkdir(parents=True, exist_ok=True)
    # the aggregate line is ignored: the run's own CPUs (its affinity) are summed, split here
    # over cpu0 and cpu1; cpu7 is a neighbour's core outside the affinity, busy all along
    half = lambda x: x // 2  # noqa: E731
    (root / "stat").write_text("cpu  9 9 9 9 9 9 9 9 0 0\n"
                               + "".join(f"cpu{i} {half(busy)} 0 0 {half(idle)} 0 0 0 {half(steal)} 0 0\n"
                                         for i in (0, 1))
                               + f"cpu7 {busy * 5} 0 0 0 0 0 0 0 0 0\n")
    (root / "loadavg").write_text(f"{load} 1.0 0.5 2/300 1234\n")
    for pid, pgrp, jiffies in ((500, 500, engine[0]), (501, 500, engine[1]), (900, 900, other_pid_jiffies)):
        (root / str(pid)).mkdir(exist_ok=True)
        (root / str(pid) / "stat").write_text(_stat(pid, pgrp, jiffies, 0))
    (root / "self").mkdir(exist_ok=True)
    (root / "self" / "stat").write_text(_stat(42, 42, client, 0))
    return root


def test_between_splits_the_hosts_cpu_into_engine_client_and_other(tmp_path, monkeypatch):
    monkeypatch.setattr(conditions, "_affinity", lambda: {0, 1})
    proc = tmp_path / "proc"
    _proc(proc, busy=1000, idle=1000, steal=0, engine=(100, 100), client=50, other_pid_jiffies=0, load=0.5)
    a = conditions.take(500, proc=proc)
    # 10 s on 2 CPUs = 2000 jiffies: 1500 busy (engine 800, client 200, so other 500), 20 stolen
    _proc(proc, busy=2500, idle=1480, steal=20, engine=(500, 500), client=250, other_pid_jiffies=500, load=3.0)
    b = conditions.take(500, proc=proc)
    b.wall_ns = a.wall_ns + 10_000_000_000
    c = conditions.between(a, b, hz=HZ)
    assert c["engine_cores"] == 0.8
    assert c["client_cores"] == 0.2
    assert c["host_busy_cores"] == 1.5
    assert c["other_cores"] == 0.5
    assert c["steal_share"] == 0.01
    assert c["load_1m"] == [0.5, 3.0]
    assert c["not_checked"] == []


def test_an_engine_that_is_not_ours_is_named_not_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(conditions, "_affinity", lambda: {0, 1})
    proc = _proc(tmp_path / "proc", busy=10, idle=10, steal=0, engine=(1, 1), client=1, other_pid_jiffies=0, load=1)
    a = conditions.take(None, proc=proc)
    _proc(proc, busy=20, idle=20, steal=0, engine=(1, 1), client=2, other_pid_jiffies=0, load=1)
    b = conditions.take(None, proc=proc)
    b.wall_ns = a.wall_ns + 1_000_000_000
    c = conditions.between(a, b, hz=HZ)
    assert c["engine_cores"] is None and "other_cores" not in c
    assert c["not_checked"] == ["engine CPU (not a local launch)"]


def test_group_pids_reads_the_process_group_past_a_name_with_spaces(tmp_path):
    proc = _proc(tmp_path / "proc", busy=1, idle=1, steal=0, engine=(1, 1), client=1, other_pid_jiffies=0, load=1)
    assert sorted(conditions.group_pids(500, proc)) == [500, 501]


def test_a_worker_that_started_mid_point_counts_from_zero(tmp_path, monkeypatch):
    monkeypatch.setattr(conditions, "_affinity", lambda: {0, 1})
    proc = _proc(tmp_path / "proc", busy=100, idle=100, steal=0, engine=(10, 10), client=1, other_pid_jiffies=0,
                 load=1)
    a = conditions.take(500, proc=proc)
    a.engine = {500: 10}  # 501 was not there yet
    b = conditions.take(500, proc=proc)
    b.wall_ns = a.wall_ns + 1_000_000_000
    assert conditions.between(a, b, hz=HZ)["engine_cores"] == 0.1  # 501's 10 jiffies, 500's none


def test_no_proc_leaves_the_point_alone(tmp_path):
    snap = conditions.take(500, proc=tmp_path / "no-such-proc")
    assert snap.cpu_total is None and snap.engine is None
    c = conditions.between(snap, snap)
    assert "host CPU (no /proc/stat)" in c["not_checked"]


def test_the_gpu_watch_samples_the_arms_gpus_and_counts_other_processes():
    from speedbench.run.gpu_watch import GpuWatch

    answers = iter(["0, GPU-a, 1980, 690.5, 60\n", "1234, GPU-a\n999, GPU-a\n77, GPU-z\n",
                    "0, GPU-a, 1410, [N/A], 71\n", "1234, GPU-a\n"])
    calls = []

    def runner(argv):
        calls.append(argv)
        return next(answers, None)
    w = GpuWatch([0], 1234, runner=runner, own_pids=lambda: {1234})
    w._sample()
    w._sample()
    assert calls[0][-2:] == ["-i", "0"]
    assert w.summary() == {"gpus": [{"index": 0, "sm_clock_mhz": 1695.0, "power_w": 690.5, "temperature_c": 71.0,
                                     "samples": 2}], "gpu_other_processes": 1}
    assert GpuWatch([0], None, runner=lambda argv: None).summary() == {}
