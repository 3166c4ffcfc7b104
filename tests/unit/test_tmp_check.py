"""scripts/tmp_check.py: what scripts/test.sh counts as left in /tmp by the suite."""

from __future__ import annotations

import os
from pathlib import Path

from scripts.tmp_check import is_suite_name, leftovers, paths_in_use, suite_entries


def test_the_names_a_suite_makes_and_the_lock_it_keeps():
    for name in ("pytest-of-root", "vllm_dist_3f2a", "speedbench-slurm-x1", "speedbench-tests.Ab12",
                 "sb-k2j3h4g5", "0b7e6a52-1f4e-4c1d-9a4e-6f0d2c1b3a4e"):
        assert is_suite_name(name), name
    for name in ("speedbench-vllm.lock", "tmpabc123", "systemd-private-x", "apt.log", "0b7e6a52"):
        assert not is_suite_name(name), name


def test_only_this_users_suite_entries_are_listed(tmp_path: Path):
    for name in ("sb-one", "vllm_dist_ab", "other.log", "speedbench-vllm.lock"):
        (tmp_path / name).touch()
    assert suite_entries(tmp_path) == {"sb-one", "vllm_dist_ab"}
    assert suite_entries(tmp_path, uid=os.getuid() + 1) == set()


def test_new_entries_are_left_unless_a_process_still_uses_them():
    tmp = Path("/tmp")
    before = {"pytest-of-root", "sb-old"}
    after = {"pytest-of-root", "sb-old", "sb-new", "sb-1", "speedbench-slurm-live"}
    in_use = ["/tmp/sb-12/vllm.sock", "slurmctld -D -f /tmp/speedbench-slurm-live/slurm.conf"]
    assert leftovers(before, after, in_use, tmp) == ["sb-1", "sb-new"]
    assert leftovers(before, before, in_use, tmp) == []


def test_this_process_is_seen_using_its_folder():
    assert os.getcwd() in paths_in_use()
