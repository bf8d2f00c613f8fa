"""The example site in a real browser: Debian's chromium, driven by Playwright.

What a user sees and an HTTP client cannot tell: every image loads and
decodes, the page does not move as images arrive (each ``<img>`` reserves its
box from its ``width``/``height`` attributes), the browser's own ``Accept``
header gets AVIF for negotiated URLs and for ``<picture>``, and each caption
shows the format, bytes and pixels the browser received (filled in by the
page's script for what only the browser knows). Then the upload form (a new
photo appears in the gallery as a thumbnail) and the admin (its change list
and change form show previews that load). A full-page screenshot is kept
under ``$OXIMG_ARTIFACTS`` (default: the test's temporary directory), and its
path printed.

Playwright only drives the browser: its own browser download (``playwright
install``) is never used. The gallery server is test_example_project's
gunicorn fixture, against a fresh var dir.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pyvips

from django_oximg.core.options.geometry import place
from django_oximg.core.options.model import Gravity
from tests import bombs
from tests.chromium import CHROMIUM_ARGS, VIEWPORT
from tests.services import require_program
from tests.test_example_project import (  # noqa: F401 (fixtures)
    EMPTY_ID,
    SAMPLE_SIZES,
    demo_var,
    run_manage,
    server,
)

pytestmark = pytest.mark.one_django(
    reason=(
        "the subject is the example site in chromium, not Django: `make demo` serves it from "
        ".venv, on Django 5.2 LTS; its tags, views and admin run on both Djangos in "
        "test_templatetags.py, test_views.py and test_admin.py"
    )
)

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, FloatRect, Page, Request, Response, Route

#: Bound, in milliseconds, on the page and every image loading. A cold
#: server renders every thumbnail, two of them AVIF, on first request, and
#: chromium, the server and the renders share the CPUs with whatever else
#: runs: generous, as the suite's other bounds, never reached when it works.
LOAD_TIMEOUT_MS = 120_000

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
        naturalHeight: img.naturalHeight,
        srcset: img.srcset,
    };
})
"""

#: Each figure's caption figures (templates/gallery/stats.html), as shown.
READ_STATS = """
() => Object.fromEntries(Array.from(document.querySelectorAll("figure .stats"), (stats) => [
    stats.closest("figure").id,
    {
        format: stats.querySelector(".format").textContent,
        bytes: stats.querySelector(".bytes").dataset.bytes ?? "",
        bytesText: stats.querySelector(".bytes").textContent,
        size: stats.querySelector(".size").textContent,
    },
]))
"""

#: The page's script has filled in every caption's bytes.
STATS_FILLED = """
() => Array.from(document.querySelectorAll("figure .stats .bytes")).every((b) => b.dataset.bytes)
"""

