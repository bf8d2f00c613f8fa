"""The demo project in example_project/ works from a fresh clone.

Everything runs the project the way a user would, in subprocesses with its own
settings (not tests/settings.py): `manage.py migrate`, `make_samples`, `check`,
`makemigrations --check`, and the gallery page and its upload form served by
gunicorn on 127.0.0.1, with every thumbnail on the page fetched and decoded.
"""

from __future__ import annotations

import html
import os
import re
import secrets
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from html.parser import HTMLParser
from pathlib import Path
from urllib.error import HTTPError

import pytest
import pyvips

#: The example site is what `make demo` serves, from .venv: on Django 5.2 LTS only. The
#: tags, views and admin it uses run on both Djangos in test_templatetags.py,
#: test_views.py and test_admin.py; its `manage.py check` and migrations run on both.
demo_site = pytest.mark.one_django(reason="`make demo` runs the example site on the LTS only")

REPO_ROOT = Path(__file__).resolve().parent.parent
PROJECT_DIR = REPO_ROOT / "example_project"
MANAGE = PROJECT_DIR / "manage.py"

#: What make_samples must draw: storage name -> (width, height) as stored.
SAMPLE_SIZES = {
    "samples/landscape.jpg": (2000, 1333),
    "samples/face.jpg": (1600, 1000),
    "samples/text.jpg": (1200, 800),
    "samples/portrait.jpg": (1200, 900),
    "samples/logo.png": (800, 800),
    "samples/bounce.gif": (320, 240),
}

#: The figures with an image that show what the tags do, by their HTML id.
DEMO_IDS = {
    "fit",
    "fill-center",
    "fill-smart",
    "text-jpeg",
    "text-sharp",
    "webp",
    "avif",
    "auto",
    "alpha",
    "animated",
    "portrait",
    "responsive",
    "sepia",
}

#: The figure whose source is missing: it shows the tag's {% empty %} branch.
EMPTY_ID = "missing"

#: Django's forms.ImageField's error for a file Pillow cannot read.
INVALID_IMAGE = "Upload a valid image."

#: What a current browser sends for <img> requests.
BROWSER_IMAGE_ACCEPT = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8"

#: Generous: a cold server renders a page of thumbnails, one of them AVIF.
HTTP_TIMEOUT = 120


def demo_env(var_dir: Path) -> dict[str, str]:
    """The environment of a demo process: its own settings, everything under var_dir.

    DJANGO_SETTINGS_MODULE is set explicitly because pytest-django exports
    tests.settings, which the subprocess would otherwise inherit.
    """
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "example.settings"
    env["OXIMG_DEMO_VAR"] = str(var_dir)
    env.pop("PYTHONPATH", None)
    return env


