"""`surge report -o html` in headless Chromium (Debian's package, scripts/chromium.py) with the network off:
the page loads (title, summary table, a section per target in order), has one chart per target, and each
chart is painted: in the screenshot, the band of the chart's colours for each target has Surge's and the
incumbent's step lines across the plot, each stepping up where that target's series does. Also that the
network really is off under the runner's flags: a page's image and script from a local HTTP server load
without them and do not with them (the server sees no request).

The report is built through surge.report's pure API on synthetic traces (a Prometheus adds nothing to
how the page renders; tests/surge/test_report_e2e.py covers reading it)."""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from scripts import chromium
from surge.report.analysis import Trace, analyse
from surge.report.render import COLOURS, PAD, WIDTH, Entry, render
from surge.report.rerun import simulate_command
from surge.report.startup import Startup

pytestmark = pytest.mark.skipif(
    chromium.binary() is None, reason="chromium is not installed (scripts/setup.sh installs it)"
)

STEPS = 241  # an hour at 15 s
# Per target: the step index where the load rises above its target, Surge scales up and the incumbent
# does. Far enough apart (over 6 % of the plot) that each chart can be told from the others by its steps.
TARGETS = {"web": (60, 64, 80), "api": (100, 104, 120), "queue": (140, 144, 160)}
WINDOW = (1280, 4000)  # tall enough for the three targets' sections


def _trace(name: str, rise: int, surge_up: int, incumbent_up: int) -> Trace:
    times = [1_772_409_600.0 + 15 * i for i in range(STEPS)]
    # Other levels than Surge's: Surge's line, drawn last, would hide this one on the same levels.
    incumbent = [1.0 if i < incumbent_up else 5.0 for i in range(STEPS)]
    return Trace(
        namespace="shop",
        name=name,
        metric_name="requests",
        times=times,
        step=15.0,
        load=[50.0 if i < rise else 150.0 for i in range(STEPS)],
        target=[100.0] * STEPS,
        target_type="average",
        incumbent=incumbent,
        running=incumbent,
        surge=[2.0 if i < surge_up else 6.0 for i in range(STEPS)],
        max_replicas=[6.0] * STEPS,
    )


def _page(tmp_path: Path) -> Path:
    entries = []
    for name, steps in TARGETS.items():
        trace = _trace(name, *steps)
        start, end = int(trace.times[0]), int(trace.times[-1])
        command = simulate_command(trace, "http://prometheus:9090", start, end, 15)
        entries.append(Entry(analyse(trace, 30.0, 300.0), trace, command, Startup(30.0, "flag")))
    page = tmp_path / "report.html"
    page.write_text(render(entries, {"start": "a", "end": "b", "step": 15}, "html"))
    return page


def _painted(image: np.ndarray, colour: str) -> np.ndarray:
    """The pixels of `colour` drawn over white, anti-aliased or not: on the segment from white to the
    colour (within 24 of it, in RGB), at least 60 % of the way (a 1.5 px line covers some pixel 75 %);
    grey text, nearer some point of that segment than other colours are, is off it by far more."""
    line = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=float) - 255
    offset = image - 255
    share = offset @ line / (line @ line)
    off_line = np.linalg.norm(offset - share[..., None] * line, axis=2)
    return (share >= 0.6) & (off_line <= 24)


def _bands(rows: np.ndarray, gap: int = 80) -> list[tuple[int, int]]:
    """Runs of the given row indices, splitting where `gap` rows in a row hold none; within a chart the
    widest gap is between the lines' lowest level and the legend (under 60 px), between charts there are
    the next target's heading, table and command (hundreds)."""
    bands: list[tuple[int, int]] = []
    for row in rows.tolist():
        if bands and row - bands[-1][1] <= gap:
            bands[-1] = (bands[-1][0], row)
        else:
            bands.append((row, row))
    return bands


