"""The ``/info`` endpoint's summary of a source: its BlurHash and dominant colour.

Both come from one tiny, upright, sRGB thumbnail of the source, loaded with
shrink-on-load, so even a large source costs little (a HEIC, which
pillow-heif decodes whole, costs what its render does).
"""

from __future__ import annotations

from typing import NamedTuple

import pyvips

from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.options import Options
from django_oximg.core.pipeline.heic import heic_decoded, needs_pillow_heif
from django_oximg.core.pipeline.libvips import Image, ensure_configured, failure, watched
from django_oximg.core.pipeline.load import loader_options
from django_oximg.core.pipeline.plan import Plan, RenderSettings, plan_render
from django_oximg.core.pipeline.probe import SourceInfo, probe
from django_oximg.core.pipeline.steps.colour import srgb

#: Longest side, in pixels, of the thumbnail a summary is computed from. A
#: BlurHash keeps at most 9x9 cosine components and the dominant colour is a
#: histogram, so 32 px is plenty for both; shrink-on-load keeps the decode of
#: a large source small and the pure-Python BlurHash encoder fast.
SUMMARY_SIZE = 32

#: Levels per channel of the dominant-colour histogram: 4 gives 64 bins, coarse
#: enough that the ~1000 pixels of a noisy photo still pile up in one.
COLOUR_LEVELS = 4

#: Pixels at least this opaque count for the dominant colour (transparent
#: areas have no colour anyone sees).
OPAQUE_ALPHA = 128


class Summary(NamedTuple):
    """A source's look in a few bytes: a BlurHash and a dominant colour, each optional."""

    blurhash: str | None
    #: "#rrggbb"
    dominant_color: str | None


def summary_plan(info: SourceInfo, settings: RenderSettings) -> Plan:
    """The plan of the summary's thumbnail, for its memory estimate.

    The summary is read as raw pixels, never encoded; PNG, whose encoder has
    no quality, stands for that.
    """
    return plan_render(info, Options(width=SUMMARY_SIZE, height=SUMMARY_SIZE), "png", settings)


def summarise(
    data: bytes,
    blurhash_components: tuple[int, int] | None,
    dominant_color: bool,
    *,
    deadline: float | None = None,
) -> Summary:
    """Summarise ``data`` from one tiny, upright, sRGB thumbnail of it.

    The thumbnail is loaded with shrink-on-load (JPEG DCT scaling, WebP/HEIF
    scaling), so the cost stays small even for large sources. The BlurHash is
    computed on the thumbnail flattened onto white (BlurHash has no alpha);
    the dominant colour on its opaque pixels (see :func:`dominant_colour`).

    ``deadline`` is watched as for a render, but the (one-tile) output
    is computed in one piece, so a slow decode is stopped late or not at
    all; the real bounds are shrink-on-load and the caller's resolution
    check (``MAX_SRC_RESOLUTION``).
    """
    ensure_configured()
    with Deadline(deadline) as watch:
        try:
            image = summary_thumbnail(data)
            image = watched(srgb(image, strip_profile=True), watch).copy_memory()
            rgba = image.extract_band(0, n=4) if image.hasalpha() else image.bandjoin(255)
            pixels = bytes(rgba.cast("uchar").write_to_memory())
        except pyvips.Error as error:
            raise failure(error, watch) from error
    width = int(image.width)
    blurhash = None
    if blurhash_components is not None:
        blurhash = encode_blurhash(pixels, width, blurhash_components)
    return Summary(blurhash, dominant_colour(pixels) if dominant_color else None)


def summary_thumbnail(data: bytes) -> Image:
    """The summary's thumbnail of ``data``: libvips' own, or of pillow-heif's decode of a HEIC."""
    if needs_pillow_heif(probe(data)):
        return heic_decoded(data, Options()).thumbnail_image(SUMMARY_SIZE, height=SUMMARY_SIZE)
    return pyvips.Image.thumbnail_buffer(
        data, SUMMARY_SIZE, height=SUMMARY_SIZE, option_string=loader_options(False)
    )


def encode_blurhash(rgba: bytes, width: int, components: tuple[int, int]) -> str:
    """The BlurHash of RGBA pixels (``width`` per row), flattened onto white.

    The ``blurhash`` package (pure Python, Wolt's algorithm) does the
    encoding; it wants rows of sRGB triples.
    """
    flat = [_over_white(rgba[i : i + 4]) for i in range(0, len(rgba), 4)]
    rows = [flat[start : start + width] for start in range(0, len(flat), width)]
    x_components, y_components = components
    import blurhash  # only /info with a BlurHash needs it

    return str(blurhash.encode(rows, components_x=x_components, components_y=y_components))


def _over_white(pixel: bytes) -> tuple[int, int, int]:
    red, green, blue, alpha = pixel
    return (
        (red * alpha + 255 * (255 - alpha)) // 255,
        (green * alpha + 255 * (255 - alpha)) // 255,
        (blue * alpha + 255 * (255 - alpha)) // 255,
    )


def dominant_colour(rgba: bytes) -> str:
    """The mean colour of the most populated bin of a coarse RGB histogram, as "#rrggbb".

    Each opaque pixel falls into one of ``COLOUR_LEVELS``\\ :sup:`3` bins; the
    bin holding the most pixels wins (the first one met on a tie, so the
    answer is deterministic) and its pixels' mean is the answer, a colour
    that really occurs rather than a bin's centre. With no opaque pixel at
    all, every pixel counts.
    """
    pixels = [rgba[i : i + 4] for i in range(0, len(rgba), 4)]
    counted = [p for p in pixels if p[3] >= OPAQUE_ALPHA] or pixels
    step = 256 // COLOUR_LEVELS
    bins: dict[tuple[int, int, int], list[int]] = {}
    for red, green, blue, _alpha in counted:
        totals = bins.setdefault((red // step, green // step, blue // step), [0, 0, 0, 0])
        totals[0] += 1
        totals[1] += red
        totals[2] += green
        totals[3] += blue
    count, red, green, blue = max(bins.values(), key=lambda totals: totals[0])
    return "#" + "".join(f"{round(total / count):02x}" for total in (red, green, blue))
