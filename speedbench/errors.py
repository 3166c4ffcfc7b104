"""Exceptions that the CLI turns into exit codes without a traceback."""

import difflib
from collections.abc import Iterable


def did_you_mean(word: object, choices: Iterable[object]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``; "" when none is close:
    a message about an unknown key, arm or format points at the one meant."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


class SpeedbenchError(Exception):
    """Base class. ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class ScenarioError(SpeedbenchError):
    """A scenario, override or data file is invalid (exit code 2)."""

    exit_code = 2


class UsageError(SpeedbenchError):
    """Bad command-line use or unreadable input files (exit code 2)."""

    exit_code = 2


class OutputError(SpeedbenchError):
    """The output folder cannot be written: disk full, read-only, no permission (exit
    code 3). ``path`` is the file that failed; every complete record before it is kept."""

    exit_code = 3

    def __init__(self, message: str, path: object = None):
        super().__init__(message)
        self.path = path


class ServerError(SpeedbenchError):
    """A server failed to start, or died (exit code 1)."""

    exit_code = 1
