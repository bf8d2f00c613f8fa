"""libvips set-up, versions and savers, and libvips' errors as the project's.

:func:`configure` runs once per process before any image is touched: it
turns the operation cache off, blocks loaders we never want to reach
untrusted bytes, keeps libvips' chatter out of Python logging and sets
libvips' thread count. :func:`libvips_error` and :func:`failure` are the
only places a ``pyvips.Error`` becomes one of the project's errors;
:func:`watched` ties a computation to a render deadline.
"""

from __future__ import annotations

import re
import threading
from functools import partial
from typing import Any

import pyvips

from django_oximg.core.errors import InvalidImage, OximgError, ProcessingTimeout, UnsupportedFormat
from django_oximg.core.limits.deadlines import Deadline

#: A pyvips image; pyvips ships no type information.
Image = Any

#: Loaders never offered untrusted bytes: they parse formats an image server has
#: no use for and have a history of memory-safety bugs (libvips marks most as
#: untrusted too). Names absent from this libvips build are ignored by libvips.
BLOCKED_LOADERS = (
    "VipsForeignLoadSvg",
    "VipsForeignLoadPdf",
    "VipsForeignLoadMagick",
    "VipsForeignLoadVips",
    "VipsForeignLoadCsv",
    "VipsForeignLoadMatrix",
    "VipsForeignLoadRaw",
    "VipsForeignLoadPpm",
    "VipsForeignLoadRad",
    "VipsForeignLoadFits",
    "VipsForeignLoadAnalyze",
    "VipsForeignLoadOpenslide",
    "VipsForeignLoadOpenexr",
    "VipsForeignLoadMat",
    "VipsForeignLoadDcraw",
)

#: libvips saver per output format, used to tell whether a format is available.
SAVERS = {
    "jpeg": "jpegsave_buffer",
    "png": "pngsave_buffer",
    "webp": "webpsave_buffer",
    "avif": "heifsave_buffer",
    "gif": "gifsave_buffer",
}

#: The libvips metadata field holding an embedded ICC profile.
ICC_FIELD = "icc-profile-data"

#: The libvips metadata field holding the EXIF block, as read or to be written.
EXIF_FIELD = "exif-data"

#: libvips' fields for the EXIF tags ``keep_copyright`` keeps: who made the
#: picture and who owns it (the values written come from the block itself,
#: :mod:`django_oximg.core.exif`).
COPYRIGHT_FIELDS = frozenset({"exif-ifd0-Copyright", "exif-ifd0-Artist"})

#: The EXIF preview image libvips' loaders read into a field of its own.
EXIF_PREVIEW_FIELD = "jpeg-thumbnail-data"

_configured = False
_configure_lock = threading.Lock()


def configure(concurrency: int | None = None, block_untrusted: bool = True) -> None:
    """Set libvips up for untrusted input; call once at process start.

    The operation cache is turned off: it keeps decoded images alive across
    requests (memory the budget cannot see) and every request is different.
    ``concurrency`` is libvips' worker threads per image (None keeps libvips'
    default, the number of CPUs). libvips' info and debug messages stop
    reaching Python logging (:func:`quiet_libvips_info`).
    """
    global _configured
    with _configure_lock:
        pyvips.cache_set_max(0)
        pyvips.cache_set_max_mem(0)
        pyvips.cache_set_max_files(0)
        quiet_libvips_info()
        if block_untrusted:
            pyvips.block_untrusted_set(True)
            for name in BLOCKED_LOADERS:
                pyvips.operation_block_set(name, True)
        if concurrency is not None:
            pyvips.concurrency_set(concurrency)
        _configured = True


def ensure_configured() -> None:
    """Configure with safe defaults if the caller forgot, so blocking is never skipped."""
    if not _configured:
        configure()


#: GLib log levels still passed to Python logging (as pyvips does for all).
LOGGED_LEVELS = (
    pyvips.GLogLevelFlags.LEVEL_ERROR
    | pyvips.GLogLevelFlags.LEVEL_CRITICAL
    | pyvips.GLogLevelFlags.LEVEL_WARNING
    | pyvips.GLogLevelFlags.LEVEL_MESSAGE
    | pyvips.GLogLevelFlags.FLAG_FATAL
    | pyvips.GLogLevelFlags.FLAG_RECURSION
)


