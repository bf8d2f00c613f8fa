"""Estimate a job's peak memory from its source header, before any pixel is decoded.

Part of step 6 of a request (the map: :mod:`django_oximg.core.serving`).

The executor reserves this estimate against the per-process memory budget, so
the figure must be cheap (header only) and on the safe side. Decoders differ a
lot: a baseline JPEG streams through shrink-on-load, a progressive JPEG holds
every DCT coefficient of the whole image, an interlaced PNG or a GIF frame is
decoded whole, and libheif decodes an AVIF whole several times over.

The model is the sum of four parts, each fitted to peak RSS measured in fresh
processes by ``bench/memory.py weights`` (libvips 8.18.7, one libvips thread;
table and ratios in docs/BENCHMARKS.md, method in docs/operations.md):

* ``BASE_BYTES``, a fixed overhead;
* the encoded source once more, because pyvips copies a buffer it passes to
  libvips;
* the decode, by format, in bytes per *decoded* pixel (after shrink-on-load);
* the output, in bytes per output pixel by encoder (and per frame for
  animations), measured by ``bench/encoders.py matrix`` from 256x256 to
  8192x8192 (docs/security.md), plus, for a render in a child process
  (:mod:`django_oximg.core.pipeline.isolated`), that process itself.

The ``crop`` and ``trim`` options load the whole source at full size (no
shrink-on-load) and keep the decoded pixels in memory, so a request with
them costs more. The output term follows the plan's final size, so what
``extend``, ``extend_aspect_ratio``, ``padding`` and ``zoom`` add is in it;
a watermark adds its decoded image and a layer the size of each frame.
Every constant is rounded up from the worst measured case, so the estimate is
at or above the measured peak everywhere: 1.07-1.35x for most jobs above
50 MiB, up to 2.5x for small jobs (the fixed base dominates) and about 2x
for ``crop`` of very large sources (libvips then decodes to a temporary file);
over the encoder matrix, 1.11x at the least.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from django_oximg.core.pipeline import Plan, SourceInfo, encoder, jpeg
from django_oximg.core.pipeline.plan import Candidate

MIB = 1024 * 1024

#: Fixed overhead of any job: libvips' per-image buffers and bookkeeping. The
#: smallest measured jobs (1 MP) peak at 5-10 MiB over the idle process; the
#: rest is margin for a second libvips thread (LIBVIPS_CONCURRENCY=2 measured
#: 2-14 MiB above one thread).
BASE_BYTES = 12 * MIB

#: Bytes per output pixel (of one frame) of the output side: the pipeline's
#: last buffers and what the encoder holds. libjpeg and libspng stream
#: strips, but the resize before them holds its window (measured up to 5.8
#: for an enlarged 8192x8192 JPEG, 4.3 PNG); libwebp and libheif hold the
#: whole picture, again as YUV, plus their own state (measured 8.6 WebP,
#: 17.7-20.5 AVIF); the GIF quantiser a whole RGBA frame, its indexes and
#: histogram (measured 13.5). Rounded up; ``sm`` gravity and ``max_bytes``
#: keep the processed image in memory as well, within these.
OUTPUT_BYTES_PER_PIXEL = {"jpeg": 6.5, "png": 5.0, "webp": 10.0, "avif": 24.0, "gif": 16.0}

#: What an ``autoquality`` search holds on top, in bytes per output pixel:
#: the processed image in memory (4), the best result so far and the one
#: being encoded (up to 3 each at quality 100), and for ``dssim`` the
#: reference's float lightness (4) and its weights on 2x2 blocks at three
#: scales (1.4), a candidate's float difference (4) and its decode as
#: libvips computes it in strips (rounded up to 6; the metric's part
#: measured 13.9 in all, reference and candidates, on a 6 MP image).
AUTOQUALITY_BYTES_PER_PIXEL = {"size": 10.0, "dssim": 26.0}

#: The same for a result with an alpha channel, where it costs more: libwebp
#: compresses the alpha plane apart (measured 29.9), libheif encodes it as
#: a second image (measured 33.1).
ALPHA_OUTPUT_BYTES_PER_PIXEL = {"webp": 36.0, "avif": 38.0}

#: Detail that does not compress (noise, film grain, foliage at full size)
#: costs the encoders more at high qualities, in bytes per output pixel on
#: top of the weights above: libwebp keeps a token for every coefficient it
#: codes, about 0.6 bytes per pixel more for each quality step above 70
#: (measured up to 12.6 at q100); a JPEG with whole chroma (q90 and above)
#: reaches 2.8 bytes per pixel, held twice, and one larger than Pillow's
#: buffer is computed again by libvips' saver (measured up to 5.7 more).
#: Photos stay far below; ``bench/memory.py dense`` measures the worst case.
DENSE_DETAIL = {"webp": (70, 0.0, 0.6), "jpeg": (encoder.FULL_CHROMA_QUALITY, 5.5, 0.35)}


def dense_detail_bytes_per_pixel(fmt: str, quality: int) -> float:
    """What incompressible detail adds per output pixel to ``fmt`` at ``quality``."""
    if fmt not in DENSE_DETAIL:
        return 0.0
    start, step, slope = DENSE_DETAIL[fmt]
    if quality < start:
        return 0.0
    return step + slope * (quality - start)


#: A render in a child process: the interpreter with the pipeline imported
#: (measured 25-31 MiB over the render's own memory), besides which it holds
#: its own copy of the source.
CHILD_PROCESS_BYTES = 32 * MIB

#: ``format:best`` keeps the thumbnail in memory (at most 4 bands of 8 bits)
#: while it encodes it in each candidate, and the smallest result so far.
BEST_HELD_BYTES_PER_PIXEL = 4.0 + 1.0

#: Output formats not measured: the costliest measured.
DEFAULT_OUTPUT = max(ALPHA_OUTPUT_BYTES_PER_PIXEL.values())

#: A progressive JPEG keeps all DCT coefficients (2 bytes each) of the whole
#: image whatever the shrink: measured 1.03-1.13 x the coefficient bytes.
PROGRESSIVE_COEFFICIENT_FACTOR = 1.15

#: A baseline JPEG (or non-interlaced PNG, as it is not shrunk on load) decodes
#: in strips, but the thumbnail pipeline still holds about this many bytes per
#: decoded pixel: measured 0.8-1.15 for 3-band JPEG at shrink 1 (up to 1.3
#: with two libvips threads).
STREAMED_BYTES_PER_PIXEL = 1.4

#: libjpeg-turbo (core/pipeline/jpeg.py) decodes a JPEG whole at its DCT scale: Pillow's
#: image and the packed copy handed to libvips, ``jpeg.PEAK_BYTES_PER_SAMPLE``
#: (at most 7/3 bytes per band per decoded pixel), plus this share for the
#: resize's buffers.
WHOLE_JPEG_DECODE_FACTOR = 1.1 * max(jpeg.PEAK_BYTES_PER_SAMPLE.values())

#: A non-interlaced PNG, in bytes per decoded byte (bands x bytes per sample):
#: measured 0.36 x for 8-bit RGB at 36 MP.
PNG_STREAMED_FACTOR = 0.5

#: An interlaced PNG is decoded whole: measured 1.19-1.4 x its decoded bytes,
#: plus about one byte per pixel of line buffers.
PNG_INTERLACED_FACTOR = 1.25
PNG_INTERLACED_EXTRA_PER_PIXEL = 1.0

#: The ``crop`` path loads at full size with random access: libvips keeps the
#: decoded image (bands x bytes per sample per pixel) in memory. Measured
#: 1.1-1.3 x for JPEG and PNG.
FULL_DECODE_FACTOR = 1.3

#: GIF frames are decoded into a whole RGBA canvas (plus the previous frame
#: for disposal): measured 5.5-7.4 bytes per frame pixel.
GIF_BYTES_PER_PIXEL = 6.0

#: WebP at or below this many pixels is decoded whole (measured: 8 MP whole,
#: 10.7 MP scaled on load); above it libwebp decodes at the target scale.
WEBP_WHOLE_DECODE_PIXELS = 10_700_000
WEBP_WHOLE_BYTES_PER_PIXEL = 4.6
#: Bytes per pixel of the *scaled* decode: measured 7.0-8.4.
WEBP_SCALED_BYTES_PER_PIXEL = 9.0
#: Full decode for ``crop``: measured 7.9 bytes per source pixel.
WEBP_FULL_BYTES_PER_PIXEL = 8.5
#: An animated WebP holds a canvas and frame buffers (measured 13-17 B/px for
#: its first frame alone) and about 5 bytes per pixel of every frame it keeps.
WEBP_ANIMATION_BYTES_PER_PIXEL = 11.0
WEBP_ANIMATION_BYTES_PER_FRAME_PIXEL = 5.0

#: Per kept frame of an animated GIF: part of the source frame and the output
#: frame (animated WebP encoders hold every encoded frame and a canvas).
#: Measured 0.40 MiB a frame for 0.3 MP frames, 0.71 MiB for 1 MP frames.
ANIMATION_BYTES_PER_SOURCE_PIXEL = 0.75
ANIMATION_BYTES_PER_OUTPUT_PIXEL = 2.0

#: libheif decodes AV1/HEVC whole, in YUV planes and again as RGB: measured
#: 15.3-16.2 bytes per pixel for 8-bit 4:2:0 AVIF. A HEIC, decoded whole by
#: pillow-heif's libheif into a buffer libvips reads in place (:mod:`.heic`),
#: peaked at 6.5-8.4 bytes per source pixel (12 MP, 8-bit 4:2:0; ``crop``,
#: ``trim`` and the high-quality mode included): counted as an AVIF.
HEIF_BYTES_PER_PIXEL = 17.0

#: The high-quality mode resizes scRGB floats (3 bands of 4 bytes): of a
#: JPEG's decode at least twice the target, of any other source whole.
#: libvips computes them a strip at a time, but the estimate counts a whole
#: float copy, on the safe side: measured 34-38 MiB against 41 estimated
#: for a 6400x4000 JPEG into 500x500, 71-72 against 116 into 1500x1500.
LINEAR_LIGHT_BYTES_PER_PIXEL = 12.0

#: A watermark: its decoded image (RGBA uchar), and per output pixel the
#: layer it is laid from (a tiled ``re`` copy covers the frame) plus the
#: composite's own result (not measured; counted whole, on the safe side).
WATERMARK_BYTES_PER_PIXEL = 4.0
WATERMARK_BYTES_PER_OUTPUT_PIXEL = 8.0

#: Formats not measured (TIFF, JPEG XL, ...): assume a whole 16-bit RGBA decode.
DEFAULT_BYTES_PER_PIXEL = 8.0

#: JPEG start-of-frame markers (SOF0-SOF15 without DHT, JPG and DAC), and the
#: progressive ones among them.
JPEG_SOF_MARKERS = frozenset({*range(0xC0, 0xC4), *range(0xC5, 0xC8), *range(0xC9, 0xCC)}) | {
    0xCD,
    0xCE,
    0xCF,
}
JPEG_PROGRESSIVE_MARKERS = frozenset({0xC2, 0xC6, 0xCA, 0xCE})
#: Markers with no length field: TEM, RST0-7, SOI, EOI.
JPEG_STANDALONE_MARKERS = frozenset({0x01, *range(0xD0, 0xDA)})
JPEG_SOS = 0xDA

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: PNG colour types whose samples are grey (0: grey, 4: grey + alpha).
PNG_GREY_TYPES = frozenset({0, 4})


class JpegFrame(NamedTuple):
    """What a JPEG's start-of-frame says: components' sampling and progressiveness."""

    width: int
    height: int
    #: (horizontal, vertical) sampling factor of each component.
    sampling: tuple[tuple[int, int], ...]
    progressive: bool

    def coefficient_bytes(self) -> int:
        """Bytes of the whole-image coefficient buffer libjpeg keeps for progressive decode."""
        h_max = max(h for h, _ in self.sampling)
        v_max = max(v for _, v in self.sampling)
        total = 0
        for h, v in self.sampling:
            blocks_x = math.ceil(math.ceil(self.width * h / h_max) / 8)
            blocks_y = math.ceil(math.ceil(self.height * v / v_max) / 8)
            total += blocks_x * blocks_y * 64 * 2
        return total


#: When the SOF cannot be read: four full-resolution components (CMYK 4:4:4).
WORST_SAMPLING = ((1, 1),) * 4


def jpeg_frame(data: bytes) -> JpegFrame | None:
    """Read the start-of-frame segment of a JPEG, or None if there is none before the scan."""
    if not data.startswith(b"\xff\xd8"):
        return None
    position = 2
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in JPEG_STANDALONE_MARKERS:
            position += 2
            continue
        if marker == JPEG_SOS:
            return None
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        if marker in JPEG_SOF_MARKERS:
            return _parse_sof(data[position + 4 : position + 2 + length], marker)
        position += 2 + length
    return None


def _parse_sof(segment: bytes, marker: int) -> JpegFrame | None:
    """Parse an SOF body: precision, height, width, then (id, sampling, table) per component."""
    if len(segment) < 6:
        return None
    height = int.from_bytes(segment[1:3], "big")
    width = int.from_bytes(segment[3:5], "big")
    count = segment[5]
    if count < 1 or len(segment) < 6 + 3 * count:
        return None
    sampling = []
    for index in range(count):
        factors = segment[7 + 3 * index]
        h, v = factors >> 4, factors & 0x0F
        if not (1 <= h <= 4 and 1 <= v <= 4):
            return None
        sampling.append((h, v))
    return JpegFrame(width, height, tuple(sampling), marker in JPEG_PROGRESSIVE_MARKERS)


def png_decoded_bytes_per_pixel(data: bytes, has_alpha: bool) -> int:
    """Bytes per pixel of a PNG once decoded (palette expanded); 8 if the header is unreadable."""
    if not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR" or len(data) < 26:
        return 8
    bit_depth, colour_type = data[24], data[25]
    bands = (1 if colour_type in PNG_GREY_TYPES else 3) + (1 if has_alpha else 0)
    return bands * (2 if bit_depth == 16 else 1)


def jpeg_shrink_factor(shrink: float) -> int:
    """The DCT scale (1, 2, 4 or 8) libvips' thumbnail loads a JPEG at for ``shrink``.

    libvips leaves at least a factor of two for the final resize, so a shrink
    of 4 to 8 loads at half size, 8 to 16 at a quarter, 16 or more at an eighth.
    """
    for factor in (8, 4, 2):
        if shrink >= 2 * factor:
            return factor
    return 1


class Sizes(NamedTuple):
    """What the estimate needs to know about one request's sizes."""

    #: Pixels of one source frame.
    source_pixels: int
    #: How many times smaller the scaled image is than the source (the smaller axis).
    shrink: float
    #: Pixels of one scaled frame and of one output frame.
    scaled_pixels: int
    output_pixels: int
    #: ``crop`` or ``trim``: full-size load, no shrink-on-load.
    full_decode: bool
    #: The high-quality mode: a resize in linear light (floats).
    linear_light: bool = False