def run_manage(var_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run manage.py from an unrelated directory, proving it sets up sys.path itself.

    ``env`` adds environment variables (e.g. createsuperuser's password).
    """
    return subprocess.run(
        [sys.executable, str(MANAGE), *args],
        cwd=var_dir,
        env={**demo_env(var_dir), **env},
        capture_output=True,
        text=True,
        timeout=HTTP_TIMEOUT,
        check=False,
    )


def migrated(var_dir: Path) -> Path:
    """``var_dir``, with its database made by ``migrate``, as `make demo` does first."""
    result = run_manage(var_dir, "migrate", "--noinput")
    assert result.returncode == 0, result.stderr
    return var_dir


@pytest.fixture(scope="module")
def make_samples_output(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A migrated var dir where make_samples has run once, and what it printed."""
    var_dir = migrated(tmp_path_factory.mktemp("demo-var"))
    result = run_manage(var_dir, "make_samples")
    assert result.returncode == 0, result.stderr
    return var_dir, result.stdout


@pytest.fixture(scope="module")
def samples_dir(make_samples_output: tuple[Path, str]) -> Path:
    """The samples/ folder make_samples drew."""
    var_dir, output = make_samples_output
    assert output.count("drawn") == len(SAMPLE_SIZES), output
    return var_dir / "media" / "samples"


def load(path: Path, **options: object) -> pyvips.Image:
    return pyvips.Image.new_from_file(str(path), **options)


@demo_site
def test_make_samples_draws_every_sample_at_its_size(samples_dir: Path) -> None:
    for name, (width, height) in SAMPLE_SIZES.items():
        image = load(samples_dir.parent / name)
        assert (image.width, image.height) == (width, height), name


@demo_site
def test_landscape_is_a_textured_jpeg(samples_dir: Path) -> None:
    image = load(samples_dir / "landscape.jpg")
    assert image.get("vips-loader") == "jpegload"
    assert image.bands == 3
    # Not flat colour: resampling and smart crop need detail to work on.
    assert image.deviate() > 20


@demo_site
def test_portrait_is_stored_sideways_and_upright_after_autorotation(samples_dir: Path) -> None:
    image = load(samples_dir / "portrait.jpg")
    assert image.get("vips-loader") == "jpegload"
    assert image.get("orientation") == 6
    upright = image.autorot()
    assert (upright.width, upright.height) == (900, 1200)
    top = upright.crop(0, 0, upright.width, 100)
    bottom = upright.crop(0, upright.height - 100, upright.width, 100)
    # Sky above, grass below.
    assert top[2].avg() > top[1].avg() > top[0].avg()
    assert bottom[1].avg() > bottom[2].avg() + 40


@demo_site
def test_face_sits_right_of_the_middle(samples_dir: Path) -> None:
    """Skin-coloured pixels right of centre only: a centre crop cuts the face."""
    image = load(samples_dir / "face.jpg")
    assert image.get("vips-loader") == "jpegload"
    skin = skin_mask(image)
    columns, _rows = skin.project()
    covered = [x for x in range(image.width) if columns.getpoint(x, 0)[0] > 0]
    assert covered, "no skin-coloured pixels"
    assert 950 < min(covered) < max(covered) < 1350


@demo_site
def test_text_is_dark_type_on_light_paper(samples_dir: Path) -> None:
    image = load(samples_dir / "text.jpg").colourspace("b-w")[0]
    assert image.avg() > 180
    # Letters: a share of pixels far darker than the paper.
    ink = (image < 100).avg() / 255
    assert 0.02 < ink < 0.3


@demo_site
def test_logo_is_a_png_with_a_transparent_ring_and_soft_edge(samples_dir: Path) -> None:
    image = load(samples_dir / "logo.png")
    assert image.get("vips-loader") == "pngload"
    assert image.bands == 4
    assert image.hasalpha()
    alpha = image[3]
    assert alpha.getpoint(0, 0) == [0.0]
    assert alpha.getpoint(400, 400) == [255.0]
    assert alpha.getpoint(600, 400) == [0.0]  # the ring
    # Partly transparent values on the way out from the centre: a soft edge.
    edge = {int(alpha.getpoint(x, 400)[0]) for x in range(700, 800)}
    assert any(0 < value < 255 for value in edge)


@demo_site
def test_bounce_is_a_looping_twelve_frame_gif_that_moves(samples_dir: Path) -> None:
    image = load(samples_dir / "bounce.gif", n=-1)
    assert image.get("vips-loader") == "gifload"
    assert image.get("n-pages") == 12
    assert image.get("page-height") == 240
    assert image.get("loop") == 0
    assert len(image.get("delay")) == 12
    first = image.crop(0, 0, 320, 240)
    middle = image.crop(0, 6 * 240, 320, 240)
    assert (first - middle).abs().max() > 100


@demo_site
def test_make_samples_adds_a_photo_for_each_sample(make_samples_output: tuple[Path, str]) -> None:
    _var_dir, output = make_samples_output
    added = re.findall(r"added  Photo '.+' \((samples/[^)]+)\)", output)
    assert sorted(added) == sorted(SAMPLE_SIZES), output


@demo_site
def test_make_samples_keeps_existing_and_redraws_identical_bytes(
    samples_dir: Path,
) -> None:
    var_dir = samples_dir.parent.parent
    before = {path.name: path.read_bytes() for path in samples_dir.iterdir()}

    again = run_manage(var_dir, "make_samples")
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("exists") == len(SAMPLE_SIZES), again.stdout
    assert "added" not in again.stdout  # the photos are there already

    forced = run_manage(var_dir, "make_samples", "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.count("drawn") == len(SAMPLE_SIZES), forced.stdout
    after = {path.name: path.read_bytes() for path in samples_dir.iterdir()}
    # Deterministic drawing, and no renamed duplicates left behind.
    assert after == before


def test_manage_check_passes(tmp_path: Path) -> None:
    result = run_manage(tmp_path, "check")
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_migrations_are_current(tmp_path: Path) -> None:
    """The committed migrations match the models: nothing left to make."""
    result = run_manage(tmp_path, "makemigrations", "--check", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No changes detected" in result.stdout


def skin_mask(image: pyvips.Image) -> pyvips.Image:
    """Pixels of the face sample's skin colour (225, 175, 145), give or take the grain."""
    r, g, b = image[0], image[1], image[2]
    return (r > 200) & (r < 250) & (g > 150) & (g < 200) & (b > 115) & (b < 175)


# --- the gallery page over HTTP -------------------------------------------------


class GalleryPage(HTMLParser):
    """The parts of the gallery page the test checks: images and <source>s by figure,
    figures showing an ``{% empty %}`` branch, stylesheets."""

    def __init__(self) -> None:
        super().__init__()
        self.images: dict[str, dict[str, str]] = {}
        self.sources: dict[str, list[dict[str, str]]] = {}
        self.empty: set[str] = set()
        self.stylesheets: list[str] = []
        self._figure = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "figure":
            self._figure = values.get("id", "")
        elif "empty" in values.get("class", "").split():
            self.empty.add(self._figure)
        elif tag == "img":
            assert self._figure not in self.images, f"two images in figure {self._figure!r}"
            self.images[self._figure] = values
        elif tag == "source":
            self.sources.setdefault(self._figure, []).append(values)
        elif tag == "link" and values.get("rel") == "stylesheet":
            self.stylesheets.append(values["href"])


@dataclass(frozen=True)
class Fetched:
    status: int
    #: Header names in lower case.
    headers: dict[str, str]
    body: bytes


def fetch(url: str, accept: str) -> Fetched:
    """GET ``url``; an HTTP error is returned, not raised, so asserts can show it."""
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
            return Fetched(response.status, _lower_keys(response.headers), response.read())
    except HTTPError as error:
        with error:
            return Fetched(error.code, _lower_keys(error.headers), error.read())


def explain(response: Fetched) -> str:
    """The gist of an error response: Django's debug page title and exception value."""
    text = response.body[:200_000].decode(errors="replace")
    found = re.findall(r"<title>(.*?)</title>|exception_value\">(.*?)</pre>", text, re.S)
    gist = " | ".join(html.unescape(part).strip() for match in found for part in match if part)
    return f"{response.status}: {gist or text[:500]}"


def _lower_keys(headers: Message) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


@pytest.fixture(scope="module")
def demo_var(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's var dir: migrated, with no samples and no photos yet."""
    return migrated(tmp_path_factory.mktemp("demo-server"))


@pytest.fixture(scope="module")
def server(demo_var: Path) -> Iterator[str]:
    """Gunicorn serving example.wsgi on 127.0.0.1 from ``demo_var``.

    Its first page view draws the samples and adds their photos. The
    listening socket is made here and handed to gunicorn (``fd://``), so
    there is no race for a free port, and requests made before gunicorn is
    ready wait in the backlog instead of failing.
    """
    var_dir = demo_var
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "--chdir",
        str(PROJECT_DIR),
        "--bind",
        f"fd://{listener.fileno()}",
        "--worker-class",
        "gthread",
        "--threads",
        "4",
        "--workers",
        "1",
        *_without_control_socket(),
        "example.wsgi",
    ]
    log_path = var_dir / "gunicorn.log"
    with log_path.open("wb") as log, listener:
        process = subprocess.Popen(
            command,
            env=demo_env(var_dir),
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(listener.fileno(),),
        )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.returncode not in (0, -15):
            print(log_path.read_text(errors="replace"))


def _without_control_socket() -> list[str]:
    """Recent gunicorn opens a control socket at one fixed path in $HOME; parallel test
    servers would fight over it, and the test needs none."""
    from gunicorn.config import Config

    return ["--no-control-socket"] if "control_socket_disable" in Config().settings else []


def gallery(server: str) -> GalleryPage:
    response = fetch(server + "/", "text/html")
    assert response.status == 200, explain(response)
    assert response.headers["content-type"].startswith("text/html")
    parsed = GalleryPage()
    parsed.feed(response.body.decode())
    return parsed


@pytest.fixture(scope="module")
def page(server: str) -> GalleryPage:
    """The gallery as the first visit shows it (the upload tests take it first)."""
    return gallery(server)


@pytest.fixture(scope="module")
def thumbnails(server: str, page: GalleryPage) -> dict[str, Fetched]:
    """Every image on the page, fetched as a browser would, by figure id."""
    return {
        figure: fetch(server + image["src"], BROWSER_IMAGE_ACCEPT)
        for figure, image in page.images.items()
    }


def decode(body: bytes) -> pyvips.Image:
    return pyvips.Image.new_from_buffer(body, "")


def photo_ids(page: GalleryPage) -> list[str]:
    return [figure for figure in page.images if figure.startswith("photo-")]


@demo_site
def test_page_shows_every_demo_as_a_lazy_image_with_its_size(page: GalleryPage) -> None:
    assert set(page.images) - set(photo_ids(page)) == DEMO_IDS
    for figure, image in page.images.items():
        assert image["loading"] == "lazy", figure
        assert image["alt"], figure
        assert int(image["width"]) > 0, figure
        assert int(image["height"]) > 0, figure
        assert image["src"].startswith("/img/"), figure


@demo_site
def test_first_visit_adds_a_photo_for_each_sample(page: GalleryPage) -> None:
    """A fresh database: the view adds the photos, so the gallery is never empty."""
    titles = {page.images[figure]["alt"] for figure in photo_ids(page)}
    assert len(photo_ids(page)) == len(SAMPLE_SIZES)
    assert "Sunset over the hills" in titles


@demo_site
def test_missing_source_renders_the_empty_branch(page: GalleryPage) -> None:
    assert page.empty == {EMPTY_ID}
    assert EMPTY_ID not in page.images


@demo_site
def test_every_thumbnail_is_served_at_the_size_the_page_says(
    page: GalleryPage, thumbnails: dict[str, Fetched]
) -> None:
    for figure, response in thumbnails.items():
        assert response.status == 200, (figure, explain(response))
        assert response.headers["content-type"].startswith("image/"), figure
        image = decode(response.body)
        declared = (int(page.images[figure]["width"]), int(page.images[figure]["height"]))
        assert (image.width, image.height) == declared, figure


@demo_site
def test_geometries_follow_the_tag_arguments(thumbnails: dict[str, Fetched]) -> None:
    fit = decode(thumbnails["fit"].body)
    assert fit.width == 400
    assert fit.height in (266, 267)
    for figure in ("fill-center", "fill-smart"):
        fill = decode(thumbnails[figure].body)
        assert (fill.width, fill.height) == (300, 300), figure


@demo_site
def test_smart_crop_keeps_the_face_whole(thumbnails: dict[str, Fetched]) -> None:
    """The centre crop cuts the face at its right edge; attention moves onto it."""

    def skin_at_edges(figure: str) -> tuple[bool, bool, bool]:
        skin = skin_mask(decode(thumbnails[figure].body))
        left = skin.crop(0, 0, 4, skin.height).max() > 0
        right = skin.crop(skin.width - 4, 0, 4, skin.height).max() > 0
        return skin.max() > 0, left, right

    assert skin_at_edges("fill-center") == (True, False, True)
    assert skin_at_edges("fill-smart") == (True, False, False)


def photo_figure(page: GalleryPage, title: str) -> str:
    (figure,) = (figure for figure in photo_ids(page) if page.images[figure]["alt"] == title)
    return figure


#: The samples' photos that have a focal point (gallery/samples.py), and those
#: that have none, which the gallery smart-crops.
PHOTOS_WITH_A_POINT = (
    "Sunset over the hills",
    "Portrait",
    "Opening hours",
    "A tree (stored sideways)",
)
PHOTOS_WITHOUT = ("Logo with a transparent ring", "Bouncing ball")


@demo_site
def test_the_gallery_crops_around_each_photos_focal_point_else_smartly(page: GalleryPage) -> None:
    for title in PHOTOS_WITH_A_POINT:
        src = page.images[photo_figure(page, title)]["src"]
        assert "/g:fp:" in src and "/g:sm" not in src, (title, src)
    for title in PHOTOS_WITHOUT:
        src = page.images[photo_figure(page, title)]["src"]
        assert "/g:sm" in src and "/g:fp:" not in src, (title, src)


@demo_site
def test_the_notice_keeps_its_heading_whole(
    page: GalleryPage, thumbnails: dict[str, Fetched]
) -> None:
    """The heading's first letter starts 80 px from the sample's left edge: the tile
    (a 4:3 cut of the 3:2 notice) keeps that margin, where the smart crop cut the
    first letters."""
    tile = decode(thumbnails[photo_figure(page, "Opening hours")].body)
    scale = tile.height / SAMPLE_SIZES["samples/text.jpg"][1]
    heading = tile.crop(0, round(80 * scale), tile.width, round(65 * scale))
    ink = (heading.colourspace("b-w")[0] < 100).cast("uchar")
    columns, _rows = ink.project()
    inked = [x for x in range(columns.width) if columns(x, 0)[0] > 0]
    assert inked, "no heading in the tile"
    assert inked[0] == pytest.approx(80 * scale, abs=3)


@demo_site
def test_formats_follow_the_tag_arguments(thumbnails: dict[str, Fetched]) -> None:
    assert thumbnails["fit"].headers["content-type"] == "image/jpeg"
    assert thumbnails["webp"].headers["content-type"] == "image/webp"
    assert thumbnails["avif"].headers["content-type"] == "image/avif"
    assert thumbnails["alpha"].headers["content-type"] == "image/webp"
    assert thumbnails["text-jpeg"].headers["content-type"] == "image/jpeg"
    assert thumbnails["text-sharp"].headers["content-type"] == "image/png"


@demo_site
def test_auto_format_is_negotiated_by_accept(server: str, page: GalleryPage) -> None:
    url = server + page.images["auto"]["src"]
    modern = fetch(url, BROWSER_IMAGE_ACCEPT)
    legacy = fetch(url, "image/*")
    assert modern.status == 200, explain(modern)
    assert legacy.status == 200, explain(legacy)
    assert modern.headers["content-type"] in ("image/avif", "image/webp")
    assert legacy.headers["content-type"] == "image/jpeg"
    for response in (modern, legacy):
        assert "accept" in response.headers.get("vary", "").lower()
        assert decode(response.body).width == int(page.images["auto"]["width"])


@demo_site
def test_the_sites_own_sepia_option_tones_the_photo(
    page: GalleryPage, thumbnails: dict[str, Fetched]
) -> None:
    """``sepia=0.8`` (gallery/extensions.py): the blue sky of the plain fit turns warm."""
    assert "/sep:0.8/" in page.images["sepia"]["src"]
    toned, plain = decode(thumbnails["sepia"].body), decode(thumbnails["fit"].body)
    assert (toned.width, toned.height) == (plain.width, plain.height)
    assert toned[0].avg() > toned[1].avg() > toned[2].avg()

    def warmth(image: pyvips.Image) -> float:
        sky = image.crop(0, 0, image.width, image.height // 4)
        return float(sky[0].avg() - sky[2].avg())

    assert warmth(plain) < 0  # blue
    assert warmth(toned) > warmth(plain) + 40


@demo_site
def test_transparency_survives(thumbnails: dict[str, Fetched]) -> None:
    image = decode(thumbnails["alpha"].body)
    assert image.hasalpha()
    alpha = image[image.bands - 1]
    assert alpha.getpoint(0, 0) == [0.0]
    assert alpha.getpoint(120, 120) == [255.0]
    assert alpha.getpoint(180, 120) == [0.0]  # the ring, at 3/10 of 800 px


@demo_site
def test_animation_survives_gif_to_webp(thumbnails: dict[str, Fetched]) -> None:
    image = pyvips.Image.new_from_buffer(thumbnails["animated"].body, "", n=-1)
    assert image.get("vips-loader") == "webpload_buffer"
    assert image.get("n-pages") == 12
    assert image.get("page-height") == 180
    assert image.width == 240


@demo_site
def test_portrait_comes_out_upright(thumbnails: dict[str, Fetched]) -> None:
    image = decode(thumbnails["portrait"].body)
    assert (image.width, image.height) == (225, 300)
    top = image.crop(0, 0, image.width, 20)
    bottom = image.crop(0, image.height - 20, image.width, 20)
    assert top[2].avg() > top[0].avg() + 40
    assert bottom[1].avg() > bottom[2].avg() + 40


@demo_site
def test_stylesheet_is_served(server: str, page: GalleryPage) -> None:
    assert page.stylesheets
    for href in page.stylesheets:
        response = fetch(server + href, "text/css")
        assert response.status == 200, href
        assert response.headers["content-type"].startswith("text/css")
        assert b".gallery" in response.body


# --- {% picture %}: every candidate of every srcset ----------------------------


def srcset_candidates(srcset: str) -> list[tuple[str, int]]:
    """``url 300w, url 600w`` -> [(url, 300), ...]."""
    candidates = []
    for candidate in srcset.split(","):
        url, descriptor = candidate.split()
        assert descriptor.endswith("w"), candidate
        candidates.append((url, int(descriptor[:-1])))
    return candidates


@demo_site
def test_picture_offers_avif_and_webp_sources_before_the_jpeg(
    server: str, page: GalleryPage
) -> None:
    types = [source["type"] for source in page.sources["responsive"]]
    assert types == ["image/avif", "image/webp"]
    image = page.images["responsive"]
    assert (image["width"], image["height"]) == ("600", "400")
    assert image["sizes"] == page.sources["responsive"][0]["sizes"]
    # The placeholder: a tiny image behind the <img> until it loads.
    placeholder = re.fullmatch(r'background-image:url\("(/img/[^"]+)"\);.*', image["style"])
    assert placeholder, image["style"]
    response = fetch(server + placeholder[1], BROWSER_IMAGE_ACCEPT)
    assert response.status == 200, explain(response)
    assert response.headers["content-type"] == "image/webp"
    assert decode(response.body).width == 16


@demo_site
def test_every_srcset_candidate_is_served_in_its_type_and_width(
    server: str, page: GalleryPage
) -> None:
    """Each <source srcset> URL answers 200 in the <source>'s type, as wide as its
    descriptor, in the 3:2 shape of the geometry; likewise the <img srcset> in JPEG."""
    checked = 0
    for figure, image in page.images.items():
        offers = [(source["srcset"], source["type"]) for source in page.sources.get(figure, [])]
        if image.get("srcset"):
            offers.append((image["srcset"], "image/jpeg"))
        for srcset, content_type in offers:
            widths = []
            for url, width in srcset_candidates(srcset):
                response = fetch(server + url, BROWSER_IMAGE_ACCEPT)
                assert response.status == 200, (figure, url, explain(response))
                assert response.headers["content-type"] == content_type, (figure, url)
                decoded = decode(response.body)
                assert (decoded.width, decoded.height) == (width, width * 2 // 3), url
                widths.append(width)
                checked += 1
            assert widths == [300, 600, 900, 1200], (figure, content_type)
    assert checked == 12


# --- the upload form ---------------------------------------------------------
# Its tests take the `page` fixture, so the first visit's gallery is read
# before they add to it.


@dataclass(frozen=True)
class Upload:
    """What a POST of the upload form answered."""

    status: int
    location: str
    body: str


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Return a redirect as it is, so the test sees where it points."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def upload(server: str, title: str, filename: str, data: bytes) -> Upload:
    """Fill in and send the upload form as a browser would, CSRF token included."""
    form = fetch(server + "/upload/", "text/html")
    assert form.status == 200, explain(form)
    cookie = form.headers["set-cookie"].split(";")[0]
    found = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', form.body)
    assert found, "no CSRF token in the form"
    boundary = secrets.token_hex(16)
    fields = {"csrfmiddlewaretoken": found[1].decode(), "title": title}
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="{filename}"'
        "\r\nContent-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        server + "/upload/",
        data=b"".join(parts),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}", "Cookie": cookie},
    )
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=HTTP_TIMEOUT) as response:
            return Upload(response.status, "", response.read().decode())
    except HTTPError as error:
        with error:
            return Upload(error.code, error.headers.get("location", ""), error.read().decode())


@demo_site
def test_an_uploaded_image_joins_the_gallery_as_a_thumbnail(server: str, page: GalleryPage) -> None:
    photo = (
        pyvips.Image.xyz(900, 600).cast("uchar")[0].bandjoin([60, 200]).copy(interpretation="srgb")
    )
    answer = upload(server, "An upload", "upload.png", photo.pngsave_buffer())
    assert answer.status == 302, answer.body[:2000]
    figure = re.fullmatch(r"/#(photo-\d+)", answer.location)
    assert figure, answer.location

    image = gallery(server).images[figure[1]]
    assert image["alt"] == "An upload"
    response = fetch(server + image["src"], BROWSER_IMAGE_ACCEPT)
    assert response.status == 200, explain(response)
    assert response.headers["content-type"] == "image/avif"  # format="auto"
    decoded = decode(response.body)
    assert (decoded.width, decoded.height) == (int(image["width"]), int(image["height"]))


@demo_site
def test_an_upload_the_server_would_refuse_gets_the_limit_named(
    server: str, page: GalleryPage
) -> None:
    """A 50 MP phone photo: Pillow opens it, the image server would answer 422."""
    from tests import bombs

    before = set(photo_ids(gallery(server)))
    answer = upload(server, "Too large", "phone.png", bombs.flat_grey_png(8160, 6144))
    assert answer.status == 200, answer.body[:2000]
    assert (
        "This image is 8160\u00d76144 (50.1 megapixels); the largest accepted is 50 megapixels."
    ) in answer.body
    assert set(photo_ids(gallery(server))) == before


@demo_site
@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("notes.jpg", b"not an image at all"),
        ("page.html", b"<!doctype html><title>hello</title>"),
        ("half.png", pyvips.Image.black(64, 64).pngsave_buffer()[:60]),
    ],
)
def test_an_unreadable_upload_gets_the_form_error(
    server: str, page: GalleryPage, filename: str, data: bytes
) -> None:
    before = set(photo_ids(gallery(server)))
    answer = upload(server, "Not a picture", filename, data)
    assert answer.status == 200, answer.body[:2000]
    assert INVALID_IMAGE in answer.body
    assert 'class="errorlist' in answer.body
    assert set(photo_ids(gallery(server))) == before
