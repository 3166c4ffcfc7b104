"""A tracking URI's setup problems as the user's, not as speedbench bugs (``export
--format mlflow`` and the scenario's ``mlflow:``).

Three things went wrong before: MLflow's refusals (a ``file://`` store, an unknown scheme,
a server that refuses the credentials) ended as "internal error"; an unreachable server
was retried by MLflow for minutes before that; and a ``sqlite://`` URI put the artifacts in
``./mlruns`` under the current folder, outside the one the URI names. So before the
client is made the URI is checked here (a server that answers, a database folder that
exists and can be written), a new experiment keeps its artifacts beside its database,
and what MLflow raises about the URI, the connection or permissions becomes exit 2 (fix
the URI or start the server) or exit 3 (the tracking store cannot be written).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from speedbench.errors import OutputError, SpeedbenchError, UsageError
from speedbench.results.files import OUTPUT_ERRNOS, output_error

PROBE_TIMEOUT_S = 5.0  # connect timeout of the one request that says whether a server answers
DENIED = ("PERMISSION_DENIED", "UNAUTHENTICATED", "CUSTOMER_UNAUTHORIZED")
CREDENTIALS = "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN"
FILE_STORE_FIX = ("use a database, --tracking-uri sqlite:///FOLDER/mlflow.db, or a server, http://HOST:PORT "
                  "(MLFLOW_ALLOW_FILE_STORE=true keeps MLflow's old file store)")


def shown(uri: str) -> str:
    """The URI as messages print it: a password in it is replaced."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///rel.db`` or ``sqlite:////abs.db`` URI (None for
    another scheme, or an in-memory database)."""
    if not uri.startswith("sqlite://"):
        return None
    rest = uri[len("sqlite://"):].split("?", 1)[0]
    path = rest[1:] if rest.startswith("/") else rest
    return Path(path) if path and path != ":memory:" else None


def artifact_location(uri: str) -> str | None:
    """Where a new experiment keeps its artifacts: for a database file, ``mlartifacts``
    beside it (MLflow's default is ./mlruns in the current folder); else MLflow's own."""
    db = sqlite_path(uri)
    return (db.resolve().parent / "mlartifacts").as_uri() if db else None


def check_uri(uri: str) -> None:
    """Before the client is made: an http(s) server must answer, a database's folder must
    exist and be writable. Raises UsageError (exit 2) or OutputError (exit 3)."""
    scheme = urlsplit(uri).scheme
    if scheme in ("http", "https"):
        _answers(uri)
    db = sqlite_path(uri)
    if db is not None:
        _writable_folder(db, uri)


def _answers(uri: str) -> None:
    """One request without MLflow's retries (7 with backoff: minutes against a closed
    port). Any answer will do, an error status or a TLS complaint included: MLflow judges
    those; only no answer at all is refused here."""
    import requests  # function-local: an MLflow dependency, needed only with mlflow

    try:
        requests.get(uri, timeout=(PROBE_TIMEOUT_S, 2 * PROBE_TIMEOUT_S), allow_redirects=False, stream=True).close()
    except requests.exceptions.SSLError:
        return
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout, requests.exceptions.InvalidURL) as e:
        why = "no answer within the timeout" if isinstance(e, requests.exceptions.Timeout) else _reason(e)
        raise UsageError(f"cannot reach the MLflow tracking server at {shown(uri)} ({why}) -- fix: start the server "
                         "(`mlflow server --host HOST --port PORT`) or pass the right --tracking-uri") from None


def _reason(e: BaseException) -> str:
    """The innermost cause of a connection error, short ("Connection refused")."""
    while e.__context__ is not None and e.__context__ is not e:
        e = e.__context__
    text = str(e).rsplit("] ", 1)[-1] if str(e) else type(e).__name__
    return text.splitlines()[0][:200]


def _writable_folder(db: Path, uri: str) -> None:
    folder = db.resolve().parent
    if not folder.exists():
        raise UsageError(f"the folder of the MLflow database {db} in {shown(uri)} does not exist -- fix: create it "
                         f"(mkdir -p {folder}) or correct the URI")
    if not folder.is_dir():
        raise output_error(OSError(errno.ENOTDIR, "a file where its folder should be"), db)
    if not os.access(folder, os.W_OK | os.X_OK) or (db.exists() and not os.access(db, os.W_OK)):
        raise output_error(OSError(errno.EACCES, "permission denied"), db)


def setup_error(e: BaseException, uri: str) -> SpeedbenchError | None:
    """What MLflow raised as the user's error, when it is about the URI, the connection or
    permissions; None for anything else (then it is a bug, and says so)."""
    if isinstance(e, OSError) and e.errno in OUTPUT_ERRNOS:
        return output_error(e, Path(e.filename or ".")) if e.filename else None
    code, text = str(getattr(e, "error_code", "")), str(getattr(e, "message", "") or e)
    first = text.strip().splitlines()[0][:300] if text.strip() else type(e).__name__
    if type(e).__module__.split(".")[0] != "mlflow":
        return None
    if code in DENIED:
        return OutputError(f"the MLflow tracking server at {shown(uri)} refused to write ({code}: {first}) -- "
                           f"fix: credentials that may write to it ({CREDENTIALS}), or another --experiment")
    if "MLFLOW_ALLOW_FILE_STORE" in text:
        return UsageError(f"MLflow no longer writes a file store such as {shown(uri)} -- fix: {FILE_STORE_FIX}")
    if "unsupported URI" in text or "Could not find a registered" in text:
        return UsageError(f"MLflow does not know the tracking URI {shown(uri)} -- fix: use http(s)://HOST:PORT of a "
                          "server or sqlite:///FOLDER/mlflow.db")
    if text.startswith("API request to") and ("failed with exception" in text or "timeout" in text):
        return UsageError(f"lost the MLflow tracking server at {shown(uri)} ({first}) -- fix: check that it is "
                          "running and reachable, then export again (it updates the same MLflow runs)")
    return None
