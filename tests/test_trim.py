"""``trim``: a border of one colour is cut away first, and the sizes are planned from the rest."""

from __future__ import annotations

import pytest
import pyvips

from django_oximg.core import pipeline
from django_oximg.core.options import parse_path
from django_oximg.core.options.geometry import plan_geometry
from tests import images

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

BORDER = [20, 200, 40]
#: The picture, and the border around it: left, top, right, bottom.
PICTURE = (200, 120)
MARGINS = (10, 40, 50, 20)


def bordered(*, alpha: bool = False) -> bytes:
    """A 200x120 photo on a flat green border (or a transparent one with ``alpha``)."""
    left, top, right, bottom = MARGINS
    width, height = PICTURE[0] + left + right, PICTURE[1] + top + bottom
    picture = images.photo(*PICTURE)
    if alpha:
        picture = picture.bandjoin(255)
        canvas = pyvips.Image.black(width, height, bands=4).cast("uchar")
    else:
        canvas = (pyvips.Image.black(width, height, bands=3) + BORDER).cast("uchar")
    image = canvas.insert(picture, left, top).copy(interpretation="srgb")
    return bytes(image.pngsave_buffer())


def rendered(url_options: str, source: bytes) -> tuple[int, int]:
    options = parse_path(f"/{url_options}/plain/a.png").options
    result = pipeline.render(source, options, "png", pipeline.RenderSettings())
    image = pyvips.Image.new_from_buffer(result.data, "")
    assert (image.width, image.height) == (result.width, result.height)
    return result.width, result.height


@pytest.mark.parametrize(
    ("url_options", "expected"),
    [
        ("t:10", PICTURE),  # the top-left pixel's colour
        ("t:10:14c828", PICTURE),  # the border's colour, given
        ("t:10:ff00ff", (260, 180)),  # another colour: no border of it
        ("t:10::1", (240, 120)),  # left and right cut by the smaller, 10
        ("t:10::0:1", (200, 140)),  # top and bottom cut by the smaller, 20
        ("t:10::1:1", (240, 140)),
        ("t:10/rs:fit:100:100", (100, 60)),  # planned from what is left
        ("t:10/c:100:50", (100, 50)),  # the crop cuts the trimmed image
        ("t:10/rot:90", (120, 200)),
    ],
)
def test_trim_removes_a_uniform_border(url_options: str, expected: tuple[int, int]) -> None:
    assert rendered(url_options, bordered()) == expected


def test_the_planned_size_is_that_of_the_trimmed_source() -> None:
    options = parse_path("/t:10/rs:fill:90:50/plain/a.png").options
    assert rendered("t:10/rs:fill:90:50", bordered()) == (
        plan_geometry(*PICTURE, options, max_result_dimension=8192).width,
        plan_geometry(*PICTURE, options, max_result_dimension=8192).height,
    )


def test_a_transparent_border_is_trimmed() -> None:
    # imgproxy flattens alpha onto magenta first, so transparency is a colour too.
    assert rendered("t:10", bordered(alpha=True)) == PICTURE


def test_a_flat_image_keeps_everything() -> None:
    flat = bytes((pyvips.Image.black(50, 30, bands=3) + BORDER).cast("uchar").pngsave_buffer())
    assert rendered("t:10", flat) == (50, 30)


def test_animations_are_not_trimmed() -> None:
    # As in imgproxy: each frame would lose another border.
    options = parse_path("/t:10/plain/a.gif").options
    result = pipeline.render(images.animated_gif(), options, "gif", pipeline.RenderSettings())
    assert (result.width, result.height, result.frames) == (120, 90, 6)


# -- where the cut falls, on pixels -----------------------------------------------------------

CONTENT = [0, 0, 200]
#: Marks in two opposite corners of the content, 10x10 each: a cut in the wrong
#: place, or a flipped one, moves them off the corners of the result.
TOP_LEFT_MARK = [255, 0, 0]
BOTTOM_RIGHT_MARK = [255, 220, 0]
MARK = 10


def marked(*, alpha: bool = False) -> bytes:
    """Flat blue content (PICTURE) with a red mark top left and a yellow one bottom
    right, on the green border (MARGINS), or on a transparent one with ``alpha``."""
    left, top, right, bottom = MARGINS
    width, height = PICTURE
    content = (pyvips.Image.black(width, height, bands=3) + CONTENT).cast("uchar")
    content = content.draw_rect(TOP_LEFT_MARK, 0, 0, MARK, MARK, fill=True)
    content = content.draw_rect(
        BOTTOM_RIGHT_MARK, width - MARK, height - MARK, MARK, MARK, fill=True
    )
    size = (width + left + right, height + top + bottom)
    if alpha:
        content = content.bandjoin(255)
        canvas = pyvips.Image.black(*size, bands=4).cast("uchar")
    else:
        canvas = (pyvips.Image.black(*size, bands=3) + BORDER).cast("uchar")
    return bytes(canvas.insert(content, left, top).copy(interpretation="srgb").pngsave_buffer())


def rendered_image(url_options: str, source: bytes) -> pyvips.Image:
    options = parse_path(f"/{url_options}/plain/a.png").options
    result = pipeline.render(source, options, "png", pipeline.RenderSettings())
    return pyvips.Image.new_from_buffer(result.data, "")


@pytest.mark.parametrize(
    ("url_options", "alpha", "kept_border"),
    [
        # The border left on each side of the content: left, top, right, bottom.
        ("t:10", False, (0, 0, 0, 0)),
        ("t:10:14c828", False, (0, 0, 0, 0)),
        ("t:10", True, (0, 0, 0, 0)),
        ("t:10::1", False, (0, 0, 40, 0)),  # left 10, right 50: both cut by 10
        ("t:10::0:1", False, (0, 20, 0, 0)),  # top 40, bottom 20: both cut by 20
        ("t:10::1:1", False, (0, 20, 40, 0)),
    ],
)
def test_trim_cuts_the_border_where_it_is(
    url_options: str, alpha: bool, kept_border: tuple[int, int, int, int]
) -> None:
    image = rendered_image(url_options, marked(alpha=alpha))
    left, top, right, bottom = kept_border
    width, height = PICTURE
    assert (image.width, image.height) == (left + width + right, top + height + bottom)
    x0, y0, x1, y1 = left, top, left + width - 1, top + height - 1  # the content's corners

    def colour(x: int, y: int) -> list[float]:
        return image.getpoint(x, y)[:3]

    assert colour(x0, y0) == colour(x0 + MARK - 1, y0 + MARK - 1) == TOP_LEFT_MARK
    assert colour(x1, y1) == colour(x1 - MARK + 1, y1 - MARK + 1) == BOTTOM_RIGHT_MARK
    assert colour(x1, y0) == colour(x0, y1) == colour(x0 + MARK, y0) == CONTENT
    border = [0, 0, 0] if alpha else BORDER
    if right:
        assert colour(x1 + 1, y0) == colour(image.width - 1, image.height - 1) == border
    if top:
        assert colour(x0, y0 - 1) == colour(0, 0) == border
