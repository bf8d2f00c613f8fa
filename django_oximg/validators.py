"""Refuse an upload the image server would refuse, with a message that says which limit.

Add :func:`validate_servable_image` to any ``ImageField`` or ``FileField``
(model or form)::

    from django_oximg.validators import validate_servable_image

    class Photo(models.Model):
        image = models.ImageField(upload_to="photos/", validators=[validate_servable_image])

Django's ``ImageField`` asks Pillow whether a file is an image, and Pillow
opens anything up to its own bomb limit (about 179 megapixels); the server
refuses a source over ``MAX_SRC_RESOLUTION`` (50 by default), so a 50 MP
phone photo would be stored and then answered with a 422 on every page. The
validator asks the thumbnailer of this process the same questions a request
asks, with the same code (:meth:`~django_oximg.core.serving.handler.Thumbnailer.check_servable`):
the bytes, the format, the resolution (every frame of an animation that
stays one), and the memory estimate of its cheapest thumbnail against the
memory budget.
"""

from __future__ import annotations

from typing import IO, Any

from django.core.exceptions import ValidationError
from django.template.defaultfilters import filesizeformat
from django.utils.deconstruct import deconstructible
from django.utils.formats import number_format
from django.utils.translation import gettext_lazy as _

from django_oximg import conf, runtime
from django_oximg.core.errors import OximgError, SourceTooLarge, UnsupportedFormat
from django_oximg.core.limits import source_limits

#: Messages, by :attr:`SourceTooLarge.limit` (and "animation" for a
#: resolution counted over several frames). ``%(...)s`` are filled in.
MESSAGES = {
    source_limits.FILE_SIZE: _("This file is %(found)s; the largest accepted is %(allowed)s."),
    source_limits.RESOLUTION: _(
        "This image is %(width)s\u00d7%(height)s (%(found)s megapixels); "
        "the largest accepted is %(allowed)s megapixels."
    ),
    "animation": _(
        "This animation has %(frames)s frames of %(width)s\u00d7%(height)s "
        "(%(found)s megapixels in all); the largest accepted is %(allowed)s megapixels."
    ),
    source_limits.FRAME_RESOLUTION: _(
        "Each frame of this animation is %(width)s\u00d7%(height)s (%(found)s megapixels); "
        "the largest accepted is %(allowed)s megapixels."
    ),
    source_limits.FRAMES: _(
        "This animation has %(found)s frames; the most accepted is %(allowed)s."
    ),
    source_limits.MEMORY: _(
        "This image would need %(found)s of memory to make even a small thumbnail; "
        "the server has %(allowed)s."
    ),
    "": _("This image is too large for the server."),
}

INVALID_MESSAGE = _("This file is not an image the server can read.")
FORMAT_MESSAGE = _("The server does not accept images in this format.")


@deconstructible
class ServableImageValidator:
    """Refuses a file the image server would refuse to make any thumbnail of.

    Raises ``ValidationError`` with the code ``"oximg_<limit>"`` (for
    example ``oximg_resolution``, ``oximg_file_size``), ``oximg_format`` or
    ``oximg_invalid``, and a message naming the limit. The limits are read
    when a file is checked, so a changed setting applies at once.
    """

    def __call__(self, value: Any) -> None:
        if not value or getattr(value, "_committed", False) is True:
            # A model's file already stored (an unchanged field on every save
            # of its form) is not read again from its storage; the tags take
            # their empty path for one over the limits.
            return
        limit = conf.get_settings().MAX_SRC_FILE_SIZE
        size = getattr(value, "size", None)
        try:
            if isinstance(size, int):
                source_limits.check_file_size(size, limit)  # over it: refused unread
            runtime.get_thumbnailer().check_servable(read_start(value, limit + 1))
            return
        except OximgError as found:
            error = found
        raise validation_error(error)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServableImageValidator)

    def __hash__(self) -> int:
        return hash(ServableImageValidator)


#: The validator to list in a field's ``validators``.
validate_servable_image = ServableImageValidator()


def read_start(value: Any, count: int) -> bytes:
    """Up to ``count`` bytes of the file ``value`` from its start, its position put
    back; a closed file is opened for it, and closed again."""
    opened = bool(getattr(value, "closed", False))
    if opened:
        value.open("rb")
    file: IO[bytes] = getattr(value, "file", None) or value
    position = file.tell()
    file.seek(0)
    try:
        return file.read(count)
    finally:
        file.seek(position)
        if opened:
            value.close()


def validation_error(error: OximgError) -> ValidationError:
    """The form's error for what the server refuses."""
    if isinstance(error, SourceTooLarge):
        return too_large(error)
    if isinstance(error, UnsupportedFormat):
        return ValidationError(FORMAT_MESSAGE, code="oximg_format")
    return ValidationError(INVALID_MESSAGE, code="oximg_invalid")


def too_large(error: SourceTooLarge) -> ValidationError:
    """The message naming the limit ``error`` says the source exceeds."""
    width, height, frames = error.size
    kind = error.limit if error.limit in MESSAGES else ""
    if kind == source_limits.RESOLUTION and frames > 1:
        kind = "animation"
    params: dict[str, Any] = {"width": width, "height": height, "frames": frames}
    if kind in (source_limits.FILE_SIZE, source_limits.MEMORY):
        params.update(found=file_size(error.found), allowed=file_size(error.allowed))
        if params["found"] == params["allowed"]:  # "128.9 KB; ... 128.9 KB" says nothing
            params.update(found=exact_size(error.found), allowed=exact_size(error.allowed))
    elif kind in (source_limits.RESOLUTION, source_limits.FRAME_RESOLUTION, "animation"):
        params.update(found=megapixels(error.found), allowed=megapixels(error.allowed))
    else:
        params.update(found=error.found, allowed=error.allowed)
    code = f"oximg_{error.limit}" if kind else "oximg_too_large"
    return ValidationError(MESSAGES[kind], code=code, params=params)


def file_size(count: int) -> str:
    """``count`` bytes, as people read a file's size ("1.2 MB")."""
    return str(filesizeformat(count))


def exact_size(count: int) -> str:
    """``count`` bytes, to the byte, in the active locale."""
    return str(_("%(count)s bytes") % {"count": number_format(count, force_grouping=True)})


def megapixels(pixels: int) -> str:
    """``pixels`` in megapixels, to one decimal, in the active locale ("50.1", "50")."""
    value = round(pixels / 1_000_000, 1)
    return number_format(int(value) if value == int(value) else value)
