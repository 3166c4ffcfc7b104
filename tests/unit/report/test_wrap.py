"""report/wrap.py: prose wrapped between words to the console's width, commands never."""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text

from speedbench.report.wrap import print_paste, print_wrapped, wrap

PATH = "/tmp/pytest-of-ci/pytest-7/test_a_long_name0/out/cpu_tiny/20261202T090342Z-35386c"


def _plain(line: str, width: int) -> list[str]:
    return [t.plain for t in wrap(Text(line), width)]


def _printed(width: int, *lines: str) -> list[str]:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None)
    for line in lines:
        print_wrapped(console, line)
    return buf.getvalue().splitlines()


def test_breaks_at_spaces_and_indents_continuations_under_the_line():
    line = "  base c=1: 4/4 requests in 0.7 s, 23 output tok/s, 0 errors  (ETA 2 s: 1 server starts left)"
    out = _plain(line, 40)
    assert out == ["  base c=1: 4/4 requests in 0.7 s, 23",
                   "      output tok/s, 0 errors  (ETA 2 s:",
                   "      1 server starts left)"]
    assert " ".join(" ".join(out).split()) == " ".join(line.split())  # no word lost, none split


def test_a_line_that_fits_is_left_as_it_is():
    line = "step 1: baseline + eagle3  (two spaces kept)"
    assert _plain(line, 80) == [line]


def test_a_word_wider_than_the_line_stands_alone_and_whole():
    out = _plain(f"records: {PATH} (records.jsonl)", 40)
    assert out == ["records:", f"    {PATH}", "    (records.jsonl)"]


def test_newlines_and_blank_lines_are_kept():
    assert _plain("\ncost (estimated)\n  total: 3 min", 80) == ["", "cost (estimated)", "  total: 3 min"]


def test_markup_and_styles_survive_the_breaks():
    text = Text.from_markup("[red]arm a failed[/red]: the server died while starting")
    parts = wrap(text, 20)
    assert [p.plain for p in parts] == ["arm a failed: the", "    server died", "    while starting"]
    assert [(s.start, s.end, str(s.style)) for s in parts[0].spans] == [(0, 12, "red")]


def test_printed_lines_fit_the_console_and_rich_does_not_wrap_them_again():
    out = _printed(30, "[yellow]warning[/yellow]: the client's event loop lagged up to 1.8 ms while requests "
                   "were in flight")
    assert out[0] == "warning: the client's event"
    assert all(len(line) <= 30 for line in out)
    out = _printed(30, f"see {PATH}")
    assert out == ["see", f"    {PATH}"]  # rich would have cut the path at column 30


def test_a_command_to_paste_is_never_wrapped():
    buf = io.StringIO()
    print_paste(Console(file=buf, width=40, color_system=None), f"speedbench run --resume {PATH}", indent="  ")
    assert buf.getvalue() == f"  speedbench run --resume {PATH}\n"


def test_a_quoted_command_is_never_broken():
    from rich.text import Text

    from speedbench.report.wrap import wrap

    cmd = "`speedbench run --resume results/cpu_tiny/20261207T050859Z-b7ab3b`"
    lines = [t.plain for t in wrap(Text(f"warning: points.json is missing -- fix: {cmd} measures it again"), 40)]
    assert any(cmd in ln for ln in lines), lines
    assert all(len(ln) <= 40 for ln in lines if cmd not in ln), lines