def sizes_of(plan: Plan) -> Sizes:
    """The sizes the estimate needs, from the plan the pipeline will execute."""
    geometry, info = plan.geometry, plan.source
    scaled_w, scaled_h = max(geometry.scaled_width, 1), max(geometry.scaled_height, 1)
    shrink = min(geometry.crop_width / scaled_w, geometry.crop_height / scaled_h)
    return Sizes(
        source_pixels=info.width * info.height,
        shrink=max(shrink, 1.0),
        scaled_pixels=scaled_w * scaled_h,
        output_pixels=max(geometry.width, 1) * max(geometry.height, 1),
        full_decode=plan.full_load,
        linear_light=plan.linear_light,
    )


def jpeg_decode_bytes(sizes: Sizes, source: bytes) -> float:
    """Progressive: the coefficient buffer; then strips at the DCT-scaled size, or
    the whole image at that size when libjpeg-turbo decodes it (core/pipeline/jpeg.py)."""
    frame = jpeg_frame(source)
    sampling = frame.sampling if frame else WORST_SAMPLING
    progressive = frame.progressive if frame else True
    pixels = sizes.source_pixels
    if progressive:
        width = frame.width if frame else pixels
        height = frame.height if frame else 1
        coefficients = JpegFrame(width, height, sampling, True).coefficient_bytes()
        streamed = PROGRESSIVE_COEFFICIENT_FACTOR * coefficients
    else:
        streamed = 0.0
    if sizes.full_decode:
        return streamed + FULL_DECODE_FACTOR * len(sampling) * pixels
    factor = jpeg_shrink_factor(sizes.shrink)
    decoded = pixels / (factor * factor)
    held = STREAMED_BYTES_PER_PIXEL * decoded
    if decoded <= jpeg.MAX_DECODED_PIXELS:
        # libjpeg-turbo may decode it whole, at this scale or (with a margin
        # below 2) a smaller one: the larger of the two ways counts.
        held = max(held, WHOLE_JPEG_DECODE_FACTOR * len(sampling) * decoded)
    return streamed + held