def _step_fraction(mask: np.ndarray) -> tuple[float, int, int]:
    """Where a step line steps up, as a fraction of its width, from the column holding most of its pixels
    (the vertical segment); also the line's width and the step's height in pixels."""
    columns = np.flatnonzero(mask.any(axis=0))
    left, right = int(columns.min()), int(columns.max())
    counts = mask.sum(axis=0)
    step = int(counts.argmax())
    return (step - left) / (right - left), right - left, int(counts[step])


def test_the_page_loads_offline_with_every_chart_painted(tmp_path: Path) -> None:
    rendered = chromium.load(_page(tmp_path), *WINDOW)

    dom = rendered.dom
    assert "<title>Surge shadow report</title>" in dom
    assert re.search(r"<h1>What Surge would have done</h1><p>[^<]*: 3 targets, 3 rises", dom)
    assert re.findall(r"<h2>([^<]*)</h2>", dom) == [f"shop/{name}" for name in TARGETS]
    assert len(re.findall(r'<svg class="chart"', dom)) == len(TARGETS)

    image = imread(io.BytesIO(rendered.png))[:, :, :3] * 255
    assert image.shape[:2] == (WINDOW[1], WINDOW[0])
    surge, incumbent = _painted(image, COLOURS["surge"]), _painted(image, COLOURS["incumbent"])
    bands = _bands(np.flatnonzero((surge | incumbent).any(axis=1)))
    assert len(bands) == len(TARGETS), f"chart bands at rows {bands}"

    plot_width = WIDTH - 2 * PAD
    for (top, bottom), (name, (_, surge_up, incumbent_up)) in zip(bands, TARGETS.items(), strict=True):
        for mask, up in ((surge[top : bottom + 1], surge_up), (incumbent[top : bottom + 1], incumbent_up)):
            fraction, width, height = _step_fraction(mask)
            assert width >= plot_width - 4, f"{name}: a line {width} px wide, the plot is {plot_width}"
            assert height >= 40, f"{name}: a step {height} px high"  # 2 to 6 pods of 6.6: 78 px
            assert fraction == pytest.approx(up / (STEPS - 1), abs=0.01), name


class _Server:
    """A local HTTP server serving an image and a script, counting the requests it gets."""

    def __init__(self) -> None:
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                body, kind = (
                    (b'document.documentElement.dataset.script = "ran";', "text/javascript")
                    if self.path.endswith(".js")
                    else (b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>', "image/svg+xml")
                )
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.http.server_address[1]


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    thread = threading.Thread(target=s.http.serve_forever, daemon=True)
    thread.start()
    yield s
    s.http.shutdown()
    s.http.server_close()


def _external_page(tmp_path: Path, port: int) -> Path:
    # The image by IP (the proxy must refuse it), the script by name (the resolver too).
    page = tmp_path / "external.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>external</title></head><body>"
        f'<img src="http://127.0.0.1:{port}/pixel.svg" onload="this.alt=\'loaded\'" '
        "onerror=\"this.alt='failed'\">"
        f'<script src="http://localhost:{port}/mark.js"></script></body></html>'
    )
    return page


def test_without_the_network_flags_the_external_image_and_script_load(
    tmp_path: Path, server: _Server
) -> None:
    dom = chromium.load(_external_page(tmp_path, server.port), 200, 100, network_off=False).dom
    assert 'alt="loaded"' in dom
    assert 'data-script="ran"' in dom
    assert server.requests == 2


def test_with_the_network_off_neither_loads_and_the_server_sees_no_request(
    tmp_path: Path, server: _Server
) -> None:
    dom = chromium.load(_external_page(tmp_path, server.port), 200, 100).dom
    assert 'alt="failed"' in dom
    assert "data-script" not in dom
    assert server.requests == 0


def test_a_run_past_its_timeout_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(chromium.ChromiumError, match=r"did not finish loading .* within 0\.001 s"):
        chromium.load(_page(tmp_path), 200, 100, timeout=0.001)


def test_a_missing_chromium_fails_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(chromium.ChromiumError, match="chromium is not installed"):
        chromium.load(_page(tmp_path), 200, 100)
