"""Shared test plumbing."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Two cores cannot host two vLLM servers: every test that starts one holds this lock,
# so concurrent pytest runs (developers, helpers) queue instead of starving each other.
VLLM_LOCK = Path("/tmp/speedbench-vllm.lock")


@pytest.fixture(scope="session")
def vllm_slot():
    with open(VLLM_LOCK, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