def png_decode_bytes(sizes: Sizes, info: SourceInfo, source: bytes) -> float:
    decoded = png_decoded_bytes_per_pixel(source, info.has_alpha) * sizes.source_pixels
    if info.interlaced:
        whole = PNG_INTERLACED_FACTOR * decoded
        return whole + PNG_INTERLACED_EXTRA_PER_PIXEL * sizes.source_pixels
    if sizes.full_decode:
        return FULL_DECODE_FACTOR * decoded
    return PNG_STREAMED_FACTOR * decoded


def webp_decode_bytes(sizes: Sizes, info: SourceInfo, frames: int) -> float:
    if info.frames > 1:
        per_frame = WEBP_ANIMATION_BYTES_PER_FRAME_PIXEL * sizes.source_pixels
        return WEBP_ANIMATION_BYTES_PER_PIXEL * sizes.source_pixels + per_frame * frames
    if sizes.full_decode:
        return WEBP_FULL_BYTES_PER_PIXEL * sizes.source_pixels
    if sizes.source_pixels <= WEBP_WHOLE_DECODE_PIXELS:
        return WEBP_WHOLE_BYTES_PER_PIXEL * sizes.source_pixels
    return WEBP_SCALED_BYTES_PER_PIXEL * sizes.scaled_pixels


