"""Secrets: which names and flags hold one, hiding their values, and putting them back.

Everything that leaves the process (the dry-run, provenance.json, the saved scenario,
logs of the command line) goes through here, so one rule decides what counts as a
secret. ``--resume`` reads the saved scenario back and :func:`restore_secrets` takes
the hidden values from this process's environment again.

Pure functions over plain data; nothing here imports the rest of speedbench except the
error type.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from speedbench.errors import UsageError

REDACTED = "***redacted***"

# Environment variables whose values are never saved or printed. An engine's own (vLLM's
# API key) is its launch's ``secret_env``; every *_KEY name is a secret anyway (below).
SECRET_ENV_NAMES = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HUGGINGFACE_TOKEN",
    "OPENAI_API_KEY",
    "NGC_API_KEY",
    "WANDB_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
)
# Suffixes and words that mark a secret; suffixes rather than substrings so that
# e.g. TOKENIZERS_PARALLELISM is not redacted.
_SECRET_SUFFIXES = ("TOKEN", "_KEY", "APIKEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIALS")
_SECRET_WORDS = ("SECRET", "PASSWORD")
# vLLM flags whose value is a secret, whatever the environment says.
SECRET_FLAGS = ("--api-key", "--hf-token", "--ssl-keyfile-password")
# Values shorter than this are not scrubbed from free text: names such as
# TOKENIZERS_PARALLELISM count as secret-looking, and replacing "false" everywhere
# would corrupt the recorded command. Real tokens and keys are far longer.
MIN_SECRET_LEN = 8


def is_secret_name(name: str) -> bool:
    """An environment variable (or scenario key) whose value must not be shown."""
    up = name.upper()
    return up in SECRET_ENV_NAMES or up.endswith(_SECRET_SUFFIXES) or any(w in up for w in _SECRET_WORDS)


def is_secret_flag(key: str) -> bool:
    """A vLLM flag (``api-key``, ``--api_key``, ...) whose value is a secret."""
    return "--" + str(key).lstrip("-").replace("_", "-") in SECRET_FLAGS


def redact_env(env: Mapping[str, str], extra_names: Iterable[str] = ()) -> dict[str, str]:
    """Secret-named values (and those in ``extra_names``) replaced by the marker."""
    extra = tuple(extra_names)
    return {k: (REDACTED if is_secret_name(k) or k in extra else v) for k, v in env.items()}


def secret_values(env: Mapping[str, str], extra_names: Iterable[str] = ()) -> list[str]:
    """The values of secret-named variables in ``env``: what to scrub from free text."""
    extra = tuple(extra_names)
    return [v for k, v in env.items() if is_secret_name(k) or k in extra]


def redact_argv(argv: list[str], secret_values: Iterable[str] = ()) -> list[str]:
    """The command line with secret flags' values and known secret values hidden."""
    out: list[str] = []
    hide_next = False
    values = [v for v in secret_values if len(v) >= MIN_SECRET_LEN]
    for item in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _ = item.partition("=")
        if flag in SECRET_FLAGS:
            if eq:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(item)
                hide_next = True
            continue
        for v in values:
            item = item.replace(v, REDACTED)
        out.append(item)
    return out


def scrub(obj: Any, secret_values: Iterable[str]) -> Any:
    """A JSON-able object with every long-enough secret value replaced, wherever it is."""
    text = json.dumps(obj)
    for v in secret_values:
        if len(v) >= MIN_SECRET_LEN:
            text = text.replace(json.dumps(v)[1:-1], REDACTED)
    return json.loads(text)


def _holders(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """(where, section) for every scenario section with env/args: the server and each arm."""
    out: list[tuple[str, Any]] = [("server", data.get("server"))]
    out += [(f"arms.{a.get('name')}", a) for a in data.get("arms") or [] if isinstance(a, dict)]
    return out


def redact_scenario(resolved: dict[str, Any]) -> dict[str, Any]:
    """The scenario as saved in the run folder: values of secret-named environment
    variables (HF_TOKEN, *_KEY, ...) and of secret flags (--api-key, ...) replaced by
    the marker. Run folders get shared; :func:`restore_secrets` undoes this on resume."""
    out = copy.deepcopy(resolved)
    for _, h in _holders(out):
        if not isinstance(h, dict):
            continue
        if isinstance(h.get("env"), dict):
            h["env"] = redact_env(h["env"])
        if isinstance(h.get("args"), dict):
            h["args"] = {k: (REDACTED if is_secret_flag(k) and v not in (None, False, True) else v)
                         for k, v in h["args"].items()}
    return out


def redact_override(override: str) -> str:
    """A ``--set key.path=value`` as it may be saved: the value hidden when the last key
    names a secret."""
    key, eq, _ = override.partition("=")
    last = key.rsplit(".", 1)[-1]
    return f"{key}={REDACTED}" if eq and (is_secret_name(last) or is_secret_flag(last)) else override


def restore_secrets(data: dict[str, Any], environ: Mapping[str, str] | None = None) -> None:
    """Put back, in place, what :func:`redact_scenario` hid: a redacted environment value
    comes from ``environ`` (this process's environment); a redacted flag must be given
    again with ``--set``. UsageError says which."""
    environ = os.environ if environ is None else environ
    for where, h in _holders(data):
        if not isinstance(h, dict):
            continue
        for name, value in (h.get("env") or {}).items():
            if value == REDACTED:
                if name not in environ:
                    raise UsageError(f"{where}.env.{name} was redacted in the saved scenario -- fix: "
                                     f"export {name} before resuming")
                h["env"][name] = environ[name]
        for key, value in (h.get("args") or {}).items():
            if value == REDACTED:
                raise UsageError(f"{where}.args.{key} was redacted in the saved scenario -- fix: "
                                 f"pass it again with --set {where}.args.{key}=VALUE")
