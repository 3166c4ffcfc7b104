"""The dashboard and a run report in a real headless Chromium, from file:// with no network:
plots render, nothing planted in a model name runs, and the page is not blank."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from tests.helpers.runfactory import make_history

from speedbench.report.dashboard import build_dashboard

pytestmark = pytest.mark.chromium

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--mute-audio"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("chromium is not installed (apt-get install -y chromium)")


class DomStats(HTMLParser):
    """Counts what matters in the dumped DOM: SVGs and their paths, scripts, images,
    attributes a planted script would set, and the title."""

    def __init__(self):
        super().__init__()
        self.svgs: list[int] = []  # path count per top-level svg
        self.depth = 0
        self.scripts = self.imgs = 0
        self.pwned_attrs: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            if self.depth == 0:
                self.svgs.append(0)
            self.depth += 1
        elif tag == "path" and self.depth:
            self.svgs[-1] += 1
        self.scripts += tag == "script"
        self.imgs += tag == "img"
        self.pwned_attrs += [k for k, _ in attrs if "pwned" in k]
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        if tag == "svg":
            self.depth -= 1
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def run_chromium(exe: str, url: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *extra, url],
                          capture_output=True, text=True, timeout=120, check=False)


def check_page(exe: str, page: Path, tmp: Path, title: str, min_svgs: int) -> None:
    url = page.resolve().as_uri()
    dom = run_chromium(exe, url, tmp, "--virtual-time-budget=3000", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    stats = DomStats()
    stats.feed(dom.stdout)
    assert len(stats.svgs) >= min_svgs
    assert all(n > 0 for n in stats.svgs), stats.svgs  # every plot drew something
    assert stats.scripts == 0 and stats.imgs == 0  # the planted markup stayed text
    assert stats.pwned_attrs == []  # and nothing ran to set its attribute
    assert stats.title.strip() == title and "PWNED" not in stats.title
    assert "document.title='PWNED'" in dom.stdout  # the planted text is shown, escaped

    shot = tmp / f"{page.stem}.png"
    res = run_chromium(exe, url, tmp, f"--screenshot={shot}", "--window-size=1280,2000", "--hide-scrollbars")
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    img = matplotlib.image.imread(str(shot))
    assert img.shape[0] == 2000 and img.shape[1] == 1280
    flat = img[..., :3].reshape(-1, 3)
    assert flat.std() > 0.05  # not a blank page
    colors = np.unique((flat[::37] * 255).astype(np.uint8), axis=0)
    assert len(colors) > 50  # text, tables and coloured plot lines


def test_dashboard_in_chromium(tmp_path):
    exe = chromium()
    runs = make_history(tmp_path / "results", n=3)
    d = build_dashboard(tmp_path / "results", tmp_path / "site")
    assert len(d.runs) == len(runs)
    check_page(exe, d.index, tmp_path, "speedbench dashboard", min_svgs=8)
    planted = runs[-1]
    report = tmp_path / "site" / "runs" / "cpu_tiny" / planted.name / "report.html"
    check_page(exe, report, tmp_path, f"speedbench · cpu_tiny · {planted.name}", min_svgs=5)


PLANTED = "<script>document.title='PWNED'</script><img src=x onerror=\"document.body.setAttribute('pwned',1)\">"


def test_verdict_block_fills_the_first_screen(tmp_path):
    """A reader's first 1366x768 screen shows the verdict block (its regression pills),
    with markup planted in the provenance shown as text, no script run, the CSP intact."""
    from tests.helpers.histories import Plant, write_history

    from speedbench.report.html import CSP

    exe = chromium()
    write_history(tmp_path / "results", 14, [Plant("eagle3", 11, "speedup", -0.12,
                                                    provenance={"vllm_version": PLANTED})])
    d = build_dashboard(tmp_path / "results", tmp_path / "site")
    url = d.index.resolve().as_uri()
    dom = run_chromium(exe, url, tmp_path, "--virtual-time-budget=3000", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    stats = DomStats()
    stats.feed(dom.stdout)
    assert stats.scripts == 0 and stats.imgs == 0 and stats.pwned_attrs == []
    assert stats.title.strip() == "speedbench dashboard"
    assert f'content="{CSP}"' in dom.stdout  # the policy is still in the live page
    assert dom.stdout.index('id="verdict"') < dom.stdout.index("Latest runs")
    assert "document.title='PWNED'" in dom.stdout  # the planted vLLM version, as text

    shot = tmp_path / "first.png"
    res = run_chromium(exe, url, tmp_path, f"--screenshot={shot}", "--window-size=1366,768", "--hide-scrollbars")
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    import matplotlib.image

    img = (matplotlib.image.imread(str(shot))[..., :3] * 255).round().astype(int)
    assert img.shape[:2] == (768, 1366)
    # the regression pill: #c62828 text on #fdecea; nothing else on this page uses that pink
    pink = np.all(np.abs(img - np.array([0xFD, 0xEC, 0xEA])) <= 2, axis=-1)
    rows = np.nonzero(pink.any(axis=1))[0]
    assert len(rows) > 0, "no regression pill in the first screen"
    assert rows.min() < 768
