"""speedbench/secrets.py: what counts as a secret, hiding it, and restoring it on resume."""

import json

import pytest

from speedbench.errors import UsageError
from speedbench.secrets import (
    REDACTED,
    is_secret_flag,
    is_secret_name,
    redact_argv,
    redact_env,
    redact_override,
    redact_scenario,
    restore_secrets,
    scrub,
)


def test_secret_names_and_flags():
    assert is_secret_name("HF_TOKEN") and is_secret_name("my_endpoint_key") and is_secret_name("DB_PASSWORD")
    assert not is_secret_name("TOKENIZERS_PARALLELISM") and not is_secret_name("VLLM_CPU_KVCACHE_SPACE")
    assert is_secret_flag("api-key") and is_secret_flag("--api_key") and not is_secret_flag("port")
    assert redact_env({"HF_TOKEN": "x", "A": "1", "EP": "k"}, ("EP",)) == {
        "HF_TOKEN": REDACTED, "A": "1", "EP": REDACTED}


def test_redact_argv():
    assert redact_argv(["--api-key", "abc", "--x", "tok-123456789"], ["tok-123456789"]) == [
        "--api-key", REDACTED, "--x", REDACTED]
    assert redact_argv(["--flag", "false"], ["false"]) == ["--flag", "false"]  # short values untouched


def test_scrub_and_overrides():
    assert scrub({"a": ["x-12345678-y"], "b": "false"}, ["12345678", "false"]) == {
        "a": [f"x-{REDACTED}-y"], "b": "false"}
    assert redact_override("server.env.HF_TOKEN=hf_abc") == f"server.env.HF_TOKEN={REDACTED}"
    assert redact_override("arms.a.args.api-key=k") == f"arms.a.args.api-key={REDACTED}"
    assert redact_override("workload.max_tokens=5") == "workload.max_tokens=5"


def test_resume_restores_redacted_env_from_environment(tmp_path, monkeypatch):
    """The saved scenario hides secret values; --resume takes them from the environment
    again, or says which variable to export."""
    data = {"server": {"env": {"HF_TOKEN": "hf_x1234567890", "OTHER": "1"}, "args": {"api-key": "k" * 12, "port": 1}},
            "arms": [{"name": "a", "env": {"WANDB_API_KEY": "w" * 12}}]}
    saved = redact_scenario(data)
    assert saved["server"]["env"] == {"HF_TOKEN": REDACTED, "OTHER": "1"}
    assert saved["server"]["args"] == {"api-key": REDACTED, "port": 1}
    assert saved["arms"][0]["env"]["WANDB_API_KEY"] == REDACTED
    monkeypatch.setenv("HF_TOKEN", "hf_from_env_0000")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    restored = json.loads(json.dumps(saved))
    restored["server"]["args"]["api-key"] = "given-again"  # as --set would
    with pytest.raises(UsageError, match="arms.a.env.WANDB_API_KEY was redacted .* export WANDB_API_KEY"):
        restore_secrets(restored)
    monkeypatch.setenv("WANDB_API_KEY", "w" * 12)
    restore_secrets(restored)
    assert restored["server"]["env"]["HF_TOKEN"] == "hf_from_env_0000"
    saved["server"]["env"]["HF_TOKEN"] = "x"
    with pytest.raises(UsageError, match=r"--set server.args.api-key=VALUE"):
        restore_secrets(saved)
