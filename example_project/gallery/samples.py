"""Sample images for the demo, drawn with pyvips so a fresh clone needs no downloads.

Each sample exercises one thing the thumbnailer must get right: a photo-sized
landscape JPEG with film grain (resampling, and the bytes each format needs),
a portrait with its subject off-centre (smart crop finds the face), a page of
text (sharpening, and the artefacts JPEG leaves around letters), a JPEG stored
sideways with EXIF orientation 6 (auto-rotation), a logo PNG with transparent
parts (alpha kept) and an animated GIF (animation kept when converting to
WebP). Drawing is deterministic: the same libvips, with the same fonts, draws
the same bytes on every run. The photos made of them have focal points where
their subjects are drawn (:data:`FOCAL_POINTS`), so the gallery's crops keep
them from the first visit, as an editor would set them in the admin.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence

import pyvips
from django.core.files.base import ContentFile
from django.core.files.storage import Storage

from django_oximg.focal import FocalPoint
from gallery.models import Photo

LANDSCAPE = "samples/landscape.jpg"
FACE = "samples/face.jpg"
TEXT = "samples/text.jpg"
PORTRAIT = "samples/portrait.jpg"
LOGO = "samples/logo.png"
BOUNCE = "samples/bounce.gif"

LANDSCAPE_SIZE = (2000, 1333)
FACE_SIZE = (1600, 1000)
#: Centre of the face: right of the middle, so a centre crop cuts it.
FACE_CENTRE = (1150, 450)
TEXT_SIZE = (1200, 800)
#: Middle of the heading, which is drawn from (80, 80) and about 545x65 px.
TEXT_HEADING_POINT = (350, 112)
#: The portrait as a viewer shows it; the file stores it rotated to lie sideways.
PORTRAIT_UPRIGHT_SIZE = (900, 1200)
#: EXIF orientation 6: "rotate 90 degrees clockwise to display".
PORTRAIT_ORIENTATION = 6
#: Centre of the tree's canopy in the upright portrait.
PORTRAIT_CANOPY = (450, 420)
LOGO_SIZE = (800, 800)
BOUNCE_FRAME_SIZE = (320, 240)
BOUNCE_FRAMES = 12
#: Frame delay in milliseconds; above the 20 ms browsers clamp to.
BOUNCE_DELAY_MS = 80

#: Fixed seed so the noise texture, and so the JPEG bytes, repeat run to run.
NOISE_SEED = 20240601

Colour = Sequence[float]

# Serialises lazy generation from concurrent first requests in one process, so
# two threads don't both save a sample (leaving a renamed duplicate behind) or
# both add the photos.
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


def add_photos() -> list[Photo]:
    """Add a Photo for each sample when there is no Photo at all; return those added.

    So the gallery is never empty: on a fresh database, and again after
    every photo was deleted in the admin. The rows point at the samples'
    files, which a deleted row leaves in place.
    """
    with _generation_lock:
        if Photo.objects.exists():
            return []
        # The page shows the newest first: add them last to first, to show them in order.
        return [
            Photo.objects.create(title=title, image=name, focal_point=FOCAL_POINTS.get(name))
            for name, title in reversed(PHOTOS.items())
        ]


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
    cx, cy = PORTRAIT_CANOPY
    canopy = 1 - ((_distance(x, y * 1.3, cx, cy * 1.3) - 260) / 6).clamp(min=0, max=1)
    image = _over(image, _blend((30, 110, 40), (60, 150, 50), y / height), canopy)

    grain = pyvips.Image.gaussnoise(width, height, sigma=5, mean=0, seed=NOISE_SEED + 1)
    sideways = _as_srgb(image + grain).rot("d270").copy()
    sideways.set_type(pyvips.GValue.gint_type, "orientation", PORTRAIT_ORIENTATION)
    return sideways.jpegsave_buffer(Q=88)  # type: ignore[no-any-return]


def draw_face() -> bytes:
    """A head and shoulders right of the middle, before a studio backdrop, as a JPEG.

    Flat shapes, but with what libvips' attention crop looks for: skin tones,
    saturated colour and edges (eyes, mouth), all on the face.
    """
    width, height = FACE_SIZE
    cx, cy = FACE_CENTRE
    x, _y = _coordinates(width, height)
    image = _blend((70, 85, 100), (150, 160, 170), x / width)
    image = _ellipse(image, (40, 60, 110), cx, cy + 620, 360, 330)  # shoulders
    image = _ellipse(image, (200, 150, 120), cx, cy + 270, 75, 140)  # neck
    image = _ellipse(image, (60, 40, 25), cx, cy - 40, 190, 220)  # hair
    image = _ellipse(image, (225, 175, 145), cx, cy + 20, 150, 195)  # face
    for eye_x in (cx - 58, cx + 58):
        image = _ellipse(image, (250, 250, 250), eye_x, cy - 10, 30, 16)
        image = _ellipse(image, (50, 90, 60), eye_x, cy - 10, 13, 13)
        image = _ellipse(image, (60, 40, 25), eye_x, cy - 52, 38, 8)  # brow
    image = _ellipse(image, (205, 150, 125), cx, cy + 45, 16, 30)  # nose
    image = _ellipse(image, (190, 80, 80), cx, cy + 110, 52, 16)  # mouth
    grain = pyvips.Image.gaussnoise(width, height, sigma=6, mean=0, seed=NOISE_SEED + 2)
    return _as_srgb(image + grain).jpegsave_buffer(Q=88, strip=True)  # type: ignore[no-any-return]


#: The notice's words (Pango markup): long enough to fill the page.
TEXT_HEADING = "<b>Opening hours</b>"
TEXT_BODY = (
    "Monday to Friday 8:00 to 18:30, Saturday 9:00 to 14:00, closed on Sundays "
    "and public holidays. Parcels left at the desk are kept for fourteen days; "
    "bring the slip and a photo ID. Small type at small sizes is where a "
    "thumbnailer shows its care: resampling without aliasing, a light "
    "sharpening after the downscale, and a quality high enough that JPEG "
    "does not ring around the strokes. Thank you for your patience."
)


def draw_text() -> bytes:
    """A printed notice: a bold heading and a paragraph of small type, as a JPEG.

    Thin dark strokes on a light ground: downscaled, they show what
    sharpening does, and JPEG at a low quality rings around every letter.
    """
    width, height = TEXT_SIZE
    _x, y = _coordinates(width, height)
    paper = _blend((250, 248, 240), (236, 232, 220), y / height)
    image = _over(paper, (200, 40, 40), (y < 40).ifthenelse(1.0, 0.0))
    for markup, top, dpi in ((TEXT_HEADING, 80, 400), (TEXT_BODY, 230, 230)):
        ink = pyvips.Image.text(markup, font="sans", width=width - 160, dpi=dpi, spacing=8)
        ink = ink.embed(80, top, width, height) / 255
        image = _over(image, (30, 30, 40), ink)
    return _as_srgb(image).jpegsave_buffer(Q=92, strip=True)  # type: ignore[no-any-return]


def draw_logo() -> bytes:
    """A colour disc with a transparent ring and soft edges, as an RGBA PNG.

    The checkerboard behind the thumbnail shows through the ring and around
    the disc: the alpha channel survived.
    """
    width, height = LOGO_SIZE
    x, y = _coordinates(width, height)
    colour = _blend((230, 40, 150), (40, 200, 230), x / width)
    radius = _distance(x, y, width / 2, height / 2)
    disc = ((330 - radius) / 70).clamp(min=0, max=1)
    ring = ((radius - 200).abs() - 15).clamp(min=0, max=1)
    alpha = disc * ring * 255
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
    FACE: draw_face,
    TEXT: draw_text,
    PORTRAIT: draw_portrait,
    LOGO: draw_logo,
    BOUNCE: draw_bounce,
}

#: The Photo rows :func:`add_photos` makes: sample name -> title.
PHOTOS = {
    LANDSCAPE: "Sunset over the hills",
    FACE: "Portrait",
    TEXT: "Opening hours",
    PORTRAIT: "A tree (stored sideways)",
    LOGO: "Logo with a transparent ring",
    BOUNCE: "Bouncing ball",
}


#: Where the samples' crops centre (docs/focal-point.md), as the admin sets
#: it: on what each shows, worked out from where it is drawn. The logo and
#: the ball are centred, and have none: the gallery smart-crops them.
FOCAL_POINTS = {
    # The sun's glow, near the right edge, above the far ridge.
    LANDSCAPE: FocalPoint(1720 / LANDSCAPE_SIZE[0], 400 / LANDSCAPE_SIZE[1]),
    # Between the eyes.
    FACE: FocalPoint(FACE_CENTRE[0] / FACE_SIZE[0], FACE_CENTRE[1] / FACE_SIZE[1]),
    # The heading's first words: a crop keeps the left edge, where lines start.
    TEXT: FocalPoint(TEXT_HEADING_POINT[0] / TEXT_SIZE[0], TEXT_HEADING_POINT[1] / TEXT_SIZE[1]),
    # The tree's canopy, upright as shown (the point is of the image as shown).
    PORTRAIT: FocalPoint(
        PORTRAIT_CANOPY[0] / PORTRAIT_UPRIGHT_SIZE[0],
        PORTRAIT_CANOPY[1] / PORTRAIT_UPRIGHT_SIZE[1],
    ),
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


def _ellipse(
    image: pyvips.Image, colour: Colour, cx: float, cy: float, rx: float, ry: float
) -> pyvips.Image:
    """Paint an anti-aliased ellipse, computing only the pixels of its bounding box.

    A whole-frame coverage image per shape would make every shape cost the
    whole frame; a face of a dozen shapes would take seconds to draw.
    """
    left, top = max(0, int(cx - rx) - 2), max(0, int(cy - ry) - 2)
    right, bottom = min(image.width, int(cx + rx) + 3), min(image.height, int(cy + ry) + 3)
    x, y = _coordinates(right - left, bottom - top)
    reach = ((x + left - cx) / rx) ** 2 + ((y + top - cy) / ry) ** 2
    # 1 - reach falls by about 2/min(rx, ry) a pixel at the edge: about a pixel of blend.
    coverage = ((1 - reach) * min(rx, ry) / 2).clamp(min=0, max=1)
    box = image.crop(left, top, right - left, bottom - top)
    return image.insert(_over(box, colour, coverage), left, top)


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