def decode_bytes(sizes: Sizes, info: SourceInfo, frames: int, source: bytes) -> float:
    """Peak bytes of decoding (and holding) the source, by format."""
    if info.format == "jpeg":
        return jpeg_decode_bytes(sizes, source)
    if info.format == "png":
        return png_decode_bytes(sizes, info, source)
    if info.format == "webp":
        return webp_decode_bytes(sizes, info, frames)
    if info.format == "gif":
        canvas = GIF_BYTES_PER_PIXEL * sizes.source_pixels
        return canvas + (FULL_DECODE_FACTOR * 4 * sizes.source_pixels if sizes.full_decode else 0)
    if info.format == "heif":
        return HEIF_BYTES_PER_PIXEL * sizes.source_pixels
    return DEFAULT_BYTES_PER_PIXEL * sizes.source_pixels


def linear_light_bytes(sizes: Sizes, info: SourceInfo) -> float:
    """The high-quality mode's float pixels: a whole scRGB copy of the decode it resizes.

    A JPEG is decoded at the DCT scale that leaves at least twice the
    target (libvips' own rule, :func:`jpeg_shrink_factor`); anything else,
    and ``crop``, is converted to floats at its full size.
    """
    if not sizes.linear_light:
        return 0.0
    resized = float(sizes.source_pixels)
    if info.format == "jpeg" and not sizes.full_decode:
        resized /= jpeg_shrink_factor(sizes.shrink) ** 2
    return LINEAR_LIGHT_BYTES_PER_PIXEL * resized


