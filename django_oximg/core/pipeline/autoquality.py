"""``autoquality``: the quality searched for one image, by size or by DSSIM.

The search encodes the same pixels (the thumbnail, already resized and in
memory) at a few qualities and keeps one: for ``size`` the highest quality
whose result fits the target in bytes, for ``dssim`` the lowest whose
result is at most the target's DSSIM from the pixels it encodes, or within
``allowed_error`` of it (imgproxy's methods). It is a binary search between
the bounds, so it takes at most :data:`MAX_ENCODES` encodes (a range of 11
qualities, imgproxy's default 70-80, takes at most 4), stops as soon as a
result is close enough, and stops at the render deadline with the best
result it has.

DSSIM is computed here with libvips operations on the lightness of both
images (:func:`lightness`), at several scales as kornelski's ``dssim``
(whose scale imgproxy's targets are given on, 0.02 by default) is: SSIM with a
Gaussian window of sigma 1.5 (Wang et al.'s constants), averaged over the
image at :data:`SCALES` scales, and DSSIM = 1/SSIM - 1. Chroma is left
out. The reference's planes are computed once per search; each encode
then costs a decode and one blur of the scales packed on one canvas
(``bench/autoquality.py metric`` measures it: about 19 ms on a 500 px
thumbnail, against 1.4 ms for its JPEG encode).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pyvips

from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.options.autoquality import MAX_ENCODES, QualityTarget
from django_oximg.core.pipeline.libvips import Image

#: SSIM's Gaussian window, and its constants for values of 0..100:
#: Wang et al.'s K1 = 0.01 and K2 = 0.03 of the range, squared.
SSIM_SIGMA = 1.5
SSIM_C1 = (0.01 * 100) ** 2
SSIM_C2 = (0.03 * 100) ** 2

#: Scales SSIM is averaged over: the thumbnail, then each halving. At the
#: thumbnail's own scale SSIM misses what a viewer sees in smooth areas
#: (banding, 8x8 blocks in a dark sky); on the 14 photos of docs/quality.md,
#: three scales gave the worst photo 7 more SSIMULACRA2 points than one,
#: at the same median.
SCALES = 3


#: Rec. 601 luma weights, scaled from 0..255 to 0..100.
LUMA = [[0.299 * 100 / 255, 0.587 * 100 / 255, 0.114 * 100 / 255]]


class Chosen(NamedTuple):
    """The result a search kept."""

    data: bytes
    quality: int
    #: Encodes the search made (at most :data:`MAX_ENCODES`).
    encodes: int
    #: The result's DSSIM (``dssim``) or size in bytes (``size``).
    score: float


def lightness(image: Image) -> Image:
    """Lightness (0..100, float) of an 8-bit image, its alpha ignored.

    Rec. 601 luma of the sRGB values, whose gamma already spaces them about
    as CIE L* does (libvips' conversion to L*a*b* took twice the CPU of
    the whole DSSIM for the same ranking of photos).
    """
    if image.bands >= 3:
        return image.extract_band(0, n=3).recomb(LUMA)
    return image.extract_band(0).linear(100 / 255, 0.0)


def blurred(image: Image) -> Image:
    return image.gaussblur(SSIM_SIGMA, precision="float")


#: Zero pixels between the scales' tiles of :func:`packed`: more than the
#: blur's reach, so no tile's means see another's pixels.
TILE_GAP = 8


def scale_count(width: int, height: int) -> int:
    """How many of :data:`SCALES` a ``width`` x ``height`` image has (halvings of 8 px and up)."""
    count = 1
    while count < SCALES and min(width, height) >> count >= 8:
        count += 1
    return count


def packed(image: Image, count: int, weights: bool = False) -> Image:
    """``image`` and its first ``count - 1`` halvings side by side on one zero canvas.

    One canvas makes every scale's SSIM one libvips pipeline: with the
    operation cache off, each operation's set-up costs more than its work
    on a thumbnail, so one chain over three tiles costs about a third of
    three chains. ``weights``: each tile filled with 1 / (``count`` x its
    pixels) instead, so that the canvas's sum of an SSIM map is the mean of
    the scales' means.
    """
    tiles = [image]
    for _ in range(1, count):
        tiles.append(tiles[-1].shrink(2, 2))
    if weights:
        tiles = [tile * 0.0 + 1.0 / (count * tile.width * tile.height) for tile in tiles]
    width = image.width + TILE_GAP
    if count > 1:
        width += tiles[1].width + TILE_GAP
    height = max(image.height, sum(tile.height + TILE_GAP for tile in tiles[1:]))
    canvas = tiles[0].embed(0, 0, width, height)
    top = 0
    for tile in tiles[1:]:
        canvas = canvas.insert(tile, image.width + TILE_GAP, top)
        top += tile.height + TILE_GAP
    return canvas


class Reference:
    """The pixels a search encodes, as SSIM needs them: lightness, its means and variances.

    Computed into memory once, every scale packed on one canvas
    (:func:`packed`), so each candidate costs only its own side. A
    candidate's three local means (of y, y² and xy) are one blur of a
    three-band image. ``weights`` make the canvas's sum the mean of the
    scales' mean SSIMs (zero in the gaps).
    """

    def __init__(self, image: Image) -> None:
        self.width, self.height = image.width, image.height
        self.count = scale_count(self.width, self.height)
        self.x = packed(lightness(image), self.count).copy_memory()
        means = blurred(self.x.bandjoin(self.x * self.x)).copy_memory()
        mean_x = means[0]
        self.mean_x = mean_x.copy_memory()
        #: The reference's parts of SSIM's two denominators.
        self.luminance = (mean_x * mean_x + SSIM_C1).copy_memory()
        self.contrast = (means[1] - mean_x * mean_x + SSIM_C2).copy_memory()
        blank = pyvips.Image.black(self.width, self.height)
        self.weights = packed(blank, self.count, weights=True).copy_memory()

    def dssim(self, encoded: bytes) -> float:
        """DSSIM (1/SSIM - 1, SSIM averaged over the scales) of ``encoded``; 0 is identical."""
        # Into memory first: the blur reads it three times over.
        y = lightness(pyvips.Image.new_from_buffer(encoded, "")).copy_memory()
        if (y.width, y.height) != (self.width, self.height):
            raise ValueError("the encoded image is not the reference's size")
        y = packed(y, self.count).copy_memory()
        means = blurred(y.bandjoin([y * y, self.x * y]))
        mean_y = means[0]
        mean_xy = self.mean_x * mean_y
        numerator = (mean_xy * 2 + SSIM_C1) * ((means[2] - mean_xy) * 2 + SSIM_C2)
        mean_y2 = mean_y * mean_y
        denominator = (self.luminance + mean_y2) * (self.contrast + means[1] - mean_y2)
        weighted = numerator / denominator * self.weights
        ssim = float(weighted.avg()) * weighted.width * weighted.height
        # Float sums put an identical image's SSIM a rounding error either
        # side of 1; DSSIM is never below 0.
        return max(0.0, 1.0 / ssim - 1.0) if ssim > 0 else float("inf")


def search(
    encode_at: Callable[[int], bytes],
    target: QualityTarget,
    reference: Reference | None = None,
    deadline: Deadline | None = None,
) -> Chosen:
    """The quality ``target`` asks for, found by encoding with ``encode_at(quality)``.

    ``reference`` (the pixels ``encode_at`` encodes) is needed for ``dssim``.
    Between encodes the search stops once ``deadline`` has passed, keeping
    its best result so far (the first encode always runs).
    """
    if target.method == "size":
        return search_size(encode_at, target, deadline)
    if reference is None:
        raise ValueError("a DSSIM search needs the reference pixels")
    return search_dssim(encode_at, reference, target, deadline)


def search_size(
    encode_at: Callable[[int], bytes], target: QualityTarget, deadline: Deadline | None
) -> Chosen:
    """The highest quality whose result fits ``target.target`` bytes; else the lowest tried.

    The maximum is tried first: a small thumbnail that fits at once costs
    one encode.
    """
    low, high = target.min_quality, target.max_quality
    fits: Chosen | None = None
    over: Chosen | None = None
    encodes = 0
    while low <= high and encodes < MAX_ENCODES and not _expired(deadline, encodes):
        quality = high if encodes == 0 else (low + high) // 2
        data = encode_at(quality)
        encodes += 1
        chosen = Chosen(data, quality, encodes, float(len(data)))
        if len(data) <= target.target:
            fits, low = chosen, quality + 1
        else:
            over, high = chosen, quality - 1
    best = fits or over
    assert best is not None  # the first encode always runs
    return best._replace(encodes=encodes)


def search_dssim(
    encode_at: Callable[[int], bytes],
    reference: Reference,
    target: QualityTarget,
    deadline: Deadline | None,
) -> Chosen:
    """The lowest quality whose DSSIM is at most ``target.target``, or within the allowed error.

    When no quality within the bounds reaches the target, the highest tried
    (the maximum, unless the deadline or :data:`MAX_ENCODES` came first).
    """
    low, high = target.min_quality, target.max_quality
    passing: Chosen | None = None
    failing: Chosen | None = None
    encodes = 0
    while low <= high and encodes < MAX_ENCODES and not _expired(deadline, encodes):
        quality = (low + high) // 2
        data = encode_at(quality)
        encodes += 1
        chosen = Chosen(data, quality, encodes, reference.dssim(data))
        if abs(chosen.score - target.target) <= target.allowed_error:
            return chosen
        if chosen.score < target.target:
            passing, high = chosen, quality - 1
        else:
            failing, low = chosen, quality + 1
    best = passing or failing
    assert best is not None  # the first encode always runs
    return best._replace(encodes=encodes)


def _expired(deadline: Deadline | None, encodes: int) -> bool:
    """Whether to stop before another encode: never before the first."""
    return encodes > 0 and deadline is not None and deadline.expired
