"""``watermark``: the site's image laid over the result, checked pixel by pixel."""

from __future__ import annotations

import pytest
import pyvips

from django_oximg.core import pipeline
from django_oximg.core.options import parse_path
from django_oximg.core.pipeline.steps import watermark
from tests import images

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

RED = [255.0, 0.0, 0.0]
GREY = [100.0, 100.0, 100.0]


def mark_image(width: int = 20, height: int = 10) -> pipeline.WatermarkImage:
    mark = (pyvips.Image.black(width, height, bands=3) + RED).cast("uchar")
    return pipeline.WatermarkImage(bytes(mark.pngsave_buffer()), width, height)


def flat(width: int = 200, height: int = 100) -> bytes:
    image = (pyvips.Image.black(width, height, bands=3) + GREY).cast("uchar")
    return bytes(image.copy(interpretation="srgb").pngsave_buffer())


def render(
    url_options: str, source: bytes | None = None, fmt: str = "png", **settings: object
) -> pyvips.Image:
    render_settings = pipeline.RenderSettings(watermark=mark_image(), **settings)  # type: ignore[arg-type]
    options = parse_path(f"/{url_options}/plain/a.png").options
    result = pipeline.render(source or flat(), options, fmt, render_settings)
    image = pyvips.Image.new_from_buffer(result.data, "", **({"n": -1} if fmt == "gif" else {}))
    frame_height = image.get("page-height") if result.frames > 1 else image.height
    assert (image.width, frame_height) == (result.width, result.height)
    return image


def colour(image: pyvips.Image, x: int, y: int) -> list[float]:
    return image.getpoint(x, y)[:3]


@pytest.mark.parametrize(
    ("url_options", "inside", "outside"),
    [
        ("wm:1:nowe", (2, 2), (25, 15)),
        ("wm:1:soea", (197, 97), (175, 85)),
        ("wm:1:soea:5:5", (190, 88), (197, 97)),
        ("wm:1:ce", (100, 50), (85, 50)),
        ("wm:1:no", (100, 2), (100, 12)),
        ("wm:1:we:0:-20", (2, 31), (2, 50)),  # offsets move it away from the edge
        ("wm:1:nowe:0.1:0.1", (22, 12), (2, 2)),  # below 1: a share of the image
        ("wm:1:nowe:5:5/rs:fit:100:50/dpr:2", (12, 12), (8, 8)),  # offsets times the dpr
    ],
)
def test_the_watermark_goes_where_its_position_says(
    url_options: str, inside: tuple[int, int], outside: tuple[int, int]
) -> None:
    image = render(url_options)
    assert colour(image, *inside) == RED
    assert colour(image, *outside) == GREY


@pytest.mark.parametrize(
    ("url_options", "settings", "expected"),
    [
        ("wm:0.5:nowe", {}, [178.0, 50.0, 50.0]),
        ("wm:1:nowe", {"watermark_opacity": 0.5}, [178.0, 50.0, 50.0]),
        ("wm:0.5:nowe", {"watermark_opacity": 0.5}, [139.0, 75.0, 75.0]),
    ],
)
def test_opacity_blends_the_watermark(
    url_options: str, settings: dict[str, float], expected: list[float]
) -> None:
    # The URL's opacity times WATERMARK_OPACITY, as imgproxy multiplies them.
    pixel = colour(render(url_options, **settings), 2, 2)
    assert all(abs(a - b) <= 1 for a, b in zip(pixel, expected, strict=True))


def test_scale_fits_the_watermark_into_a_share_of_the_image() -> None:
    image = render("wm:1:nowe:0:0:0.5")  # 20x10 enlarged into 100x50
    assert colour(image, 98, 48) == RED
    assert colour(image, 102, 52) == GREY


def test_replicate_tiles_the_whole_image_from_its_centre() -> None:
    image = render("wm:1:re:10:10")  # 20x10 copies, 10 px apart
    reds = (image.extract_band(0) == 255).ifthenelse(1, 0).avg() * image.width * image.height
    assert colour(image, 100, 50) == RED  # a copy sits in the middle
    assert colour(image, 115, 50) == GREY  # the spacing beside it
    # 20x10 copies in 30x20 cells: a third of the image is red (7 x 5 cells,
    # centred, cut to 200 x 100).
    assert 0.3 < reds / (200 * 100) < 0.36


def runs_of_red(line: list[float]) -> int:
    """How many separate red runs a row or column of the red band holds."""
    red = [value == 255 for value in line]
    return sum(1 for index, on in enumerate(red) if on and (index == 0 or not red[index - 1]))


def test_a_tiny_scale_tiles_at_most_max_copies_each_way() -> None:
    """``scale`` fits the mark into 1 px; with 2 px spacing that was 667 x 333 copies."""
    band = render("wm:1:re:2:2:0.00001", flat(2000, 1000)).extract_band(0)
    across = runs_of_red(band.crop(0, 500, 2000, 1).tolist()[0])
    down = runs_of_red([row[0] for row in band.crop(1000, 0, 1, 1000).tolist()])
    assert 100 < across <= watermark.MAX_COPIES
    assert 50 < down <= watermark.MAX_COPIES


def test_the_watermark_keeps_the_size_and_the_alpha() -> None:
    image = render("wm:1:ce", images.png_with_alpha(120, 80))
    assert (image.width, image.height, image.bands) == (120, 80, 4)
    assert image.getpoint(60, 40) == [*RED, 255.0]
    assert image.getpoint(0, 0)[3] == 0  # a transparent corner stays so


def test_every_frame_of_an_animation_is_watermarked() -> None:
    image = render("wm:1:nowe", images.animated_gif(), fmt="gif")
    frames = image.get("n-pages")
    assert frames == 6
    for index in range(frames):
        assert colour(image, 2, 2 + index * 90) == RED


def test_no_opacity_is_no_watermark() -> None:
    options = parse_path("/wm:0:soea/plain/a.png").options
    assert options.watermark.opacity == 0
    assert colour(render("wm:0:nowe"), 2, 2) == GREY
