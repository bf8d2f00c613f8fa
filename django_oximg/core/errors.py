"""The project's exception hierarchy.

Each class is a reason a request cannot be served. ``core/serving/replies.py`` holds
the one table from these classes to HTTP statuses; nothing else decides a status.
The ``public`` message is the short plain text a client sees; ``detail`` is kept
for logs only, because it may name paths or libvips internals.
"""

from __future__ import annotations


class OximgError(Exception):
    """Base class: a request that cannot be served, for a reason we understand."""

    public = "Error"

    def __init__(self, detail: str = "", public: str | None = None) -> None:
        super().__init__(detail or public or self.public)
        self.detail = detail
        if public is not None:
            self.public = public


class InvalidOptions(OximgError):
    """The URL's processing options cannot be parsed (400)."""

    public = "Invalid options"


class InvalidSignature(OximgError):
    """The URL's signature is missing, malformed or wrong (403)."""

    public = "Forbidden"


class SourceNotFound(OximgError):
    """The source does not exist or is not allowed (404, with no detail)."""

    public = "Not found"


class ExpiredURL(OximgError):
    """The URL's ``expires`` timestamp has passed (404, as imgproxy answers)."""

    public = "Expired URL"


class UnsupportedFormat(OximgError):
    """The source or the requested output format is not supported or is blocked (415)."""

    public = "Unsupported image format"


class InvalidImage(OximgError):
    """The source cannot be decoded (422)."""

    public = "Invalid source image"


class SourceTooLarge(InvalidImage):
    """The source exceeds a size limit: bytes, pixels or frames (422).

    ``limit`` names the limit it exceeds (one of
    :mod:`django_oximg.core.limits.source_limits`' names, "" when not said),
    ``found`` what the source has of it and ``allowed`` the most accepted,
    so that an upload form can say which limit, in its own words; for the
    resolution limits, ``size`` is the source's width, height and frames.
    """

    public = "Source image is too large"

    def __init__(
        self,
        detail: str = "",
        public: str | None = None,
        *,
        limit: str = "",
        found: int = 0,
        allowed: int = 0,
        size: tuple[int, int, int] = (0, 0, 0),
    ) -> None:
        super().__init__(detail, public)
        self.limit = limit
        self.found = found
        self.allowed = allowed
        self.size = size


class ResultTooLarge(InvalidImage):
    """The encoded result could not be brought under ``max_bytes`` (422)."""

    public = "Result image is too large"


class Overloaded(OximgError):
    """The processing queue is full (429)."""

    public = "Too many requests"


class ProcessingTimeout(OximgError):
    """A job waited or ran past its deadline (503)."""

    public = "Processing timed out"


class SourceUnavailable(OximgError):
    """The source storage failed (502)."""

    public = "Source unavailable"


class SourceTimeout(OximgError):
    """The source storage did not answer in time (504)."""

    public = "Source timed out"
