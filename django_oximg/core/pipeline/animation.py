"""An animation's frames: split from the loaded strip, joined back, timed.

libvips loads an animation as one tall strip of frames (``page-height``
rows each). A still image, or an animation that is not kept, is one frame.
"""

from __future__ import annotations

import pyvips

from django_oximg.core.pipeline.libvips import Image

#: Browsers play shorter GIF/WebP delays at 100 ms or as fast as they can; 20 ms
#: is the shortest delay that plays consistently.
MIN_FRAME_DELAY_MS = 20


def frame_layout(image: Image, animated: bool) -> tuple[int, int]:
    """How many frames an animation strip holds, and their height (a still image: one)."""
    if not animated or not image.get_typeof("page-height"):
        return 1, image.height
    page_height = int(image.get("page-height"))
    return image.height // page_height, page_height


def split_frames(image: Image, count: int, height: int) -> list[Image]:
    """The ``count`` frames of ``height`` rows of a strip (:func:`frame_layout`)."""
    if count == 1:
        return [image]
    return [image.crop(0, i * height, image.width, height) for i in range(count)]


def join_frames(frames: list[Image], source: Image) -> Image:
    """Put frames back into one strip with page height, loop and clamped delays."""
    if len(frames) == 1:
        return frames[0]
    return animation_strip(pyvips.Image.arrayjoin(frames, across=1), frames[0].height, source)


def animation_strip(strip: Image, frame_height: int, source: Image) -> Image:
    """``strip`` as an animation of ``frame_height`` pages: ``source``'s loop, clamped delays."""
    strip = strip.copy()
    strip.set_type(pyvips.GValue.gint_type, "page-height", frame_height)
    if source.get_typeof("loop"):
        strip.set_type(pyvips.GValue.gint_type, "loop", int(source.get("loop")))
    if source.get_typeof("delay"):
        delays = [max(int(delay), MIN_FRAME_DELAY_MS) for delay in source.get("delay")]
        strip.set_type(pyvips.GValue.array_int_type, "delay", delays)
    return strip
