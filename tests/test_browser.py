"""The example gallery in a real browser: Debian's chromium, driven by Playwright.

What a user sees and an HTTP client cannot tell: every image loads and
decodes, the page does not move as images arrive (each ``<img>`` reserves its
box from its ``width``/``height`` attributes), and the browser's own
``Accept`` header gets AVIF for negotiated URLs and for ``<picture>``. A
full-page screenshot is kept under ``$OXIMG_ARTIFACTS`` (default: the test's
temporary directory), and its path printed.

Playwright only drives the browser: its own browser download (``playwright
install``) is never used. The gallery server is test_example_project's
gunicorn fixture, against a fresh var dir.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.services import require_program
from tests.test_example_project import server  # noqa: F401 (a fixture)

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page, Request, Response, Route

#: Flags for a quiet, reproducible headless run as root in CI: no sandbox
#: (root), no GPU, no background traffic to Google's services.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: A desktop window; the page's grid puts three or four figures in a row.
VIEWPORT = {"width": 1280, "height": 900}

#: Bound, in milliseconds, on the page and every image loading. A cold
#: server renders every thumbnail, two of them AVIF, on first request.
LOAD_TIMEOUT_MS = 25_000

#: Box positions and sizes may differ by subpixel rounding, no more.
BOX_TOLERANCE = 0.5

#: Each <img>'s box in document coordinates, its attributes, and whether it
#: has loaded, read in the page.
READ_IMAGES = """
() => Array.from(document.images, (img) => {
    const box = img.getBoundingClientRect();
    return {
        figure: img.closest("figure")?.id ?? "",
        src: img.getAttribute("src") ?? "",
        currentSrc: img.currentSrc,
        width: img.getAttribute("width"),
        height: img.getAttribute("height"),
        x: box.x + window.scrollX,
        y: box.y + window.scrollY,
        boxWidth: box.width,
        boxHeight: box.height,
        complete: img.complete,
        naturalWidth: img.naturalWidth,
    };
})
"""

#: Every stylesheet has arrived (a pending <link>'s ``sheet`` is null) and
#: fonts are settled: DOMContentLoaded does not wait for either, and a box
#: measured before them is not the box the page shows.
STYLES_READY = """
() => document.fonts.status === "loaded"
    && Array.from(document.querySelectorAll('link[rel="stylesheet"]')).every((link) => link.sheet)