def output_bytes(plan: Plan, sizes: Sizes, frames: int, source: bytes) -> float:
    """Peak bytes of the output side: the encoder, the frames of an animation, a child process.

    The encoder's weight grows with the quality it starts at
    (:func:`dense_detail_bytes_per_pixel`). Encoders hold one frame at a
    time; an animation adds its frames' buffers
    (:data:`ANIMATION_BYTES_PER_OUTPUT_PIXEL` and the source frame's share).
    """
    table = ALPHA_OUTPUT_BYTES_PER_PIXEL if plan.alpha else {}
    encodings = plan.candidates + plan.flat_candidates or (Candidate(plan.format, plan.quality),)
    per_pixel = max(
        table.get(fmt, OUTPUT_BYTES_PER_PIXEL.get(fmt, DEFAULT_OUTPUT))
        + dense_detail_bytes_per_pixel(fmt, quality)
        for fmt, quality, *_ in encodings
    )
    if plan.candidates:
        # format:best holds the thumbnail's pixels for every encoding, and the
        # smallest result so far while the next is made (at most one pixel's worth).
        per_pixel += BEST_HELD_BYTES_PER_PIXEL
    if plan.search_method:
        # One search at a time: format:best's candidates search one after another.
        per_pixel += AUTOQUALITY_BYTES_PER_PIXEL[plan.search_method]
    held = per_pixel * sizes.output_pixels
    if frames > 1:
        per_frame = (
            ANIMATION_BYTES_PER_SOURCE_PIXEL * sizes.source_pixels
            + ANIMATION_BYTES_PER_OUTPUT_PIXEL * sizes.output_pixels
        )
        held += per_frame * frames
    if plan.isolated:
        held += CHILD_PROCESS_BYTES + len(source)
    return held


