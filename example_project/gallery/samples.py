"""Sample images for the demo, drawn with pyvips so a fresh clone needs no downloads.

Each sample exercises one thing the thumbnailer must get right: a photo-sized
JPEG with texture (resampling, smart crop), a JPEG stored sideways with EXIF
orientation 6 (auto-rotation), a PNG with a soft alpha edge (transparency kept)
and an animated GIF (animation kept when converting to WebP). Drawing is
deterministic: the same libvips draws the same bytes on every run.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence

import pyvips
from django.core.files.base import ContentFile
from django.core.files.storage import Storage

LANDSCAPE = "samples/landscape.jpg"
PORTRAIT = "samples/portrait.jpg"
BADGE = "samples/badge.png"
BOUNCE = "samples/bounce.gif"

LANDSCAPE_SIZE = (2000, 1333)
#: The portrait as a viewer shows it; the file stores it rotated to lie sideways.
PORTRAIT_UPRIGHT_SIZE = (900, 1200)
#: EXIF orientation 6: "rotate 90 degrees clockwise to display".
PORTRAIT_ORIENTATION = 6
BADGE_SIZE = (800, 800)
BOUNCE_FRAME_SIZE = (320, 240)
BOUNCE_FRAMES = 12
#: Frame delay in milliseconds; above the 20 ms browsers clamp to.
BOUNCE_DELAY_MS = 80

#: Fixed seed so the noise texture, and so the JPEG bytes, repeat run to run.
NOISE_SEED = 20240601

Colour = Sequence[float]

# Serialises lazy generation from concurrent first requests in one process, so
# two threads don't both save a sample and leave a renamed duplicate behind.
_generation_lock = threading.Lock()


def ensure_samples(storage: Storage) -> list[str]:
    """Draw and save every sample missing from ``storage``; return the names drawn."""
    drawn = []
    with _generation_lock:
        for name, draw in SAMPLES.items():
            if not storage.exists(name):
                storage.save(name, ContentFile(draw()))
                drawn.append(name)
    return drawn


def samples_are_missing(storage: Storage) -> bool:
    """Whether any sample still needs drawing (a cheap check for every page view)."""
    return not all(storage.exists(name) for name in SAMPLES)


def draw_landscape() -> bytes:
    """A sunset over two mountain ranges, with film-grain noise, as a JPEG."""
    width, height = LANDSCAPE_SIZE
    x, y = _coordinates(width, height)

    sky = _blend((30, 60, 140), (250, 170, 90), (y / (height * 0.62)).clamp(min=0, max=1))
    sun_glow = (-_distance(x, y, 1720, 400) / 160).exp()
    sky = sky + sun_glow * [255, 200, 120]

    far_ridge = 700 + 90 * _sine(x, 620, 10) + 35 * _sine(x, 230, 70)
    far_hills = _blend((95, 90, 140), (60, 70, 110), ((y - far_ridge) / 300).clamp(min=0, max=1))
    image = _over(sky, far_hills, _below(y, far_ridge))

    near_ridge = 930 + 70 * _sine(x, 900, 200) + 25 * _sine(x, 170, 0) + 8 * _sine(x, 37, 0)
    near_hills = _blend((55, 95, 45), (20, 45, 25), ((y - near_ridge) / 400).clamp(min=0, max=1))
    image = _over(image, near_hills, _below(y, near_ridge))

    grain = pyvips.Image.gaussnoise(width, height, sigma=9, mean=0, seed=NOISE_SEED)
    return _as_srgb(image + grain).jpegsave_buffer(Q=88, strip=True)  # type: ignore[no-any-return]


def draw_portrait() -> bytes:
    """A tree under a sky, stored sideways with EXIF orientation 6, as a JPEG.

    Sky at the top and grass at the bottom make "upright" testable: after
    auto-rotation the top rows must be bluer than the bottom rows.
    """
    width, height = PORTRAIT_UPRIGHT_SIZE
    x, y = _coordinates(width, height)

    sky = _blend((70, 130, 220), (200, 225, 245), (y / (height * 0.7)).clamp(min=0, max=1))
    grass_depth = ((y - height * 0.7) / (height * 0.3)).clamp(min=0, max=1)
    grass = _blend((90, 160, 60), (40, 100, 30), grass_depth)
    image = _over(sky, grass, _below(y, height * 0.7 + 12 * _sine(x, 300, 40)))

    trunk = ((x - width / 2).abs() < 35) & (y > 520) & (y < 900)
    image = _over(image, (100, 65, 35), trunk.ifthenelse(1.0, 0.0))
    canopy = 1 - ((_distance(x, y * 1.3, width / 2, 420 * 1.3) - 260) / 6).clamp(min=0, max=1)
    image = _over(image, _blend((30, 110, 40), (60, 150, 50), y / height), canopy)

    grain = pyvips.Image.gaussnoise(width, height, sigma=5, mean=0, seed=NOISE_SEED + 1)
    sideways = _as_srgb(image + grain).rot("d270").copy()
    sideways.set_type(pyvips.GValue.gint_type, "orientation", PORTRAIT_ORIENTATION)
    return sideways.jpegsave_buffer(Q=88)  # type: ignore[no-any-return]


def draw_badge() -> bytes:
    """A soft-edged colour disc on a transparent background, as an RGBA PNG."""
    width, height = BADGE_SIZE
    x, y = _coordinates(width, height)
    colour = _blend((230, 40, 150), (40, 200, 230), x / width)
    alpha = ((330 - _distance(x, y, width / 2, height / 2)) / 70).clamp(min=0, max=1) * 255
    rgba = _as_srgb(colour).bandjoin(alpha.cast("uchar"))
    return rgba.pngsave_buffer(compression=9)  # type: ignore[no-any-return]


def draw_bounce() -> bytes:
    """A ball bouncing across a gradient, 12 frames looping forever, as a GIF."""
    width, height = BOUNCE_FRAME_SIZE
    x, y = _coordinates(width, height)
    background = _blend((250, 240, 210), (180, 210, 240), y / height)
    frames = [_bounce_frame(background, x, y, index) for index in range(BOUNCE_FRAMES)]
    strip = pyvips.Image.arrayjoin(frames, across=1).copy()
    strip.set_type(pyvips.GValue.gint_type, "page-height", height)
    strip.set_type(pyvips.GValue.array_int_type, "delay", [BOUNCE_DELAY_MS] * BOUNCE_FRAMES)
    strip.set_type(pyvips.GValue.gint_type, "loop", 0)
    return strip.gifsave_buffer()  # type: ignore[no-any-return]


SAMPLES: dict[str, Callable[[], bytes]] = {
    LANDSCAPE: draw_landscape,
    PORTRAIT: draw_portrait,
    BADGE: draw_badge,
    BOUNCE: draw_bounce,
}


def _bounce_frame(
    background: pyvips.Image, x: pyvips.Image, y: pyvips.Image, index: int
) -> pyvips.Image:
    """One frame: the ball rolls right and back at a steady pace, hopping once each way.

    Every coordinate is periodic in ``phase``, so the loop has no jump.
    """
    phase = index / BOUNCE_FRAMES
    centre_x = 40 + (1 - abs(1 - 2 * phase)) * 240
    centre_y = 200 - abs(math.sin(phase * 2 * math.pi)) * 140
    ball = 1 - (_distance(x, y, centre_x, centre_y) - 28).clamp(min=0, max=1)
    return _as_srgb(_over(background, (220, 50, 40), ball))


def _coordinates(width: int, height: int) -> tuple[pyvips.Image, pyvips.Image]:
    """Float images holding each pixel's x and y."""
    xyz = pyvips.Image.xyz(width, height).cast("float")
    return xyz[0], xyz[1]


