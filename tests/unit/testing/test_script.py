"""The fake server's script (speedbench/testing/script.py): the plan a request follows is
the truth the integration tests compare against, so its arithmetic is pinned here."""

from __future__ import annotations

import subprocess
import sys

from speedbench.testing import FakeConfig, plan, true_per_user_tps


def test_a_plan_cuts_the_last_step_to_the_output_cap():
    p = plan(FakeConfig(k=3, acceptance=(3,), output_tokens=10), max_tokens=10)
    assert sum(st.tokens for st in p.steps) == 10
    assert [st.tokens for st in p.steps][:3] == [1, 4, 4]  # the prefill token, then accepted + 1 per step


def test_true_per_user_tps_counts_tokens_after_the_first():
    assert true_per_user_tps([0, 1_000_000_000], [1, 4]) == 4.0
    assert true_per_user_tps([5], [1]) != true_per_user_tps([5], [1])  # NaN: nothing to time


def test_importing_the_package_leaves_the_server_module_alone():
    # `python -m speedbench.testing.fake_server` must not find its module already imported
    code = "import sys, speedbench.testing; print('speedbench.testing.fake_server' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
