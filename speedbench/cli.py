"""The ``speedbench`` command: parsing and exit codes only.

Each subcommand lives in ``speedbench/commands/<name>.py`` and exposes
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``.

Exit codes: 0 success; 1 a run, gate or check failed (a regression, a server that
died, a failing doctor check); 2 bad usage or invalid input (scenario, data, flags);
3 the output folder cannot be written (disk full, read-only); 130 interrupted by
Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import sys
from pathlib import Path
from typing import NoReturn

from speedbench import __version__
from speedbench.commands import exit_codes_epilog
from speedbench.errors import SpeedbenchError, UsageError, did_you_mean
from speedbench.results.files import output_error

DEBUG_VAR = "SPEEDBENCH_DEBUG"  # set: an unexpected error shows its traceback

COMMANDS = ("validate", "run", "fixtures", "data", "doctor", "report", "compare", "gate", "dashboard", "changes",
            "export", "job", "gather", "status", "cancel", "submit", "verify", "calibrate")

DESCRIPTION = """\
speedbench measures what speculative decoding buys on vLLM: it launches a server
per arm (no speculation, EAGLE 3, EAGLE 3.1, ...), replays the same prompts at each
concurrency level and reports per-user throughput speedup and acceptance length
with 95% confidence intervals.

typical use:
  speedbench validate scenarios/kimi_coding.yaml      check a scenario
  speedbench run scenarios/cpu_tiny.yaml --dry-run    show the exact commands, start nothing
  speedbench run scenarios/cpu_tiny.yaml              run it; results land in results/
  speedbench report results/cpu_tiny/<run>            re-render a finished run
  speedbench gate results/cpu_tiny/<run>              fail CI on regressions

exit codes: 0 ok, 1 failed run/gate/check, 2 invalid input or usage,
            3 output folder not writable (disk full, read-only), 130 interrupted
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 too; keep its usage line
        self.print_usage(sys.stderr)
        self.exit(2, f"speedbench: error: {message}{_did_you_mean(message)}\n")


def _did_you_mean(message: str) -> str:
    """argparse's "invalid choice: 'csvv' (choose from ...)" gains the closest choice."""
    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if not m:
        return ""
    return did_you_mean(m.group(1), re.findall(r"'([^']*)'", m.group(2)))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="speedbench",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"speedbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"speedbench.commands.{name}").register(sub)
        sub.choices[name].epilog = exit_codes_epilog(name)  # one shape for every command
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SpeedbenchError as e:
        print(f"speedbench: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("speedbench: interrupted", file=sys.stderr)
        return 130
    except OSError as e:  # a file error that no loader or writer named: still one line, no traceback
        return _file_error(e)
    except Exception as e:  # noqa: BLE001 -- the last way out: a bug, said in one line
        if os.environ.get(DEBUG_VAR):
            raise
        print(f"speedbench: internal error: {type(e).__name__}: {e} -- this is a bug in speedbench; "
              f"{DEBUG_VAR}=1 shows the traceback", file=sys.stderr)
        return 1


def _file_error(e: OSError) -> int:
    """A full disk or read-only folder is the output's fault (exit 3, with the free space);
    any other file error is the input's (exit 2)."""
    if os.environ.get(DEBUG_VAR):
        raise e
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) and e.filename:
        err: SpeedbenchError = output_error(e, Path(e.filename))
    else:
        err = UsageError(f"{e.filename or 'a file'}: {e.strerror or e} -- check the path")
    print(f"speedbench: {err}", file=sys.stderr)
    return err.exit_code


if __name__ == "__main__":
    sys.exit(main())
