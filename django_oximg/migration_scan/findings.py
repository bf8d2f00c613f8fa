"""What the scanner says: the libraries, the verdicts, a rule, a finding, a file not scanned.

These are the words every other module of the scanner speaks, kept apart
from the support table so that the table, the scanners and the report can
all import them without importing each other.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SORL = "sorl-thumbnail"
EASY = "easy-thumbnails"
#: django-oscar's {% oscar_thumbnail %} and OSCAR_THUMBNAILER, on either library.
OSCAR = "django-oscar"
#: What django-oscar's OSCAR_THUMBNAILER names to render through django-oximg:
#: the class of the same name as Oscar's (sorl-thumbnail's is Oscar's default).
OSCAR_THUMBNAILER = "django_oximg.contrib.oscar.SorlThumbnail"
OSCAR_THUMBNAILERS = {
    "oscar.core.thumbnails.SorlThumbnail": OSCAR_THUMBNAILER,
    "oscar.core.thumbnails.EasyThumbnails": "django_oximg.contrib.oscar.EasyThumbnails",
}

UNCHANGED = "unchanged"
EDIT = "edit"
UNSUPPORTED = "unsupported"
#: Verdicts from best to worst: a tag is as bad as its worst part.
VERDICTS = (UNCHANGED, EDIT, UNSUPPORTED)


@dataclass(frozen=True)
class Rule:
    """What django-oximg makes of one feature: a verdict and, unless unchanged, why or how."""

    verdict: str
    advice: str = ""


@dataclass(frozen=True)
class Finding:
    """One place that uses sorl-thumbnail or easy-thumbnails, and what it takes to move."""

    path: str
    line: int
    library: str
    #: The SUPPORT row (library, feature) that decided; several for a tag.
    features: tuple[str, ...]
    #: The code as found (one tag, filter, import or setting).
    code: str
    verdict: str
    #: The code as it reads on django-oximg, when one piece of text says it exactly.
    replacement: str = ""
    advice: str = ""


def worst(verdicts: Iterable[str]) -> str:
    return max(verdicts, key=VERDICTS.index, default=UNCHANGED)


@dataclass(frozen=True)
class NotScanned:
    """A file the scan did not read, and why (for the report)."""

    path: str
    reason: str


class ScanError(ValueError):
    """Text a scanner cannot read (Python that does not parse); the message says why.

    The file is reported as not scanned, so that a scan that could not read
    everything never looks like one that found nothing.
    """