def quiet_libvips_info() -> None:
    """Keep libvips' warnings in Python logging, but not its info and debug lines.

    pyvips routes every libvips log line to a Python callback, and libvips
    8.18 writes about ten info and debug lines per thumbnail (the loader it
    picked, the shrink plan, the resize kernels, "threadpool completed"),
    each from inside a C call, so each takes the GIL back while the render
    threads need it. Below warning level the lines now go to GLib's default
    handler, which drops them unless ``G_MESSAGES_DEBUG`` asks for them.
    Relies on two names private to pyvips; without them nothing changes.
    """
    handler_id = getattr(pyvips, "_log_handler_id", None)
    callback = getattr(pyvips, "_log_handler_cb", None)
    if not handler_id or callback is None:
        return
    glib = pyvips.glib_lib
    glib.g_log_remove_handler(b"VIPS", handler_id)
    pyvips._log_handler_id = glib.g_log_set_handler(
        b"VIPS", LOGGED_LEVELS, callback, pyvips.ffi.NULL
    )


def libvips_version() -> str:
    """The running libvips version, e.g. ``"8.18.3"``."""
    return ".".join(str(pyvips.version(part)) for part in range(3))


def check_libvips_version(minimum: tuple[int, int, int] = (8, 18, 3)) -> None:
    """Refuse to run on a libvips older than ``minimum`` (security fixes, loader limits)."""
    running = tuple(int(pyvips.version(part)) for part in range(3))
    if running < minimum:
        wanted = ".".join(map(str, minimum))
        raise RuntimeError(
            f"django-oximg needs libvips >= {wanted}, but {libvips_version()} is loaded; "
            "install a newer pyvips-binary or system libvips"
        )


def saver_available(fmt: str) -> bool:
    """Whether this libvips build can encode ``fmt``."""
    try:
        pyvips.Operation.new_from_name(SAVERS[fmt])
    except (KeyError, pyvips.Error):
        return False
    return True


# --- errors -------------------------------------------------------------------

#: Signatures of formats we recognise but refuse to load (see BLOCKED_LOADERS).
#: Only consulted after libvips found no loader, to tell "a format we block"
#: (415) from "not an image at all" (422). Text formats with no signature
#: (CSV, matrix) cannot be told from garbage and count as not an image.
BLOCKED_SIGNATURES = (
    re.compile(
        # The doctype may hold an internal subset ("[<!ENTITY ...>]"), as XXE attacks do.
        rb"\A\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*"
        rb"(?:<!DOCTYPE\s+svg[^>\[]*(?:\[.*?\][^>]*)?>\s*)?<svg",
        re.S | re.I,
    ),
    re.compile(rb"\A%PDF-"),
    re.compile(rb"\A(?:\x08\xf2\xa6\xb6|\xb6\xa6\xf2\x08)"),  # libvips native .v
    re.compile(rb"\AP[1-7Ff]\s"),  # PBM/PGM/PPM/PFM
    re.compile(rb"\ASIMPLE  ="),  # FITS
    re.compile(rb"\A#\?RADIANCE"),
    re.compile(rb"\AMATLAB"),
    re.compile(rb"\Av/1\x01"),  # OpenEXR
)


def is_blocked_format(data: bytes) -> bool:
    """Whether ``data`` starts like a format we deliberately do not load."""
    head = data[:4096]
    return any(signature.match(head) for signature in BLOCKED_SIGNATURES)


def libvips_error(error: pyvips.Error, data: bytes = b"") -> OximgError:
    """The project error for a libvips failure, keeping libvips' words for logs.

    No loader at all: 415 for a format we block on purpose (SVG, PDF, ...),
    422 for bytes that are no image (empty, random, an HTML error page), as
    imgproxy answers. A loader that fails to decode: 422.
    """
    detail = f"{error.message}: {error.detail}".strip()
    if ("not in a known format" in detail or "is blocked" in detail) and is_blocked_format(data):
        return UnsupportedFormat(detail)
    return InvalidImage(detail)


# --- deadlines ----------------------------------------------------------------


def watched(image: Image, deadline: Deadline) -> Image:
    """``image``, whose computation libvips stops (its kill flag) when ``deadline`` passes.

    Watch each image that will be computed (the one handed to a saver,
    ``copy_memory`` or a region); the computation then fails, and
    :func:`failure` tells a timeout from a broken file.
    """
    deadline.on_expiry(partial(image.set_kill, True))
    return image


def failure(error: pyvips.Error, deadline: Deadline) -> OximgError:
    """The error to raise for a libvips failure during a watched computation."""
    if deadline.expired:
        return ProcessingTimeout(f"render deadline passed: {error.message}")
    return libvips_error(error)