def _distance(x: pyvips.Image, y: pyvips.Image, cx: float, cy: float) -> pyvips.Image:
    return ((x - cx) ** 2 + (y - cy) ** 2) ** 0.5


def _sine(x: pyvips.Image, period: float, phase_degrees: float) -> pyvips.Image:
    """sin over x with the given period in pixels (libvips' sin takes degrees)."""
    return (x * (360 / period) + phase_degrees).sin()


def _blend(start: Colour, end: Colour, t: pyvips.Image) -> pyvips.Image:
    """A 3-band colour image going from ``start`` at t=0 to ``end`` at t=1."""
    return t * [e - s for s, e in zip(start, end, strict=True)] + list(start)


def _below(y: pyvips.Image, ridge: pyvips.Image | float) -> pyvips.Image:
    """Coverage 0..1 of the area under a ridge line, anti-aliased over two pixels."""
    return ((y - ridge) / 2).clamp(min=0, max=1)


def _over(under: pyvips.Image, over: pyvips.Image | Colour, coverage: pyvips.Image) -> pyvips.Image:
    """Paint ``over`` (an image or a flat colour) on ``under`` where ``coverage`` (0..1) says."""
    painted = coverage * (list(over) if isinstance(over, Sequence) else over)
    return under * (1 - coverage) + painted


def _as_srgb(image: pyvips.Image) -> pyvips.Image:
    """Clip a float drawing to 8-bit sRGB, ready to save."""
    return image.clamp(min=0, max=255).cast("uchar").copy(interpretation="srgb")
