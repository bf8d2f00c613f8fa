"""Several sizes of one source from one decode, with the bytes each URL would get.

A JPEG's decode is most of a thumbnail's cost (docs/pipeline.md), and a
site that renders a photo's declared sizes ahead (docs/render-ahead.md)
asks for several sizes of one source at once. :func:`render_batch`
decodes it once per DCT scale and derives every size that decode serves,
each through the very steps a request's render takes after its load
(:func:`~django_oximg.core.pipeline.render.render_loaded`), so each result
is byte for byte what :func:`~django_oximg.core.pipeline.render.render`
makes for the same plan, and can be stored under that request's cache key.

Why per DCT scale, not one decode at the largest scale for all: libjpeg
decodes at 1/2, 1/4 or 1/8 by dropping DCT coefficients, which gives other
pixels than decoding larger and shrinking, and the load picks the scale
from each size (:func:`~django_oximg.core.pipeline.load.dct_shrink`). A
size derived from a larger decode would differ from its URL's render by a
few levels per pixel: a cache key and an ETag promise the same bytes, so
such a size gets the decode at its own scale instead, shared with every
other size at that scale. The sizes of one scale are rendered together and
that decode is dropped before the next, so one decode is held at a time.
What a batch holds is more than one size's render (the decode, and each
size's own resize and encode): :func:`shared_decodes` tells a caller which
sizes would share a decode, so that it can reserve their combined estimate
(:func:`~django_oximg.core.pipeline.budget.estimate_shared_decode_peak_bytes`) and
give a batch the memory budget cannot hold fewer sizes
(:mod:`django_oximg.render_ahead.rendering`).

Rendered the normal way, each from its own load, because their load is
not a whole-image decode another size could share: sources other than JPEG
(libvips' shrink-on-load reads them at each size: WebP and HEIF scale in
the decoder, PNG and GIF decode every pixel but libvips' thumbnail streams
them), ``crop`` and ``trim`` (full loads, cut before scaling), an
embedded thumbnail, results that keep every metadata field
(``strip_metadata`` off: libvips' own loader), ``JPEG_DECODER`` "libvips",
files libjpeg-turbo declines (CMYK, damage), and results rendered in a
child process (:attr:`~django_oximg.core.pipeline.plan.Plan.isolated`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import pyvips

from django_oximg.core.errors import OximgError
from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.pipeline.encode import check_format
from django_oximg.core.pipeline.libvips import Image, ensure_configured, failure
from django_oximg.core.pipeline.load import (
    Loaded,
    dct_shrink,
    decode_margin,
    turbo_decoded,
    turbo_loaded,
)
from django_oximg.core.pipeline.plan import Plan, RenderSettings
from django_oximg.core.pipeline.render import render, render_loaded
from django_oximg.core.pipeline.rendered import Rendered

#: What a caller names each size by (a cache key, when rendering ahead).
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class DecodeKey:
    """What one shared decode is: the DCT scale, and whether it carries the EXIF block."""

    shrink: int
    #: ``keep_copyright`` copies the EXIF block onto the decode (core/exif.py).
    keep_copyright: bool


@dataclass(frozen=True)
class BatchStats:
    """What a batch did: decodes shared, and sizes rendered the normal way."""

    #: libjpeg-turbo decodes made for the sizes that shared them.
    shared_decodes: int
    #: Sizes derived from a shared decode.
    shared: int
    #: Sizes rendered the normal way (:func:`render`), each with its own load.
    separate: int

    def __add__(self, other: BatchStats) -> BatchStats:
        """What two batches of one source did together."""
        return BatchStats(
            self.shared_decodes + other.shared_decodes,
            self.shared + other.shared,
            self.separate + other.separate,
        )


def decode_key(plan: Plan, settings: RenderSettings) -> DecodeKey | None:
    """The shared decode ``plan``'s load would make, or None when its load is its own.

    The conditions are those under which :func:`~django_oximg.core.pipeline.load.load`
    takes libjpeg-turbo's decode (see the module's docstring for the rest).
    """
    info, options = plan.source, plan.options
    if (
        info.format != "jpeg"
        or plan.full_load
        or plan.isolated
        or info.embedded_thumbnail
        or not options.strip_metadata
        or settings.jpeg_decoder != "libjpeg-turbo"
    ):
        return None
    return DecodeKey(dct_shrink(plan, decode_margin(plan, settings)), options.keep_copyright)


def loaded_from(decoded: Image, plan: Plan) -> Loaded:
    """What the load makes of the decode for ``plan``: upright, and at its size unless
    the high-quality mode's resize does that (``load_thumbnail``, ``load_supersampled``).

    The decode is shared: each size gets its own copy of the image (the
    pixels are not copied), since later steps set and remove metadata on
    the image they are given.
    """
    return turbo_loaded(decoded.copy(), plan)


def shared_decodes(
    plans: Mapping[K, Plan], settings: RenderSettings
) -> tuple[dict[DecodeKey, list[K]], list[K]]:
    """The sizes each shared decode would serve, and the sizes rendered each on its own.

    By the plans' keys, in their order: a caller that renders the groups
    apart (rendering ahead, within the memory budget) pairs each result
    with its size by key.
    """
    groups: dict[DecodeKey, list[K]] = {}
    alone: list[K] = []
    for name, plan in plans.items():
        key = decode_key(plan, settings)
        if key is None:
            alone.append(name)
        else:
            groups.setdefault(key, []).append(name)
    return groups, alone


def render_batch(
    data: bytes,
    plans: Mapping[K, Plan],
    settings: RenderSettings,
    *,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[dict[K, Rendered | OximgError], BatchStats]:
    """Render every plan (all of the one source ``data``); each result under its
    plan's key, and a size that fails is its error there, the others still made.

    Results are keyed, never matched by position: the caller stores each one
    under the cache key of the request its plan is for. ``timeout`` is each
    size's render deadline, from its own start (a request's
    ``RENDER_TIMEOUT``). The decode a group of sizes shares is made within
    the first one's deadline (libjpeg-turbo's decode cannot be stopped, as
    for a request).
    """
    ensure_configured()
    results: dict[K, Rendered | OximgError] = {}
    groups, separate = shared_decodes(plans, settings)
    decodes = shared = 0
    for key, names in groups.items():
        first = plans[names[0]]
        decoded = turbo_decoded(data, key.shrink, first.source, first.options)
        if decoded is None:  # libjpeg-turbo declined the file: libvips loads it, size by size
            separate.extend(names)
            continue
        decodes += 1
        for name in names:
            results[name] = shared_render(decoded, plans[name], settings, clock() + timeout)
            shared += 1
        del decoded  # before the next scale's decode
    for name in separate:
        results[name] = separate_render(data, plans[name], settings, clock() + timeout)
    return {name: results[name] for name in plans}, BatchStats(decodes, shared, len(separate))


def shared_render(
    decoded: Image, plan: Plan, settings: RenderSettings, deadline: float
) -> Rendered | OximgError:
    """One size from the shared decode, under its own deadline."""
    with Deadline(deadline) as watch:
        try:
            check_format(plan.format)
            return render_loaded(loaded_from(decoded, plan), plan, settings, watch)
        except pyvips.Error as error:
            return failure(error, watch)
        except OximgError as error:
            return error


def separate_render(
    data: bytes, plan: Plan, settings: RenderSettings, deadline: float
) -> Rendered | OximgError:
    """One size the normal way: its own load, in a child process if its plan says so."""
    try:
        return render(data, plan.options, plan.format, settings, deadline=deadline, plan=plan)
    except OximgError as error:
        return error
