"""The processed image into bytes: metadata kept, quality, encoder, ``max_bytes``.

Two encoders. libvips' savers stream strips through libvips' thread pool
and write-behind thread. When every pixel upstream is already in memory
(:attr:`~django_oximg.core.pipeline.load.Loaded.in_memory`), the result is
instead computed on the render thread with region fetches and encoded by
:mod:`django_oximg.core.pipeline.encoder` (Pillow) with libvips' settings and the
same output: two render threads then keep two cores busy, where libvips'
savers left a fifth of them idle (docs/design.md). With ``max_bytes`` the
same pixels are encoded again at lower qualities until the result fits;
with ``autoquality`` they are encoded at the qualities its search tries
(:mod:`~django_oximg.core.pipeline.autoquality`), before ``max_bytes``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import pyvips

from django_oximg.core import exif, keys
from django_oximg.core.errors import ResultTooLarge, UnsupportedFormat
from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.options import OUTPUT_FORMATS, Options
from django_oximg.core.options.autoquality import QualityTarget
from django_oximg.core.pipeline import encoder
from django_oximg.core.pipeline.autoquality import Chosen, Reference, search
from django_oximg.core.pipeline.libvips import (
    EXIF_FIELD,
    EXIF_PREVIEW_FIELD,
    ICC_FIELD,
    Image,
    watched,
)
from django_oximg.core.pipeline.plan import UNSTOPPABLE_ENCODERS, Plan, RenderSettings

#: The image formats the pipeline writes, with their content types.
CONTENT_TYPES = {fmt: keys.CONTENT_TYPES[fmt] for fmt in OUTPUT_FORMATS}

#: Formats whose encoder has a quality setting (the ``max_bytes`` loop lowers it).
LOSSY_FORMATS = frozenset({"jpeg", "webp", "avif"})

#: The ``max_bytes`` loop gives up below this quality: the result is garbage.
MIN_QUALITY = 10

#: Result rows computed per region fetch. One fetch of the whole result makes
#: every step of the pipeline hold its whole output at once: 109 MiB for a
#: 1350x900 result of a 2448x1632 decode, against 34 MiB in strips of 64
#: rows (libvips' saver: 23 MiB); the CPU is the same (docs/BENCHMARKS.md).
FETCH_ROWS = 64


def check_format(fmt: str) -> None:
    """Refuse an output format we cannot write."""
    if fmt not in CONTENT_TYPES:
        raise UnsupportedFormat(f"unknown output format {fmt!r}")


class Encoded(NamedTuple):
    """An encoded result: its bytes, its format, and the quality it was encoded at.

    What :func:`encode` and ``format:best``'s
    :func:`~django_oximg.core.pipeline.best.encode_best` give the render.
    """

    data: bytes
    format: str
    #: The quality ``autoquality`` chose; 0 when it did not run.
    quality: int = 0
    #: Encodes the ``autoquality`` searches made; 0 when none ran.
    search_encodes: int = 0


def encode(
    image: Image, plan: Plan, settings: RenderSettings, deadline: Deadline, in_memory: bool
) -> Encoded:
    """``image`` encoded as ``plan`` says, in Pillow when ``in_memory`` allows, else libvips."""
    image, keep, exif_block = strip_metadata(image, plan.options)
    image = watched(image, deadline)
    target = plan.quality_target
    if target is not None:
        # The search encodes the same pixels several times and compares them.
        image = watched(image.copy_memory(), deadline)
    elif in_memory and plan.linear_light:
        # Float pixels pulled through region fetches 64 rows at a time took
        # twice the CPU of one libvips pass (25 against 13 ms for a 2560 px
        # photo into 500 px): compute the 8-bit result once, then fetch it.
        image = watched(image.copy_memory(), deadline)
    pillow = None
    if in_memory:
        pillow = in_memory_encoder(image, plan.format, keep, exif_block, settings)
    if pillow is None and plan.options.max_bytes and target is None:
        # The max_bytes loop may encode again: decode and process only once.
        image = watched(image.copy_memory(), deadline)
    libvips = partial(
        save,
        image,
        plan.format,
        keep=keep,
        effort=plan.effort,
        progressive=settings.jpeg_progressive,
    )
    encode_at = libvips if pillow is None else partial(pillow_or_libvips, pillow, libvips)
    if target is None:
        return Encoded(encode_within_limit(encode_at, plan)[0], plan.format)
    reference = Reference(image) if target.method == "dssim" else None
    chosen = search(encode_at, target, reference, deadline)
    if plan.options.max_bytes and len(chosen.data) > plan.options.max_bytes:
        data, quality = encode_within_limit(encode_at, plan, chosen.quality, chosen.data)
        return Encoded(data, plan.format, quality, chosen.encodes)
    return Encoded(chosen.data, plan.format, chosen.quality, chosen.encodes)


def encode_at_target(
    image: Image, fmt: str, target: QualityTarget, deadline: Deadline | None = None
) -> Chosen:
    """``image`` encoded in ``fmt`` at the quality ``target`` asks for, by libvips' savers.

    For callers that hold a processed image and compare formats at one
    perceptual target: metadata is stripped, the encoder settings are the
    pipeline's (:func:`save`; AVIF at its slow effort).
    """
    image = image.copy_memory()
    reference = Reference(image) if target.method == "dssim" else None
    keep = int(pyvips.enums.ForeignKeep.NONE)
    return search(partial(save, image, fmt, keep=keep), target, reference, deadline)


def strip_metadata(image: Image, options: Options) -> tuple[Image, int, bytes | None]:
    """Decide what metadata the result keeps: the image, libvips keep flags, the EXIF block.

    ``strip_metadata`` drops EXIF, XMP and IPTC (GPS, camera serials, the
    embedded preview). With ``keep_copyright`` the source's Artist and
    Copyright tags survive in a fresh block holding nothing else
    (:func:`django_oximg.core.exif.copyright_block`; None when the source
    credits nobody); it becomes the image's only EXIF metadata, so libvips'
    savers write it too (adding the few tags libvips always writes:
    orientation, resolution, dimensions). With ``strip_metadata`` off
    everything the loader read is kept, preview included. An ICC profile is
    kept only when ``strip_color_profile`` is off.
    """
    keep_flags = pyvips.enums.ForeignKeep
    keep = keep_flags.NONE if options.strip_color_profile else keep_flags.ICC
    if not options.strip_metadata:
        return image, int(keep | keep_flags.EXIF | keep_flags.XMP | keep_flags.IPTC), None
    if not options.keep_copyright or not image.get_typeof(EXIF_FIELD):
        return image, int(keep), None
    block = exif.copyright_block(bytes(image.get(EXIF_FIELD)))
    if block is None:
        return image, int(keep), None
    image = image.copy()
    for name in image.get_fields():
        if name.startswith("exif-ifd") or name == EXIF_PREVIEW_FIELD:
            image.remove(name)
    image.set_type(pyvips.GValue.blob_type, EXIF_FIELD, block)
    return image, int(keep | keep_flags.EXIF), block


def save(
    image: Image,
    fmt: str,
    quality: int,
    keep: int,
    effort: int | None = None,
    progressive: bool = False,
) -> bytes:
    """Encode one image with libvips' saver; only the lossy formats use ``quality``.

    ``effort`` is the AVIF or GIF encoder's (:attr:`Plan.effort`; None: the
    plan's default for a small result); ``progressive`` writes a JPEG
    progressive (``JPEG_PROGRESSIVE``).
    """
    if fmt == "jpeg":
        data = image.jpegsave_buffer(
            Q=quality,
            optimize_coding=True,
            interlace=progressive,
            quant_table=encoder.quant_table(quality),
            keep=keep,
        )
    elif fmt == "png":
        data = image.pngsave_buffer(compression=6, keep=keep)
    elif fmt == "webp":
        data = image.webpsave_buffer(Q=quality, effort=encoder.WEBP_EFFORT, keep=keep)
    elif fmt == "avif":
        data = image.heifsave_buffer(
            Q=quality,
            compression="av1",
            effort=UNSTOPPABLE_ENCODERS["avif"].slow.effort if effort is None else effort,
            bitdepth=8,
            keep=keep,
        )
    elif fmt == "gif":
        gif_effort = UNSTOPPABLE_ENCODERS["gif"].slow.effort if effort is None else effort
        data = image.gifsave_buffer(effort=gif_effort, keep=keep)
    else:
        raise UnsupportedFormat(f"unknown output format {fmt!r}")
    return bytes(data)


def in_memory_encoder(
    image: Image,
    fmt: str,
    keep: int,
    exif_block: bytes | None,
    settings: RenderSettings,
) -> Callable[[int], bytes] | None:
    """Compute ``image`` on this thread and return its Pillow encoder by quality, or None.

    None leaves the result to libvips' savers: with ``settings.encoder``
    "libvips", when the result keeps all its metadata (``strip_metadata``
    off: libvips rewrites EXIF, XMP and IPTC), or when
    :mod:`django_oximg.core.pipeline.encoder` does not take its size, bands or format.
    Region fetches run the pipeline on the calling thread, without libvips'
    thread pool, :data:`FETCH_ROWS` rows at a time, so the
    caller must know every pixel upstream is in memory already
    (:attr:`~django_oximg.core.pipeline.load.Loaded.in_memory`); the result
    is held once. ``image`` is :func:`watched` already: the deadline stops
    the fetches. ``exif_block`` (``keep_copyright``) is written as it is.
    """
    width, height, bands = image.width, image.height, image.bands
    if (
        settings.encoder != "pillow"
        or keep & (int(pyvips.enums.ForeignKeep.XMP) | int(pyvips.enums.ForeignKeep.IPTC))
        or not encoder.can_encode(fmt, width, height, bands)
    ):
        return None
    region = pyvips.Region.new(image)
    pixels = bytearray(width * height * bands)
    row_bytes = width * bands
    for top in range(0, height, FETCH_ROWS):
        rows = min(FETCH_ROWS, height - top)
        pixels[top * row_bytes : (top + rows) * row_bytes] = region.fetch(0, top, width, rows)
    icc_profile = None
    if keep & int(pyvips.enums.ForeignKeep.ICC) and image.get_typeof(ICC_FIELD):
        icc_profile = bytes(image.get(ICC_FIELD))
    return partial(
        encoder.encode,
        pixels,
        width,
        height,
        bands,
        fmt,
        icc_profile=icc_profile,
        exif=exif_block,
        progressive=settings.jpeg_progressive,
    )


def pillow_or_libvips(
    pillow: Callable[[int], bytes], libvips: Callable[[int], bytes], quality: int
) -> bytes:
    """Pillow's encoding at ``quality``, or libvips' saver when Pillow's buffer is too small.

    The fallback computes the result again from the pixels upstream (in
    memory already) and writes what ``ENCODER = "libvips"`` would: the same
    pixels and metadata (:class:`django_oximg.core.pipeline.encoder.BufferFull`, a
    JPEG of noise-like detail at quality 90 and above).
    """
    try:
        return pillow(quality)
    except encoder.BufferFull:
        return libvips(quality)


def next_quality(quality: int, size: int, max_bytes: int) -> int:
    """A lower quality for the ``max_bytes`` loop: bigger overshoots step further."""
    overshoot = size / max_bytes
    factor = 0.25 if overshoot > 3 else 0.5 if overshoot > 1.5 else 0.75
    return int(quality * factor)


def encode_within_limit(
    encode_at: Callable[[int], bytes],
    plan: Plan,
    quality: int | None = None,
    data: bytes | None = None,
) -> tuple[bytes, int]:
    """Encode with ``encode_at(quality)``, lowering the quality until it fits ``max_bytes``.

    ``quality`` and ``data``: where to start (``autoquality``'s choice and
    its bytes), instead of :attr:`Plan.quality`. Returns the bytes and
    their quality.
    """
    max_bytes = plan.options.max_bytes
    if quality is None:
        quality = plan.quality
    if data is None:
        data = encode_at(quality)
    if not max_bytes:
        return data, quality
    while len(data) > max_bytes:
        if plan.format not in LOSSY_FORMATS or quality <= MIN_QUALITY:
            raise ResultTooLarge(f"{len(data)} bytes > max_bytes {max_bytes}")
        quality = max(MIN_QUALITY, next_quality(quality, len(data), max_bytes))
        data = encode_at(quality)
    return data, quality
