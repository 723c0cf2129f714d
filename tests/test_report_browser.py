"""The design review in a real browser: headless Chromium renders report.html to a screenshot, a
DOM dump and a printed PDF, with its network log kept to prove that the page asks for nothing.

Chromium comes from the system's package manager (Debian's ``chromium``; scripts/test.sh installs
it); without it these tests are skipped, saying why.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from topo.cli import main

from .conftest import EXAMPLES

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium)")

#: Flags of every run: headless without a GPU or sandbox (as in a container), a fresh profile, and
#: none of the browser's own background traffic; names resolve to nothing, so no request can leave.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--host-resolver-rules=MAP * ~NOTFOUND"]


def chromium(tmp: Path, page: Path, *what: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run Chromium on ``page``; the URLs the page asked for (its network log) come back too."""
    netlog = tmp / f"net-{len(list(tmp.glob('net-*')))}.json"
    proc = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", f"--log-net-log={netlog}",
                           *what, page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc, page_requests(json.loads(netlog.read_text()))


def page_requests(log: dict) -> list[str]:
    """URLs of the requests a page made: URL requests whose initiator is the page (a file:// page
    is the opaque origin ``null``), not the browser's own (``not an origin``)."""
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        if event["type"] == start and "url" in params and params.get("initiator") != "not an origin":
            urls.append(params["url"])
    return urls


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    out = tmp / "d"
    result = CliRunner().invoke(main, ["build", "--gpus", "1024", "-o", str(out), "-q", "--no-configs"])
    assert result.exit_code == 0, result.output
    return tmp, out


def test_the_network_check_sees_a_page_that_asks_for_something(tmp_path):
    # the control: a page that loads an image and a stylesheet from elsewhere is caught
    page = tmp_path / "control.html"
    page.write_text('<html><body><p>x</p><img src="http://probe.invalid/x.png">'
                    '<link rel="stylesheet" href="https://fonts.probe.invalid/a.css"></body></html>')
    _, asked = chromium(tmp_path, page, "--dump-dom")
    assert sorted(asked) == ["http://probe.invalid/x.png", "https://fonts.probe.invalid/a.css"]


def test_the_report_renders_whole_and_asks_for_nothing(built):
    tmp, out = built
    shot = tmp / "report.png"
    _, asked = chromium(tmp, out / "report.html", "--window-size=1280,9000", f"--screenshot={shot}")
    assert asked == []
    from PIL import Image
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 9000)
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200  # text, tables, pictures: not a blank page
    counts = {rgb: n for n, rgb in colours}
    white = counts.get((255, 255, 255), 0)
    assert white < 0.97 * image.size[0] * image.size[1]
    # the diagram drew: spine boxes and the leaves of three rails in their colours
    for hex_colour in ("#fdd0a2", "#ff7f0e", "#2ca02c", "#d62728"):
        rgb = tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
        assert counts.get(rgb, 0) > 200, hex_colour
    # the plots drew: the utilisation bars and the busbw line are the first design colour
    assert counts.get((0x1f, 0x77, 0xb4), 0) > 5000


def test_the_dom_has_the_diagram_the_plots_and_the_tables(built):
    tmp, out = built
    proc, asked = chromium(tmp, out / "report.html", "--dump-dom")
    dom = proc.stdout
    assert asked == []
    assert dom.count("<svg") == 3 and dom.count("<table") >= 10
    for figure in ("figure-fabric", "figure-busbw", "figure-links"):
        assert f'id="{figure}"' in dom
    for section in ("key", "warnings", "spec", "tiers", "diagram", "bom", "hops", "bisection", "allreduce",
                    "links", "what-if"):
        assert f'<section id="{section}">' in dom
    # the plots' text is text the browser laid out: axis labels and the algorithms NCCL picks
    for text in ("busbw (GB/s)", "message size (bytes)", "nvlstree", "utilisation (% of the link direction"):
        assert text in dom


def test_the_report_prints(built):
    tmp, out = built
    pdf = tmp / "report.pdf"
    _, asked = chromium(tmp, out / "report.html", f"--print-to-pdf={pdf}", "--no-pdf-header-footer")
    assert asked == []
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF")
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", data))
    assert 4 <= pages <= 30


def test_a_comparison_renders_with_its_marks(tmp_path):
    out = tmp_path / "cmp"
    result = CliRunner().invoke(main, ["report", str(EXAMPLES / "h100-1024.yaml"),
                                       str(EXAMPLES / "rack-768-oversub3.yaml"), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    proc, asked = chromium(tmp_path, out / "report.html", "--dump-dom")
    assert asked == []
    dom = proc.stdout
    assert dom.count('class="num better"') >= 3 and dom.count('class="num worse"') >= 3
    assert '<section id="verdict">' in dom and dom.count("<svg") == 4  # two plots, two diagrams
