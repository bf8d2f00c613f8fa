"""``pixelate``: blocks of one colour, as many as imgproxy makes, at the planned size."""

from __future__ import annotations

import pytest
import pyvips

from django_oximg.core import pipeline
from django_oximg.core.options import build_path, parse_path
from django_oximg.core.options.geometry import plan_geometry
from tests import images

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free


def render(url_options: str, source: bytes) -> tuple[pipeline.Rendered, pyvips.Image]:
    options = parse_path(f"/{url_options}/plain/a.png").options
    result = pipeline.render(source, options, "png", pipeline.RenderSettings())
    return result, pyvips.Image.new_from_buffer(result.data, "")


def blocks_are_uniform(image: pyvips.Image, size: int) -> bool:
    """Whether every whole ``size`` x ``size`` block from the top left is one colour."""
    for top in range(0, image.height - size + 1, size):
        for left in range(0, image.width - size + 1, size):
            block = image.crop(left, top, size, size)
            if any(band.max() != band.min() for band in block.bandsplit()):
                return False
    return True


@pytest.mark.parametrize(("size", "width", "height"), [(8, 120, 80), (10, 123, 77), (16, 64, 64)])
def test_a_pixelated_image_is_made_of_blocks(size: int, width: int, height: int) -> None:
    source = images.png_with_alpha(width, height)
    result, image = render(f"pix:{size}", source)
    assert (result.width, result.height) == (width, height)
    assert blocks_are_uniform(image, size)
    _, plain = render("q:80", source)
    assert not blocks_are_uniform(plain, size)  # the source itself is not blocky


def test_blocks_are_output_pixels_after_the_resize() -> None:
    source = images.jpeg(400, 300)
    result, image = render("rs:fit:100:100/pix:5", source)
    planned = plan_geometry(
        400, 300, parse_path("/rs:fit:100:100/pix:5/plain/a").options, max_result_dimension=8192
    )
    assert (result.width, result.height) == (planned.width, planned.height) == (100, 75)
    assert blocks_are_uniform(image, 5)


def test_blocks_never_outgrow_the_image() -> None:
    # imgproxy takes the longer side when the block is larger: one flat colour.
    result, image = render("pix:1000", images.jpeg(60, 40))
    assert (result.width, result.height) == (60, 40)
    assert all(band.max() == band.min() for band in image.bandsplit())


@pytest.mark.parametrize("text", ["pix:0", "pix:1"])
def test_a_block_of_one_pixel_is_no_pixelation(text: str) -> None:
    options = parse_path(f"/{text}/plain/a.png").options
    assert options.pixelate == 0
    assert build_path(options, "a.png") == "/plain/a.png"