#: Figures whose {% empty %} branch is shown, with a box on the page.
READ_EMPTY = """
() => Array.from(document.querySelectorAll("figure .empty"))
    .filter((box) => box.getBoundingClientRect().height > 0)
    .map((box) => box.closest("figure").id)
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
    """Thumbnail responses the browser received: its Accept header and the type served,
    and (read by :meth:`keep_bodies` while the page is open) the bytes."""

    responses: dict[str, tuple[str, str]] = field(default_factory=dict)
    bodies: dict[str, bytes] = field(default_factory=dict)
    _received: list[Response] = field(default_factory=list)

    def record(self, response: Response) -> None:
        request: Request = response.request
        if request.resource_type != "image":
            return
        accept = request.all_headers().get("accept", "")
        content_type = response.all_headers().get("content-type", "")
        self.responses[response.url] = (accept, content_type)
        self._received.append(response)

    def keep_bodies(self) -> None:
        for response in self._received:
            self.bodies[response.url] = response.body()

    def for_path(self, path: str) -> tuple[str, str]:
        matches = [value for url, value in self.responses.items() if url.endswith(path)]
        assert matches, f"the browser never fetched {path}"
        return matches[0]

    def body_for(self, path: str) -> bytes:
        matches = [body for url, body in self.bodies.items() if url.endswith(path)]
        assert matches, f"the browser never fetched {path}"
        return matches[0]


@dataclass
class Visit:
    """One visit of the gallery: the images before and after they loaded."""

    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    #: Each caption's format, bytes and size, by figure id.
    stats: dict[str, dict[str, str]]
    #: Figures showing an {% empty %} branch.
    empty: list[str]
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
        context.set_default_timeout(LOAD_TIMEOUT_MS)  # calls given no timeout of their own
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
    page.wait_for_function(STATS_FILLED, timeout=LOAD_TIMEOUT_MS)
    after = page.evaluate(READ_IMAGES)
    stats = page.evaluate(READ_STATS)
    empty = page.evaluate(READ_EMPTY)
    traffic.keep_bodies()

    screenshot = artifacts_dir(tmp_path_factory.mktemp("browser")) / "gallery.png"
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(screenshot), full_page=True)
    print(f"gallery screenshot: {screenshot}")
    page.close()
    return Visit(before, after, stats, empty, traffic, screenshot)


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


def test_each_caption_shows_the_format_bytes_and_size_the_browser_received(
    visit: Visit,
) -> None:
    """The caption's figures are those of the response: its type, its length, the
    pixels it decodes to; for a plain <img>, the tag's size is the natural size."""
    assert {image["figure"] for image in visit.after} == set(visit.stats)
    for image in visit.after:
        stats = visit.stats[image["figure"]]
        body = visit.traffic.body_for(image["currentSrc"])
        _accept, content_type = visit.traffic.for_path(image["currentSrc"])
        assert stats["format"] == content_type.removeprefix("image/").upper(), image["figure"]
        assert int(stats["bytes"]) == len(body) > 0, image["figure"]
        assert stats["bytesText"].endswith(("kB", " B")), stats
        decoded = pyvips.Image.new_from_buffer(body, "")
        size = tuple(int(number) for number in re.findall(r"\d+", stats["size"]))
        assert size == (decoded.width, decoded.height), image["figure"]
        if not image["srcset"]:
            assert size == (image["naturalWidth"], image["naturalHeight"]), image["figure"]


def test_negotiated_caption_names_the_format_served(visit: Visit) -> None:
    """format="auto": the tag cannot know the format; the caption shows the one served."""
    assert visit.stats["auto"]["format"] == "AVIF"
    assert visit.stats["responsive"]["format"] == "AVIF"


def test_missing_file_tile_shows_its_empty_branch(visit: Visit) -> None:
    assert visit.empty == [EMPTY_ID]
    assert EMPTY_ID not in {image["figure"] for image in visit.after}


# --- the upload form and the admin -----------------------------------------

#: The demo's admin user, made by createsuperuser for the test.
ADMIN_USER = "demo"
ADMIN_PASSWORD = "a-demo-password-for-the-test"

#: Every <img> the selector finds has arrived and decoded, or failed. Only
#: those: the gallery's images are ``loading="lazy"``, and one far from the
#: viewport is never fetched, so a wait on all of ``document.images`` would
#: hang on how long the page has grown.
IMAGES_SETTLED = """
(selector) => Array.from(document.querySelectorAll(selector)).every((img) => img.complete)
"""

READ_PAGE_IMAGES = """
(selector) => Array.from(document.querySelectorAll(selector), (img) => ({
    src: img.getAttribute("src"),
    naturalWidth: img.naturalWidth,
    width: img.getAttribute("width"),
}))
"""


def loaded_images(page: Page, selector: str) -> list[dict[str, Any]]:
    """The images ``selector`` finds, once all have been brought into view and settled."""
    for image in page.locator(selector).all():
        image.scroll_into_view_if_needed(timeout=LOAD_TIMEOUT_MS)
    page.wait_for_function(IMAGES_SETTLED, arg=selector, timeout=LOAD_TIMEOUT_MS)
    found: list[dict[str, Any]] = page.evaluate(READ_PAGE_IMAGES, selector)
    return found


def test_an_upload_appears_in_the_gallery_as_a_thumbnail_that_loads(
    visit: Visit, browser_context: BrowserContext, server: str
) -> None:
    photo = pyvips.Image.gaussnoise(800, 600, mean=128, sigma=40).cast("uchar")
    page: Page = browser_context.new_page()
    try:
        page.goto(server + "/upload/", timeout=LOAD_TIMEOUT_MS)
        page.fill("#id_title", "Uploaded in the browser")
        page.set_input_files(
            "#id_image",
            {"name": "noise.jpg", "mimeType": "image/jpeg", "buffer": photo.jpegsave_buffer()},
        )
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/#photo-\d+$"), timeout=LOAD_TIMEOUT_MS)
        figure = page.url.rsplit("#", 1)[1]
        images = loaded_images(page, f"#{figure} img")
        assert (
            page.locator(f"#{figure} figcaption").inner_text().startswith("Uploaded in the browser")
        )
    finally:
        page.close()
    assert len(images) == 1
    assert images[0]["src"].startswith("/img/")
    assert images[0]["naturalWidth"] == int(images[0]["width"]) > 0


