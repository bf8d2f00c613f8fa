"""``format:best``: the thumbnail encoded in each candidate format, the smallest kept.

The candidates come from the plan (:func:`~django_oximg.core.pipeline.plan.plan_best`):
the lossy formats the client accepts and JPEG (or PNG for a result with
alpha), each at the site's quality for it (``QUALITY``, tuned to a similar
look), and for flat graphics (logos, screenshots, text) palette PNG and
lossless WebP too. Whether a thumbnail is flat is measured on its own pixels
(:func:`complexity`), as imgproxy measures an image's complexity before it
tries lossless encodings. The thumbnail is computed once, into memory, and
every encoding reads those pixels: nothing is decoded or resized again. The
number of encodings is the plan's (:attr:`~django_oximg.core.pipeline.plan.Plan.encodes`,
at most five); the render deadline stops libvips' savers and is checked
between encodings.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from django_oximg.core.errors import ProcessingTimeout
from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.pipeline.encode import encode_within_limit, save, strip_metadata
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


def encode_best(
    image: Image, plan: Plan, settings: RenderSettings, deadline: Deadline
) -> tuple[bytes, str]:
    """The smallest of the plan's encodings of ``image``, and its format.

    For a flat thumbnail (:func:`complexity` under the plan's threshold)
    the lossless encodings are tried too, and the smallest of them wins
    unless a lossy one is under :data:`LOSSLESS_BYTES_MARGIN` times smaller.
    A tie goes to the earlier candidate. With ``max_bytes``, a winner still
    too large is replaced by the smallest lossy encoding, whose quality the
    ``max_bytes`` loop then lowers.
    """
    image, keep, _ = strip_metadata(image, plan.options)
    image = watched(watched(image, deadline).copy_memory(), deadline)
    tried = plan.candidates
    if plan.flat_candidates and complexity(image) < plan.complexity_threshold:
        tried = plan.flat_candidates + tried
    results: list[tuple[int, int, bytes, Candidate]] = []
    for index, candidate in enumerate(tried):
        if deadline.expired:
            raise ProcessingTimeout(f"render deadline passed after {index} format:best encodings")
        data = encode_candidate(image, candidate, keep, settings.jpeg_progressive)
        results.append((len(data), index, data, candidate))
    size, _, data, winner = min(results)
    lossless = [result for result in results if result[3].lossless]
    if lossless and not winner.lossless and min(lossless)[0] <= LOSSLESS_BYTES_MARGIN * size:
        size, _, data, winner = min(lossless)
    max_bytes = plan.options.max_bytes
    if max_bytes and size > max_bytes:
        _, _, data, winner = min(result for result in results if not result[3].lossless)
        encode_at = partial(
            save,
            image,
            winner.format,
            keep=keep,
            effort=winner.effort,
            progressive=settings.jpeg_progressive,
        )
        # The loop starts from the bytes already encoded at the winner's quality.
        data, _ = encode_within_limit(
            encode_at, replace(plan, format=winner.format), winner.quality, data
        )
    return data, winner.format
