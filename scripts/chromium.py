"""Load a local HTML file in headless Chromium (Debian's `chromium`, scripts/setup.sh installs it) with the
network off, and return the DOM after the page's load event and a PNG screenshot of the window.

    rendered = load(Path("report.html"), width=1280, height=1600)
    rendered.dom, rendered.png

The network is off by two layers: every request, loopback included (`<-loopback>` removes the implicit
bypass), goes to a proxy at 127.0.0.1:9 where nothing listens, and every host name resolves to nothing.
tests/surge/test_report_chromium.py proves a page's external image and script do not load under them.
`network_off=False` is only that test's control: the same page does load them without the flags.

Chromium's own `--dump-dom` and `--screenshot` do this in one process run, so it needs no driver library:
Playwright and pyppeteer download a browser of their own (not Debian's, and not offline), Selenium needs
chromedriver besides, and none of them is needed for one page load.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_SECONDS = 60.0  # a cold start on a loaded machine takes a few seconds; a hang is a failure

NETWORK_OFF = (
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


class ChromiumError(RuntimeError):
    """Chromium is missing, crashed, timed out or wrote no screenshot."""


@dataclass(frozen=True, slots=True)
class Rendered:
    dom: str  # the DOM serialized after the load event
    png: bytes  # the window's screenshot, `width` x `height` pixels


def binary() -> str | None:
    """The path of Debian's chromium launcher, or None when it is not installed."""
    return shutil.which("chromium")


def load(
    page: Path, width: int, height: int, *, network_off: bool = True, timeout: float = TIMEOUT_SECONDS
) -> Rendered:
    """Load `page` in a `width` x `height` window (one device pixel per CSS pixel) and return its DOM and
    screenshot; raise ChromiumError with Chromium's last output lines if it does not finish cleanly."""
    chromium = binary()
    if chromium is None:
        raise ChromiumError("chromium is not installed (scripts/setup.sh installs Debian's package)")
    with tempfile.TemporaryDirectory(prefix="surge-chromium-") as scratch:
        shot = Path(scratch) / "screenshot.png"
        argv = [
            chromium,
            "--headless",
            "--no-sandbox",  # the sandbox refuses to run as root
            "--disable-gpu",
            "--disable-dev-shm-usage",  # a container's small /dev/shm crashes renderers
            f"--user-data-dir={Path(scratch) / 'profile'}",  # a throwaway profile: no state between runs
            "--force-device-scale-factor=1",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            f"--screenshot={shot}",
            "--dump-dom",
            *(NETWORK_OFF if network_off else ()),
            page.resolve().as_uri(),
        ]
        # Its own session, so a timeout kills the renderer and GPU processes too, not only the browser.
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            dom, errors = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise ChromiumError(f"chromium did not finish loading {page} within {timeout:g} s") from None
        if process.returncode != 0 or not shot.is_file():
            tail = "\n".join(errors.strip().splitlines()[-5:])
            raise ChromiumError(
                f"chromium exited with status {process.returncode} on {page}"
                + ("" if shot.is_file() else " and wrote no screenshot")
                + f":\n{tail}"
            )
        return Rendered(dom, shot.read_bytes())
