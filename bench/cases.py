"""The benchmark cases and their URLs for each server, in one table.

Django-free and pyvips-free (the harness, the wrk script and the unit tests
use it). A case is one source and one operation; each server spells the same
operation in its own URL language: imgproxy's for django-oximg, thumbor's for
thumbor. Every django-oximg server and in-process thumbnailer of the
benchmarks signs with the same key and salt (:data:`KEY`, :data:`SALT`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.driver import diverse_widths


@dataclass(frozen=True)
class Case:
    """One operation on one source file of bench/images.py."""

    name: str
    source: str
    #: "fit" (into width x height) or "fill" (crop to exactly width x height).
    mode: str
    #: The box; "diverse" URLs vary the width from width-15 to width.
    width: int
    height: int
    format: str
    quality: int
    #: When set, "diverse" widths spread over smallest..width instead:
    #: thumbnails of every size a page asks for, not only the largest.
    smallest: int = 0

    def widths(self, count: int, offset: int = 0) -> list[int]:
        """Widths width-15..width (the reference 485-500 for a 500 box), or smallest..width."""
        if self.smallest:
            span = self.width - self.smallest + 1
            # A stride coprime with the span visits every width, neighbours far apart.
            return [self.smallest + ((offset + i) * SPREAD_STRIDE) % span for i in range(count)]
        shift = self.width - 500
        return [w + shift for w in diverse_widths(count, offset)]


#: Step between consecutive spread widths: coprime with 201, the span of 300-500.
SPREAD_STRIDE = 61


CASES = {
    case.name: case
    for case in (
        Case("medium-jpeg", "medium.jpg", "fit", 500, 500, "jpeg", 80),
        Case("large-jpeg", "large.jpg", "fit", 500, 500, "jpeg", 80),
        Case("medium-webp", "medium.jpg", "fit", 500, 500, "webp", 75),
        Case("medium-jpeg-boxes", "medium.jpg", "fit", 500, 500, "jpeg", 80, smallest=300),
        Case("medium-webp-boxes", "medium.jpg", "fit", 500, 500, "webp", 75, smallest=300),
        Case("medium-avif", "medium.jpg", "fit", 500, 500, "avif", 65),
        Case("alpha-png-webp", "alpha.png", "fit", 400, 400, "webp", 75),
        Case("anim-gif-webp", "anim.gif", "fit", 240, 240, "webp", 75),
        Case("large-fill-1200", "large.jpg", "fill", 1200, 1200, "jpeg", 80),
    )
}

#: imgproxy's documented example key and salt, as tests/settings.py and
#: bench/bench_settings.py have them: every benchmark signs with these.
KEY = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
SALT = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"

#: The cases most sites serve most (and `--quick` runs): a photo fitted as JPEG.
PRIORITY_CASES = ("medium-jpeg", "large-jpeg")


def oximg_path(case: Case, width: int, tag: str) -> str:
    """The unsigned imgproxy path (signature added by the caller)."""
    resize = "fit" if case.mode == "fit" else "fill"
    bust = f"/cb:{tag}" if tag else ""
    return (
        f"/rs:{resize}:{width}:{case.height}/q:{case.quality}{bust}"
        f"/plain/{case.source}@{case.format}"
    )


def signed(path: str) -> str:
    """``path`` signed (tests/servers.py's independent signer) under the servers' /img/."""
    from tests.servers import imgproxy_signature

    return f"/img/{imgproxy_signature(path)}{path}"


def oximg_url(case: Case, width: int, tag: str) -> str:
    """The signed path a django-oximg server of the benchmarks answers for ``case``."""
    return signed(oximg_path(case, width, tag))


def thumbor_path(case: Case, width: int, tag: str) -> str:
    """thumbor's unsafe URL for the same operation (``?cb=`` only defeats caches)."""
    fit = "fit-in/" if case.mode == "fit" else ""
    filters = f"filters:quality({case.quality})"
    if case.format != "jpeg":
        filters = f"filters:format({case.format}):quality({case.quality})"
    query = f"?cb={tag}" if tag else ""
    return f"/unsafe/{fit}{width}x{case.height}/{filters}/{case.source}{query}"


def url_list(
    case: Case, count: int, kind: str, run_tag: str, build: Callable[[Case, int, str], str]
) -> list[str]:
    """``count`` paths: "diverse" (distinct width + cachebuster each) or "same" (one URL)."""
    if kind == "same":
        return [build(case, case.width, "")] * count
    if kind != "diverse":
        raise ValueError(f"unknown URL kind {kind!r}")
    return [
        build(case, width, f"{run_tag}{index}") for index, width in enumerate(case.widths(count))
    ]