class PeakParts(NamedTuple):
    """A render's peak bytes beyond the base and the source, split where a batch shares them."""

    #: Decoding (and holding) the source: what sizes that share a decode hold once.
    decode: float
    #: Each size's own: the high-quality mode's floats of the decode it resizes,
    linear_light: float
    #: and the output side (encoder, frames, a child process) and a watermark.
    output: float


def peak_parts(plan: Plan, frames: int, source: bytes) -> PeakParts:
    """The parts of :func:`estimate_peak_bytes` beyond its base and the source's bytes."""
    frames = max(frames, 1)
    sizes = sizes_of(plan)
    return PeakParts(
        decode_bytes(sizes, plan.source, frames, source),
        linear_light_bytes(sizes, plan.source),
        output_bytes(plan, sizes, frames, source) + watermark_bytes(plan, sizes),
    )


def estimate_peak_bytes(plan: Plan, frames: int, source: bytes) -> int:
    """Estimated peak bytes to render ``frames`` frames of ``source`` as ``plan`` says.

    ``plan`` is the one the render will execute
    (:func:`~django_oximg.core.pipeline.plan_render`, from the source's
    header, the options and the render settings, ``MAX_RESULT_DIMENSION``
    included); the encoded bytes themselves are read too, for their size
    and for the JPEG/PNG header details libvips does not report (chroma
    subsampling, bit depth).
    """
    parts = peak_parts(plan, frames, source)
    return BASE_BYTES + len(source) + math.ceil(parts.decode + parts.linear_light + parts.output)


def estimate_shared_decode_peak_bytes(plans: Sequence[Plan], source: bytes) -> int:
    """Estimated peak bytes to render every plan of ``plans`` from one decode of ``source``.

    The sizes a JPEG's one decode serves (:mod:`~django_oximg.core.pipeline.batch`,
    a single frame each) are rendered one after another while that decode
    is held: the base, the source and the decode are counted once, at the
    largest any of the plans would hold, and each size's own parts (the
    high-quality mode's floats, the output side) for every size, as if all
    were held at once: the results made are kept until they are stored, and
    libvips may not have given a finished size's buffers back when the next
    starts. On the safe side, then, and never below the estimate of any one
    of them; for one plan, exactly :func:`estimate_peak_bytes`.
    """
    if not plans:
        return 0
    parts = [peak_parts(plan, 1, source) for plan in plans]
    decode = max(part.decode for part in parts)
    linear_light = sum(part.linear_light for part in parts)
    output = sum(part.output for part in parts)
    return BASE_BYTES + len(source) + math.ceil(decode + linear_light + output)


def watermark_bytes(plan: Plan, sizes: Sizes) -> float:
    """What laying the watermark holds at once (frames are watermarked one by one)."""
    if plan.watermark is None:
        return 0.0
    mark = WATERMARK_BYTES_PER_PIXEL * plan.watermark.width * plan.watermark.height
    return mark + WATERMARK_BYTES_PER_OUTPUT_PIXEL * sizes.output_pixels