def make_superuser(demo_var: Path, username: str, email: str) -> None:
    """An admin user of the demo site, with the tests' password."""
    made = run_manage(
        demo_var,
        "createsuperuser",
        "--noinput",
        "--username",
        username,
        "--email",
        email,
        DJANGO_SUPERUSER_PASSWORD=ADMIN_PASSWORD,
    )
    assert made.returncode == 0, made.stderr


def test_admin_shows_previews_that_load(
    visit: Visit, browser_context: BrowserContext, server: str, demo_var: Path
) -> None:
    make_superuser(demo_var, ADMIN_USER, "demo@example.com")
    page: Page = browser_context.new_page()
    try:
        page.goto(server + "/admin/gallery/photo/", timeout=LOAD_TIMEOUT_MS)
        page.fill("#id_username", ADMIN_USER)
        page.fill("#id_password", ADMIN_PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url(re.compile(r"/admin/gallery/photo/$"), timeout=LOAD_TIMEOUT_MS)
        listed = loaded_images(page, "#result_list img")

        page.locator("#result_list tbody tr a").first.click()
        page.wait_for_url(re.compile(r"/admin/gallery/photo/\d+/change/$"))
        previews = loaded_images(page, ".oximg-preview img")
    finally:
        page.close()
    assert len(listed) >= 6
    for image in [*listed, *previews]:
        assert image["src"].startswith("/img/"), image
        assert image["naturalWidth"] == int(image["width"]) > 0, image
    assert len(previews) == 1


#: A second admin user, so this test does not depend on the one above having run.
FOCAL_EDITOR = "focal-editor"

#: The photo whose focal point the test moves: its sample's point is on the
#: heading, at the left (gallery/samples.py), so every crop keeps the left.
FOCAL_PHOTO = "Opening hours"
FOCAL_SOURCE_SIZE = SAMPLE_SIZES["samples/text.jpg"]

#: Where the test clicks on the focal point widget's preview, as fractions of
#: it: right of what a 4:3 or a square crop of the 3:2 image keeps around the
#: stored point, so each crop moves to the right edge.
CLICK_AT = (0.8, 0.7)

#: The focal point widget's previews of the crops that follow the point:
#: caption, box, and where the image sits in it (CSS object-position).
READ_CROPS = """
() => Array.from(document.querySelectorAll("[data-oximg-focal] .oximg-focal-size"), (size) => {
    const img = size.querySelector("img");
    const box = img.getBoundingClientRect();
    return {
        caption: size.querySelector("figcaption").textContent,
        width: Number(size.dataset.width),
        height: Number(size.dataset.height),
        boxWidth: box.width,
        boxHeight: box.height,
        position: getComputedStyle(img).objectPosition,
        loaded: img.complete && img.naturalWidth > 0,
    };
})
"""


def centre_of(box: FloatRect) -> tuple[float, float]:
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def at(box: FloatRect, point: tuple[float, float]) -> tuple[float, float]:
    """``point`` (fractions of ``box``) in page coordinates."""
    return box["x"] + box["width"] * point[0], box["y"] + box["height"] * point[1]


def served_crop_position(
    source: tuple[int, int], size: tuple[int, int], point: tuple[float, float]
) -> list[tuple[float, int]]:
    """Where the server's crop of ``size`` around ``point`` sits in the scaled ``source``,
    per axis: as a CSS object-position fraction (0 at the left or top edge, 1 at the
    right or bottom) and the pixels it can move along that axis (0: none).

    The server's own placement (imgproxy's ``g:fp``), so the widget's previews
    are checked against the crop that will be served, not against their own sums.
    """
    scale = max(size[0] / source[0], size[1] / source[1])
    scaled = (round(source[0] * scale), round(source[1] * scale))
    offsets = place(*scaled, *size, Gravity("fp", *point))
    spares = (scaled[0] - size[0], scaled[1] - size[1])
    return [
        (offset / spare if spare else 0.5, spare)
        for offset, spare in zip(offsets, spares, strict=True)
    ]


def object_position(text: str) -> tuple[float, float]:
    """CSS ``object-position`` as computed ("100% 50%") as fractions."""
    x, y = (float(part.removesuffix("%")) / 100 for part in text.split())
    return x, y


def log_in(page: Page, server: str, username: str) -> None:
    page.goto(server + "/admin/gallery/photo/", timeout=LOAD_TIMEOUT_MS)
    if page.locator("#id_username").count():  # not logged in by an earlier test
        page.fill("#id_username", username)
        page.fill("#id_password", ADMIN_PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url(re.compile(r"/admin/gallery/photo/$"), timeout=LOAD_TIMEOUT_MS)


def gallery_tile(page: Page, server: str, title: str) -> dict[str, Any]:
    """The gallery's thumbnail of the photo called ``title``, once it has loaded."""
    page.goto(server + "/", timeout=LOAD_TIMEOUT_MS)
    figure = page.locator("figure", has=page.locator(f'img[alt="{title}"]'))
    (image,) = loaded_images(page, f"#{figure.get_attribute('id')} img")
    return image


def test_a_click_on_the_preview_moves_the_marker_and_the_crops_that_follow_the_point(
    browser_context: BrowserContext, server: str, demo_var: Path, tmp_path: Path
) -> None:
    """The widget is labelled; a click moves the marker to it, and each crop preview
    to the crop the server will make; saved, the change list and the gallery follow."""
    make_superuser(demo_var, FOCAL_EDITOR, "focal@example.com")
    page: Page = browser_context.new_page()
    try:
        tile_before = gallery_tile(page, server, FOCAL_PHOTO)  # the first visit adds the photos
        log_in(page, server, FOCAL_EDITOR)
        page.get_by_role("link", name=FOCAL_PHOTO, exact=True).click()
        page.wait_for_url(re.compile(r"/admin/gallery/photo/\d+/change/$"))
        change_path = page.url.removeprefix(server)
        loaded_images(page, "[data-oximg-focal] img")
        page.wait_for_selector("[data-oximg-focal-ready]", state="attached")  # the script ran
        widget = page.locator("[data-oximg-focal]")
        label = widget.locator(".oximg-focal-label")
        label_shown = label.is_visible() and label.inner_text()
        labelled = page.get_by_label("Focal point (x,y)", exact=True).get_attribute("name")
        preview = widget.locator(".oximg-focal-image")
        box = preview.bounding_box()
        marker = widget.locator(".oximg-focal-marker")
        stored = widget.locator("input").input_value()
        marker_before = marker.bounding_box() if marker.is_visible() else None
        crops_before = page.evaluate(READ_CROPS)

        assert box is not None and box["width"] > 0
        preview.click(position={"x": box["width"] * CLICK_AT[0], "y": box["height"] * CLICK_AT[1]})
        typed = widget.locator("input").input_value()
        marker_after = marker.bounding_box() if marker.is_visible() else None
        crops_after = page.evaluate(READ_CROPS)
        screenshot = artifacts_dir(tmp_path) / "focal-point-widget.png"
        page.screenshot(path=str(screenshot), full_page=True)
        print(f"focal point widget screenshot: {screenshot}")

        page.click("input[name=_save]")
        page.wait_for_url(re.compile(r"/admin/gallery/photo/$"), timeout=LOAD_TIMEOUT_MS)
        row = page.locator(f'#result_list tbody tr:has(a[href="{change_path}"])')
        listed = row.locator("img").get_attribute("src") or ""
        tile_after = gallery_tile(page, server, FOCAL_PHOTO)
    finally:
        page.close()

    assert label_shown == "Focal point (x,y)"
    assert labelled == "focal_point"  # the label names the text input
    # The marker shows the stored point, then the click.
    assert marker_before is not None and marker_after is not None
    stored_point = tuple(float(part) for part in stored.split(","))
    x, y = (float(part) for part in typed.split(","))
    pixel = 1 / min(box["width"], box["height"])
    assert abs(x - CLICK_AT[0]) <= pixel and abs(y - CLICK_AT[1]) <= pixel, typed
    for marker_box, point in ((marker_before, stored_point), (marker_after, CLICK_AT)):
        centre, expected = centre_of(marker_box), at(box, point)
        assert abs(centre[0] - expected[0]) <= 2 and abs(centre[1] - expected[1]) <= 2, point
    # One preview per crop that follows the point, as the demo's admin gives them,
    # each in its size's shape and cut where the server will cut it, before and after.
    assert [crop["caption"] for crop in crops_after] == [
        "gallery 320\u00d7240",
        "change list 80\u00d780",
    ]
    for crops, point in ((crops_before, stored_point), (crops_after, (x, y))):
        for crop in crops:
            size = (crop["width"], crop["height"])
            assert crop["loaded"], crop
            shown = crop["boxWidth"] / crop["boxHeight"]
            assert shown == pytest.approx(size[0] / size[1], rel=0.02), crop
            served = served_crop_position(FOCAL_SOURCE_SIZE, size, point)
            for got, (want, spare) in zip(object_position(crop["position"]), served, strict=True):
                # A pixel of the served crop's room to move, and the preview's rounding.
                assert abs(got - want) <= 1 / max(spare, 1) + 0.01, (crop, point, served)
    moved = [
        before["position"] != after["position"]
        for before, after in zip(crops_before, crops_after, strict=True)
    ]
    assert moved == [True, True], (crops_before, crops_after)
    # Saved: the change list's crop and the gallery's tile follow the new point.
    assert f"/g:fp:{x:g}:{y:g}/" in listed
    assert tile_after["src"] != tile_before["src"]
    assert f"/g:fp:{x:g}:{y:g}/" in tile_after["src"]
    assert tile_after["naturalWidth"] == int(tile_after["width"]) > 0


# --- sources over the server's limits ----------------------------------------

#: A phone's 50-megapixel photo, just over ``MAX_SRC_RESOLUTION`` (50 MP): flat,
#: so its PNG is small enough to upload quickly.
PHONE_SIZE = (8160, 6144)

#: A photo stored without the form (a fixture, an import, a file from before
#: the validator), as ``manage.py shell`` makes it.
STORE_WITHOUT_THE_FORM = """
import os
from django.core.files.base import ContentFile
from gallery.models import Photo
photo = Photo(title="Stored over the limit")
data = open(os.environ["PHONE_PHOTO"], "rb").read()
photo.image.save("phone.png", ContentFile(data), save=False)
photo.save()
print(photo.pk)
"""


def test_a_photo_over_the_limit_is_refused_at_upload_and_a_stored_one_is_no_broken_image(
    visit: Visit, browser_context: BrowserContext, server: str, demo_var: Path, tmp_path: Path
) -> None:
    phone = bombs.flat_grey_png(*PHONE_SIZE)
    page: Page = browser_context.new_page()
    try:
        page.goto(server + "/upload/", timeout=LOAD_TIMEOUT_MS)
        page.fill("#id_title", "Too many megapixels")
        page.set_input_files(
            "#id_image", {"name": "phone.png", "mimeType": "image/png", "buffer": phone}
        )
        page.click("button[type=submit]")
        error = page.locator(".errorlist").first
        error.wait_for(timeout=LOAD_TIMEOUT_MS)
        refusal = error.inner_text()
        assert page.url.endswith("/upload/")

        saved = tmp_path / "phone.png"
        saved.write_bytes(phone)
        stored = run_manage(demo_var, "shell", "-c", STORE_WITHOUT_THE_FORM, PHONE_PHOTO=str(saved))
        assert stored.returncode == 0, stored.stderr
        figure = f"#photo-{stored.stdout.split()[-1]}"
        page.goto(server + "/", timeout=LOAD_TIMEOUT_MS)
        page.locator(figure).scroll_into_view_if_needed(timeout=LOAD_TIMEOUT_MS)
        empty_shown = page.locator(f"{figure} .empty").is_visible()
        images_in_figure = page.locator(f"{figure} img").count()
        caption = page.locator(f"{figure} figcaption").inner_text()
    finally:
        page.close()
    assert "8160\u00d76144" in refusal and "50 megapixels" in refusal, refusal
    assert empty_shown and images_in_figure == 0
    assert caption.startswith("Stored over the limit")
