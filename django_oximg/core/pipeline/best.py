"""``format:best``: the thumbnail encoded in each candidate format, the smallest kept.

The candidates come from the plan (:func:`~django_oximg.core.pipeline.plan.plan_best`):
the lossy formats the client accepts and JPEG (or PNG for a result with
alpha), each at the site's quality for it (``QUALITY``, tuned to a similar
look) or, when ``autoquality`` asks for DSSIM, at the quality its search
finds for that format (:mod:`~django_oximg.core.pipeline.autoquality`), so
that the formats are compared at the same measured look; and for flat
graphics (logos, screenshots, text) palette PNG and lossless WebP too.
Whether a thumbnail is flat is measured on its own pixels
(:func:`complexity`), as imgproxy measures an image's complexity before it
tries lossless encodings. The thumbnail is computed once, into memory, and
every encoding reads those pixels: nothing is decoded or resized again, and
the searches share one DSSIM reference. The number of encodings is the
plan's (:attr:`~django_oximg.core.pipeline.plan.Plan.encodes`: at most five
without ``autoquality``, each search's encodes counted with it); the render
deadline stops libvips' savers, each search between its encodes, and is
checked between candidates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from django_oximg.core.errors import ProcessingTimeout
from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.pipeline.autoquality import Reference, search
from django_oximg.core.pipeline.encode import (
    Encoded,
    encode_within_limit,
    save,
    strip_metadata,
)
from django_oximg.core.pipeline.libvips import Image, watched
from django_oximg.core.pipeline.plan import Candidate, Plan, RenderSettings

#: A pixel is on an edge when its Sobel gradient (on 8-bit grey) exceeds
#: this: well above the noise of a smooth gradient's rounding, well below
#: any drawn edge.
EDGE_LEVEL = 8.0

#: A flat thumbnail keeps its lossless encoding while that takes at most
#: this many times the bytes of the smallest lossy one: lossy codecs ring
#: around drawn edges and text, which a lossless file never does.
LOSSLESS_BYTES_MARGIN = 2.0

#: Lossless WebP's effort: 1 made the drawn test images within 1 % of effort
#: 4's bytes in a fifth to a half of its time, and a photo 2 % smaller in
#: under half (``bench/best_format.py``).
LOSSLESS_WEBP_EFFORT = 1

#: Palette PNG's zlib level: the thumbnail is small, and the smallest file is
#: the point of ``format:best``.
PALETTE_PNG_COMPRESSION = 9


def complexity(image: Image) -> float:
    """The per cent of ``image``'s pixels on an edge (0 to 100).

    Drawn graphics are flat areas bounded by sharp edges: few of their
    pixels have any gradient (logos and text 3-5 %, a screenshot 8 %, a
    smooth gradient under 1 %), where nearly every pixel of a photo does
    (97 % for a photo-like test image). Transparent areas count as white.
    """
    if image.hasalpha():
        image = image.flatten(background=[255] * (image.bands - 1))
    grey = image.colourspace("b-w")[0] if image.bands >= 3 else image[0]
    edges = grey.cast("float").sobel() > EDGE_LEVEL
    return float(edges.avg()) / 2.55


def encode_candidate(image: Image, candidate: Candidate, keep: int, progressive: bool) -> bytes:
    """``image`` encoded as ``candidate`` says: a plain function of pixels, format and quality.

    Lossy and PNG encodings are :func:`~django_oximg.core.pipeline.encode.save`'s
    (libvips' savers, as ``ENCODER = "libvips"`` writes them); the lossless
    ones are palette PNG and lossless WebP.
    """
    if candidate.lossless and candidate.format == "png":
        return bytes(
            image.pngsave_buffer(palette=True, compression=PALETTE_PNG_COMPRESSION, keep=keep)
        )
    if candidate.lossless and candidate.format == "webp":
        return bytes(image.webpsave_buffer(lossless=True, effort=LOSSLESS_WEBP_EFFORT, keep=keep))
    return save(
        image,
        candidate.format,
        candidate.quality,
        keep=keep,
        effort=candidate.effort,
        progressive=progressive,
    )


def encoder_at(
    image: Image, candidate: Candidate, keep: int, progressive: bool
) -> Callable[[int], bytes]:
    """``image`` as ``candidate`` at a quality given later: what a search and ``max_bytes`` try."""

    def encode_at(quality: int) -> bytes:
        return encode_candidate(image, candidate._replace(quality=quality), keep, progressive)

    return encode_at


class Encoding(NamedTuple):
    """One candidate's encoding: its bytes, and the quality its search chose (0: none ran)."""

    data: bytes
    quality: int
    candidate: Candidate
    #: Encodes its search made (0: none ran).
    encodes: int = 0


def encode_one(
    image: Image,
    candidate: Candidate,
    keep: int,
    progressive: bool,
    reference: Reference | None,
    deadline: Deadline,
) -> Encoding:
    """``image`` as ``candidate``: at its quality, or at the one its DSSIM search finds.

    Every search compares its encodes with the same ``reference`` pixels,
    computed once for all the formats.
    """
    if candidate.target is None or reference is None:
        return Encoding(encode_candidate(image, candidate, keep, progressive), 0, candidate)
    encode_at = encoder_at(image, candidate, keep, progressive)
    chosen = search(encode_at, candidate.target, reference, deadline)
    return Encoding(chosen.data, chosen.quality, candidate, chosen.encodes)


def encode_best(image: Image, plan: Plan, settings: RenderSettings, deadline: Deadline) -> Encoded:
    """The smallest of the plan's encodings of ``image``, its format and ``autoquality``'s quality.

    For a flat thumbnail (:func:`complexity` under the plan's threshold)
    the lossless encodings are tried too, and the smallest of them wins
    unless a lossy one is under :data:`LOSSLESS_BYTES_MARGIN` times smaller.
    A tie goes to the earlier candidate. A plan that
    :attr:`~django_oximg.core.pipeline.plan.Plan.picks_one` encodes the
    first flat candidate for a flat thumbnail, else the first lossy one.
    With ``max_bytes``, a winner still too large is replaced by the smallest
    lossy encoding, whose quality the ``max_bytes`` loop then lowers.
    """
    image, keep, _ = strip_metadata(image, plan.options)
    image = watched(watched(image, deadline).copy_memory(), deadline)
    tried = plan.candidates
    if plan.flat_candidates and complexity(image) < plan.complexity_threshold:
        tried = plan.flat_candidates + tried
    if plan.picks_one:
        tried = tried[:1]
    # One DSSIM reference for every candidate's search (the plan says whether any searches).
    reference = Reference(image) if plan.search_method else None
    results: list[tuple[int, int, Encoding]] = []
    for index, candidate in enumerate(tried):
        if deadline.expired:
            raise ProcessingTimeout(f"render deadline passed after {index} format:best encodings")
        encoding = encode_one(
            image, candidate, keep, settings.jpeg_progressive, reference, deadline
        )
        results.append((len(encoding.data), index, encoding))
    encodes = sum(result[2].encodes for result in results)
    size, _, winner = min(results)
    lossless = [result for result in results if result[2].candidate.lossless]
    if (
        lossless
        and not winner.candidate.lossless
        and min(lossless)[0] <= (LOSSLESS_BYTES_MARGIN * size)
    ):
        size, _, winner = min(lossless)
    max_bytes = plan.options.max_bytes
    if max_bytes and size > max_bytes:
        lossy = [result for result in results if not result[2].candidate.lossless]
        if not lossy:
            # A plan that picks one tried a lossless encoding alone.
            fallback = plan.candidates[0]
            encoding = encode_one(
                image, fallback, keep, settings.jpeg_progressive, reference, deadline
            )
            lossy = [(len(encoding.data), 0, encoding)]
        winner = min(lossy)[2]
        chosen = winner.candidate
        encode_at = encoder_at(image, chosen, keep, settings.jpeg_progressive)
        # The loop starts from the bytes already encoded at the winner's quality.
        data, quality = encode_within_limit(
            encode_at,
            replace(plan, format=chosen.format),
            winner.quality or chosen.quality,
            winner.data,
        )
        return Encoded(data, chosen.format, quality if winner.quality else 0, encodes)
    return Encoded(winner.data, winner.candidate.format, winner.quality, encodes)
