"""``autoquality``: the quality searched for one image, by size or by DSSIM.

The search encodes the same pixels (the thumbnail, already resized and in
memory) at a few qualities and keeps one: for ``size`` the highest quality
whose result fits the target in bytes, for ``dssim`` the lowest whose
result is at most the target's DSSIM from the pixels it encodes, or within
``allowed_error`` of it (imgproxy's methods). ``size`` is a binary search
between the bounds; ``dssim`` starts at a quality predicted for the image
and interpolates (:func:`search_dssim`), since its metric, not the encode,
is most of its cost. Either takes at most :data:`MAX_ENCODES` encodes,
stops as soon as a result is close enough, and stops at the render
deadline with the best result it has.

The "DSSIM" is computed here with libvips operations on the lightness of
both images (:func:`lightness`), at :data:`SCALES` scales as kornelski's
``dssim`` (whose scale imgproxy's targets are given on, 0.02 by default)
averages its scales, but it is SSIM's contrast term linearised, a
contrast-masked squared error (:class:`Reference`): 0 for identical
pixels, about 1 - SSIM for small errors, so a target keeps its meaning
of "at most this far". Chroma is left out. The reference's side is
computed once per search; each encode then costs a decode, its
lightness and a few cheap operations per scale (``bench/autoquality.py
metric`` measures it against a JPEG encode; docs/quality.md gives the
numbers).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import pyvips

from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.options.autoquality import MAX_ENCODES, QualityTarget, planned_encodes
from django_oximg.core.pipeline.libvips import Image

#: SSIM's Gaussian window, and its contrast constant for values of 0..100:
#: Wang et al.'s K2 = 0.03 of the range, squared. (The luminance term and
#: its constant are left out: a shift of the mean counts in the squared error.)
SSIM_SIGMA = 1.5
SSIM_C2 = (0.03 * 100) ** 2

#: Scales the metric is averaged over: the thumbnail, then each halving. At
#: the thumbnail's own scale an error measure misses what a viewer sees in
#: smooth areas (banding, 8x8 blocks in a dark sky); on the 14 photos of
#: docs/quality.md, three scales gave the worst photo 7 more SSIMULACRA2
#: points than one, at the same median.
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
        return (image if image.bands == 3 else image.extract_band(0, n=3)).recomb(LUMA)
    return image.extract_band(0).linear(100 / 255, 0.0)


def scale_count(width: int, height: int) -> int:
    """How many of :data:`SCALES` a ``width`` x ``height`` image has (halvings of 8 px and up)."""
    count = 1
    while count < SCALES and min(width, height) >> count >= 8:
        count += 1
    return count


class Reference:
    """The pixels a search encodes, kept as the metric needs them: lightness and weights.

    The metric is a contrast-masked squared error: at each scale, the mean
    of ``(y - x)^2 / (2 var(x) + C2)``, ``x`` the reference's lightness,
    ``y`` the candidate's, ``var(x)`` the reference's local variance; the
    result is the mean over the scales. It is SSIM's contrast-structure
    term linearised for small errors, ``1 - cs = var(x - y) / (var(x) +
    var(y) + C2)`` with ``var(y)`` taken as ``var(x)``, but with the error
    counted at each pixel rather than blurred. Both halves make it cheap:
    the blur is the costly part of SSIM, and only the reference's side of
    it is left, computed once per search; and ``var(x)`` is taken on blocks
    of 2x2 pixels (their means of x and x^2 blurred at half the window,
    which keeps the blocks' own variance in it), so a candidate's squared
    error is summed per block too. A candidate then costs its decode, its
    lightness and four cheap operations a scale.

    It also ranks images closer to SSIMULACRA2 than SSIM did (on the
    photos of docs/quality.md, fewer bytes for the same worst photo), since
    an error where the reference is smooth or dark (small ``var(x)``)
    weighs more, at every pixel rather than averaged with the textured
    ones around it. Its values stay on SSIM's scale: 0 for identical
    pixels, about 1 - SSIM for small errors.

    Each libvips evaluation (a ``copy_memory``, a ``stats``) costs a few
    tenths of a millisecond on its own, more than the work on a small
    scale, so every scale is computed in one evaluation: the reference's
    weights, and a candidate's blocks, the smaller scales' zero-padded to
    the largest's size and joined as bands. A candidate takes two: its
    difference from the reference, then the sum.

    ``weights``: one band a scale, ``1 / (2 var(x) + C2)`` per block,
    divided by the scale's blocks and the number of scales, so that the
    sum over every band of the blocks' mean squared error times their
    weight is the metric (a candidate's blocks are 0 in the padding).
    """

    def __init__(self, image: Image) -> None:
        self.width, self.height = image.width, image.height
        self.count = scale_count(self.width, self.height)
        self.x = lightness(image).copy_memory()
        # Every scale's block means of x and x^2 as bands of one image (the
        # smaller scales padded by copying their edges, as the blur itself
        # pads), so the blur and the rest are one operation each.
        blocks: list[Image] = []
        x = self.x
        for scale in range(self.count):
            if scale:
                x = x.shrink(2, 2)
            blocks.append(x.bandjoin(x * x).shrink(2, 2))
        self.blocks = blocks[0].width, blocks[0].height
        means = _joined(blocks, self.blocks, "copy").gaussblur(SSIM_SIGMA / 2, precision="float")
        # Bands 0, 2, 4...: the means of x; 1, 3, 5...: of x^2.
        mean = means.recomb(_every_other(self.count, 0))
        variance = means.recomb(_every_other(self.count, 1)) - mean * mean
        spread = [self.count * block.width * block.height for block in blocks]
        weights = variance.linear([2.0 * n for n in spread], [SSIM_C2 * n for n in spread]) ** -1
        self.weights = weights.copy_memory()
        #: How much of the image is texture rather than flat (0..0.5): the
        #: mean of var(x) / (2 var(x) + C2) at the first scale, which
        #: predicts the metric (:func:`first_quality`). It is
        #: (1 - C2 / (2 var(x) + C2)) / 2, from the first band's sum.
        masking = float(self.weights[0].stats()(2, 0)[0]) * self.count
        self.texture = (1.0 - SSIM_C2 * masking) / 2

    def dssim(self, encoded: bytes) -> float:
        """The metric (the class's) of ``encoded`` against the reference; 0 is identical."""
        y = lightness(pyvips.Image.new_from_buffer(encoded, ""))
        if (y.width, y.height) != (self.width, self.height):
            raise ValueError("the encoded image is not the reference's size")
        # Into memory once: every scale reads it.
        difference = (y - self.x).copy_memory()
        bands: list[Image] = []
        for scale in range(self.count):
            if scale:
                difference = difference.shrink(2, 2)
            bands.append((difference * difference).shrink(2, 2))
        # stats' third column, first row: the sum over every band.
        return float((_joined(bands, self.blocks) * self.weights).stats()(2, 0)[0])


def _joined(bands: list[Image], size: tuple[int, int], extend: str = "black") -> Image:
    """``bands`` (the largest first) padded to ``size`` and joined as one image's bands."""
    padded = [
        band.embed(0, 0, *size, extend=extend) if (band.width, band.height) != size else band
        for band in bands
    ]
    return padded[0].bandjoin(padded[1:]) if len(padded) > 1 else padded[0]


def _every_other(count: int, first: int) -> list[list[float]]:
    """A ``recomb`` matrix picking bands ``first``, ``first + 2``... of ``2 * count``."""
    return [
        [1.0 if band == 2 * row + first else 0.0 for band in range(2 * count)]
        for row in range(count)
    ]


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


#: How the metric falls with JPEG quality: its logarithm drops by about
#: this much per quality step between 50 and 89 (0.032-0.042 on the photos
#: of docs/quality.md, up to 0.06 on drawn graphics). The search steps by it
#: until it has results either side of the target.
LOG_SLOPE = 0.038

#: Where the search starts: the logarithm of the metric at JPEG quality 70
#: predicted from the reference's :attr:`Reference.texture` as
#: ``TEXTURE_AT_70[0] + TEXTURE_AT_70[1] * texture`` (fitted on the photos
#: and graphics of docs/quality.md: correlation 0.84, the residual about
#: 10 quality steps against 19 for one value for every image), then
#: extrapolated by :data:`LOG_SLOPE` to the target, within the bounds.
TEXTURE_AT_70 = (-5.13, 4.66)


def first_quality(target: QualityTarget, reference: Reference) -> int:
    """The quality predicted to reach ``target.target`` for ``reference``, within the bounds."""
    at_70 = TEXTURE_AT_70[0] + TEXTURE_AT_70[1] * reference.texture
    quality = 70 + math.ceil((at_70 - _log(target.target)) / LOG_SLOPE)
    return min(max(quality, target.min_quality), target.max_quality)


def search_dssim(
    encode_at: Callable[[int], bytes],
    reference: Reference,
    target: QualityTarget,
    deadline: Deadline | None,
) -> Chosen:
    """The lowest quality whose metric is at most ``target.target``, or within the allowed error.

    A bisection over 50-89 takes 6 encodes and each costs a metric; the
    metric's logarithm is close to a straight line in quality, so the search
    starts at :func:`first_quality`, steps by :data:`LOG_SLOPE` past the
    target until it has a result either side, then interpolates between
    the two closest (in the logarithm), bisecting instead when
    interpolation twice moves the same side. It ends when a result is
    within the allowed error, or when the passing and failing qualities
    are neighbours. It makes no more encodes than a binary search of the
    bounds could (:func:`~django_oximg.core.options.autoquality.planned_encodes`,
    which the estimates count): a metric far from a straight line (a
    cliff, a plateau, as on some drawn graphics) can make interpolation
    creep, and then the search keeps its best result at that limit. When
    no quality within the bounds reaches the target, the highest tried
    (the maximum, unless the deadline or the encode limit came first).
    """
    # Exclusive bounds: ``low`` fails (or is below the range), ``high`` passes (or above).
    low, high = target.min_quality - 1, target.max_quality + 1
    tried: dict[int, Chosen] = {}
    sides: list[bool] = []
    quality = first_quality(target, reference)
    limit = planned_encodes(target)
    encodes = 0
    while encodes < limit and not _expired(deadline, encodes):
        data = encode_at(quality)
        encodes += 1
        chosen = Chosen(data, quality, encodes, reference.dssim(data))
        if abs(chosen.score - target.target) <= target.allowed_error:
            return chosen
        tried[quality] = chosen
        passes = chosen.score < target.target
        sides.append(passes)
        if passes:
            high = quality
        else:
            low = quality
        if high - low <= 1:
            break
        quality = _next_quality(low, high, tried, target.target, sides)
    best = tried.get(high) or tried[low]
    return best._replace(encodes=encodes)


def _next_quality(
    low: int, high: int, tried: dict[int, Chosen], target: float, sides: list[bool]
) -> int:
    """The next quality strictly between ``low`` (fails) and ``high`` (passes)."""
    goal = _log(target)
    failing, passing = tried.get(low), tried.get(high)
    if failing and passing:
        if len(sides) >= 3 and sides[-1] == sides[-2] == sides[-3]:
            guess = (low + high) / 2
        else:
            above, below = _log(failing.score), _log(passing.score)
            guess = low + (above - goal) / (above - below) * (high - low)
        quality = math.ceil(guess)
    else:
        # One side known: step past the target by one quality, to cross it.
        known = failing or passing
        assert known is not None
        guess = known.quality + (_log(known.score) - goal) / LOG_SLOPE
        quality = math.ceil(guess) + 1 if failing else math.floor(guess) - 1
    return min(max(quality, low + 1), high - 1)


#: The smallest metric the logarithms see (an identical result scores 0).
_TINY = 1e-9


def _log(value: float) -> float:
    return math.log(max(value, _TINY))


def _expired(deadline: Deadline | None, encodes: int) -> bool:
    """Whether to stop before another encode: never before the first."""
    return encodes > 0 and deadline is not None and deadline.expired
