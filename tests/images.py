"""Test images drawn with pyvips: nothing is downloaded or vendored."""

from __future__ import annotations

import pyvips


def photo(width: int = 640, height: int = 480) -> pyvips.Image:
    """A photo-like RGB image: smooth gradients plus fine noise, no flat areas."""
    xyz = pyvips.Image.xyz(width, height)
    x = xyz[0] * (255.0 / max(width - 1, 1))
    y = xyz[1] * (255.0 / max(height - 1, 1))
    noise = pyvips.Image.gaussnoise(width, height, sigma=12, mean=0)
    image = x.bandjoin([y, (x + y) / 2]) + noise
    return image.cast("uchar")


def jpeg(width: int = 640, height: int = 480, **save: object) -> bytes:
    return bytes(photo(width, height).jpegsave_buffer(Q=90, **save))


def png_with_alpha(width: int = 320, height: int = 240) -> bytes:
    rgb = photo(width, height)
    xyz = pyvips.Image.xyz(width, height)
    cx, cy = width / 2, height / 2
    distance = ((xyz[0] - cx) ** 2 + (xyz[1] - cy) ** 2) ** 0.5
    alpha = (distance < min(cx, cy)).ifthenelse(255, 0).cast("uchar")
    return bytes(rgb.bandjoin(alpha).pngsave_buffer())


def animated_gif(width: int = 120, height: int = 90, frames: int = 6) -> bytes:
    pages = []
    for index in range(frames):
        frame = pyvips.Image.black(width, height, bands=3).linear(1, 40)
        frame = frame.draw_rect([255, 200, 0], index * (width // frames), 10, 20, 20, fill=True)
        pages.append(frame.cast("uchar"))
    image = pyvips.Image.arrayjoin(pages, across=1)
    image = image.copy()
    image.set_type(pyvips.GValue.gint_type, "page-height", height)
    image.set_type(pyvips.GValue.array_int_type, "delay", [100] * frames)
    image.set_type(pyvips.GValue.gint_type, "loop", 0)
    return bytes(image.gifsave_buffer())


def credited_jpeg(
    width: int = 1200, height: int = 800, artist: str = "Jane Doe", copyright: str = "ACME Photo"
) -> bytes:
    """A JPEG as cameras and editors leave them: Artist and Copyright among other
    EXIF tags (camera, a private comment) and an embedded preview image (IFD1)
    of several kilobytes, which libvips' loaders read as ``jpeg-thumbnail-data``."""
    preview = bytes(photo(160, 120).jpegsave_buffer(Q=95))
    image = photo(width, height).copy()
    for name, value in [
        ("exif-ifd0-Artist", artist),
        ("exif-ifd0-Copyright", copyright),
        ("exif-ifd0-Make", "Camera Maker"),
        ("exif-ifd2-UserComment", "secret place"),
    ]:
        image.set_type(pyvips.GValue.gstr_type, name, value)
    image.set_type(pyvips.GValue.blob_type, "jpeg-thumbnail-data", preview)
    return bytes(image.jpegsave_buffer(Q=90, keep=pyvips.enums.ForeignKeep.ALL))
