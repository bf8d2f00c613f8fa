"""The limits a source is refused by, checked from numbers alone.

The server checks them when it stages a render
(:mod:`django_oximg.core.serving.staging`) and when it admits one
(:mod:`django_oximg.core.limits.memory`); the template tags check the
resolution from a source's header (``thumbnails.py``) and the upload
validator every one of them (``validators.py``). All of them call these
functions, so what an upload form accepts, what a tag prints a URL for and
what the server renders cannot drift apart. No libvips here: the tags must
not load it.

Each error is a :class:`~django_oximg.core.errors.SourceTooLarge` naming its
limit (one of the names below), what the source has of it and the most
allowed.
"""

from __future__ import annotations

from django_oximg.core.errors import SourceTooLarge

#: The names of the limits, as :attr:`SourceTooLarge.limit` gives them.
FILE_SIZE = "file_size"
RESOLUTION = "resolution"
FRAME_RESOLUTION = "frame_resolution"
FRAMES = "frames"
MEMORY = "memory"


def check_file_size(size: int, limit: int) -> None:
    """Refuse a source of more than ``limit`` bytes."""
    if size > limit:
        raise SourceTooLarge(
            f"{size} bytes exceeds {limit}", limit=FILE_SIZE, found=size, allowed=limit
        )


def check_resolution(width: int, height: int, frames: int, limit: int, frame_limit: int) -> None:
    """Refuse ``frames`` frames of ``width`` x ``height`` over the resolution limits.

    ``limit`` bounds the pixels of every frame rendered together;
    ``frame_limit`` (0: none) each frame of an animation.
    """
    pixels = width * height * frames
    if pixels > limit:
        raise SourceTooLarge(
            f"{width}x{height}x{frames} px exceeds {limit}",
            limit=RESOLUTION,
            found=pixels,
            allowed=limit,
            size=(width, height, frames),
        )
    if frames > 1 and frame_limit and width * height > frame_limit:
        raise SourceTooLarge(
            f"{width}x{height} px frames exceed {frame_limit}",
            limit=FRAME_RESOLUTION,
            found=width * height,
            allowed=frame_limit,
            size=(width, height, frames),
        )


def check_frames(frames: int, limit: int, what: str = "") -> None:
    """Refuse more than ``limit`` frames (``what`` begins the detail, e.g. "raw: ")."""
    if frames > limit:
        raise SourceTooLarge(f"{what}{frames} frames", limit=FRAMES, found=frames, allowed=limit)


def check_memory(cost: int, budget: int) -> None:
    """Refuse a job whose estimated peak memory, ``cost`` bytes, exceeds the whole ``budget``."""
    if cost > budget:
        raise SourceTooLarge(
            f"job needs {cost} bytes, which exceeds the memory budget of {budget} bytes",
            limit=MEMORY,
            found=cost,
            allowed=budget,
        )