"""

ALL_IMAGES_LOADED = """
() => Array.from(document.images).every((img) => img.complete && img.naturalWidth > 0)
"""


def playwright_or_skip() -> Any:
    """``playwright.sync_api.sync_playwright``; skip (fail in CI) when missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        message = "playwright is not installed (it is in the test dependency group)"
        if os.environ.get("OXIMG_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return sync_playwright


def artifacts_dir(tmp_path: Path) -> Path:
    """Where the screenshot goes: $OXIMG_ARTIFACTS, else this test's tmp_path."""
    directory = Path(os.environ.get("OXIMG_ARTIFACTS") or tmp_path)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


class ImageGate:
    """Holds back every thumbnail request until :meth:`open` is called.

    So the page can be measured with no image bytes arrived, whatever the
    server's speed, and measured again after all have: a box that changes
    in between is a layout shift.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[Route] = []
        self._open = False

    def route(self, route: Route) -> None:
        with self._lock:
            if not self._open:
                self._held.append(route)
                return
        route.continue_()

    def open(self) -> None:
        with self._lock:
            self._open = True
            held, self._held = self._held, []
        for route in held:
            route.continue_()


@dataclass
class ImageTraffic:
    """Thumbnail responses the browser received: its Accept header and the type served."""

    responses: dict[str, tuple[str, str]] = field(default_factory=dict)

    def record(self, response: Response) -> None:
        request: Request = response.request
        if request.resource_type != "image":
            return
        accept = request.all_headers().get("accept", "")
        content_type = response.all_headers().get("content-type", "")
        self.responses[response.url] = (accept, content_type)

    def for_path(self, path: str) -> tuple[str, str]:
        matches = [value for url, value in self.responses.items() if url.endswith(path)]
        assert matches, f"the browser never fetched {path}"
        return matches[0]


@dataclass
class Visit:
    """One visit of the gallery: the images before and after they loaded."""

    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    traffic: ImageTraffic
    screenshot: Path


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """Debian's chromium with a fresh profile directory."""
    executable = require_program("chromium")
    sync_playwright = playwright_or_skip()
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=VIEWPORT,
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="module")
def visit(
    browser_context: BrowserContext,
    server: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Visit:
    page: Page = browser_context.new_page()
    gate = ImageGate()
    traffic = ImageTraffic()
    page.route("**/img/**", gate.route)
    page.on("response", traffic.record)
    page.goto(server + "/", wait_until="domcontentloaded", timeout=LOAD_TIMEOUT_MS)
    page.wait_for_function(STYLES_READY, timeout=LOAD_TIMEOUT_MS)
    before = page.evaluate(READ_IMAGES)

    gate.open()
    # Lazy images load only near the viewport: bring each one into view.
    for image in page.locator("img").all():
        image.scroll_into_view_if_needed(timeout=LOAD_TIMEOUT_MS)
    page.wait_for_function(ALL_IMAGES_LOADED, timeout=LOAD_TIMEOUT_MS)
    page.wait_for_load_state("load", timeout=LOAD_TIMEOUT_MS)
    after = page.evaluate(READ_IMAGES)

    screenshot = artifacts_dir(tmp_path_factory.mktemp("browser")) / "gallery.png"
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(screenshot), full_page=True)
    print(f"gallery screenshot: {screenshot}")
    page.close()
    return Visit(before, after, traffic, screenshot)


def test_the_gallery_has_images_and_none_had_loaded_before_the_gate_opened(visit: Visit) -> None:
    assert len(visit.before) >= 10
    assert [image["naturalWidth"] for image in visit.before] == [0] * len(visit.before)


def test_every_image_loads_and_decodes(visit: Visit) -> None:
    broken = [image["src"] for image in visit.after if not image["naturalWidth"] > 0]
    assert broken == []


def test_every_image_declares_its_size(visit: Visit) -> None:
    for image in visit.after:
        assert image["width"] and int(image["width"]) > 0, image
        assert image["height"] and int(image["height"]) > 0, image


def test_no_image_moves_or_resizes_as_it_loads(visit: Visit) -> None:
    """Each box is reserved before any byte arrives (no cumulative layout shift)."""
    assert len(visit.before) == len(visit.after)
    for before, after in zip(visit.before, visit.after, strict=True):
        for key in ("x", "y", "boxWidth", "boxHeight"):
            assert abs(before[key] - after[key]) <= BOX_TOLERANCE, (after["figure"], key)


def test_each_box_has_the_aspect_ratio_of_its_attributes(visit: Visit) -> None:
    for image in visit.after:
        declared = int(image["width"]) / int(image["height"])
        shown = image["boxWidth"] / image["boxHeight"]
        # One pixel of rounding on a box a few hundred pixels tall.
        assert shown == pytest.approx(declared, rel=0.01), image["figure"]


def test_negotiated_image_is_avif_for_this_browser(visit: Visit) -> None:
    """format="auto": the URL names no format; Chromium's Accept gets AVIF."""
    auto = next(image for image in visit.after if image["figure"] == "auto")
    accept, content_type = visit.traffic.for_path(auto["src"])
    assert "image/avif" in accept
    assert content_type == "image/avif"


def test_picture_chooses_its_avif_source(visit: Visit) -> None:
    """<picture> lists AVIF first; the browser picks it and is served AVIF."""
    pictures = [image for image in visit.after if image["currentSrc"].endswith("@avif")]
    assert pictures, "no <img> shows an AVIF <source>"
    for image in pictures:
        _accept, content_type = visit.traffic.for_path(image["currentSrc"])
        assert content_type == "image/avif", image["figure"]


def test_screenshot_is_saved(visit: Visit) -> None:
    data = visit.screenshot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 10_000
