"""Cache keys, ETags and content types: the one place their formats are spelled.

Every cached answer (a thumbnail or an ``/info`` document) is stored under::

    <2 hex>/<32 hex: the source>/<40 hex: the request>.<extension>

Every answer derived from one source sits in one directory, so purging a
source is one prefix delete (:func:`source_directory`). The request hash
covers the canonical request (never the raw URL: reordered or long/short
option names share one object), the pipeline version, the libvips version and
the fingerprint of every setting that changes output bytes
(:func:`output_fingerprint`), so a changed setting or an upgrade never serves
a stale result. The ETag is that request hash: rendering is deterministic, so
it is a strong validator, the same on a miss and on a hit.

A result whose quality ``autoquality`` searched has a sidecar beside it,
``<result key>.quality``, holding that quality as ASCII digits
(:func:`quality_key`, :func:`quality_bytes`, :func:`quality_from`). It is
written before the result, so the result's presence commits it; it does
not have the form of :data:`RESULT_KEY`, so listings of results skip it.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Mapping

#: Bump when a change to the pipeline changes output bytes for the same
#: request and settings: it is part of every cache key and of the fingerprint
#: the template tags put in their URLs, so no old result is served again.
PIPELINE_VERSION = "5"

#: Content type of each extension a cache key can end with.
CONTENT_TYPES = {
    "jpeg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "avif": "image/avif",
    "gif": "image/gif",
    "json": "application/json",
}

#: The form of every key :func:`result_key` makes. Cleaning only ever touches
#: names of this form, so a result cache pointed at a shared directory or
#: bucket by mistake loses nothing else.
RESULT_KEY = re.compile(r"[0-9a-f]{2}/[0-9a-f]{32}/[0-9a-f]{40}\.[a-z0-9]+")

#: Hex digits of the settings fingerprint (48 bits: collisions between two
#: configurations of one site are not a concern).
FINGERPRINT_LENGTH = 12


def sha256_hex(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def source_directory(source: str) -> str:
    """The cache directory holding every answer derived from ``source`` (as in URLs)."""
    source_hash = sha256_hex(source)[:32]
    return f"{source_hash[:2]}/{source_hash}"


def result_key(source: str, request: str, version: str, extension: str) -> str:
    """The key of one answer: ``request`` is the canonical request text, ``version``
    what else decides its bytes (:func:`cache_version`)."""
    return f"{source_directory(source)}/{sha256_hex(version, request)[:40]}.{extension}"


#: Appended to a result's key to name its quality sidecar.
QUALITY_SUFFIX = ".quality"

#: Longest sidecar content read ("100" is three bytes; more is garbled).
QUALITY_BYTES = 8


def quality_key(key: str) -> str:
    """The key of the sidecar holding the quality ``autoquality`` chose for ``key``'s result."""
    return key + QUALITY_SUFFIX


def is_quality_key(key: str) -> bool:
    """Whether ``key`` names a quality sidecar (of a key of :data:`RESULT_KEY`'s form)."""
    return (
        key.endswith(QUALITY_SUFFIX)
        and RESULT_KEY.fullmatch(key.removesuffix(QUALITY_SUFFIX)) is not None
    )


def quality_bytes(quality: int) -> bytes:
    """A sidecar's content: the quality in ASCII digits."""
    return str(quality).encode("ascii")


def quality_from(data: bytes) -> int:
    """The quality a sidecar holds; 0 (none) for anything but a quality of 1..100."""
    text = data.strip()
    if not text.isdigit() or len(text) > 3:
        return 0
    quality = int(text)
    return quality if 1 <= quality <= 100 else 0


def etag(key: str) -> str:
    """The strong ETag of the answer stored under ``key``: its request hash."""
    return '"' + posixpath.splitext(posixpath.basename(key))[0] + '"'


def content_type(key: str, head: bytes = b"") -> str:
    """The content type of the answer stored under ``key``, from its extension.

    A ``format:best`` answer's extension does not say its format:
    :func:`sniffed_content_type` reads it from ``head``, its first bytes.
    """
    if is_best_key(key):
        return sniffed_content_type(head)
    return CONTENT_TYPES.get(posixpath.splitext(key)[1][1:], "application/octet-stream")


#: Extension of a ``format:best`` answer's key: its format is chosen by the render.
BEST_EXTENSION = "best"

#: Bytes of an answer enough to tell its image format.
SNIFF_BYTES = 12


def is_best_key(key: str) -> bool:
    """Whether ``key`` holds a ``format:best`` answer, whose format its bytes say."""
    return key.endswith("." + BEST_EXTENSION)


def sniffed_content_type(head: bytes) -> str:
    """The content type of an image from its first :data:`SNIFF_BYTES` bytes."""
    if head.startswith(b"\xff\xd8\xff"):
        return CONTENT_TYPES["jpeg"]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return CONTENT_TYPES["png"]
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return CONTENT_TYPES["webp"]
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return CONTENT_TYPES["gif"]
    if head[4:12] in (b"ftypavif", b"ftypavis"):
        return CONTENT_TYPES["avif"]
    return "application/octet-stream"


def output_fingerprint(values: Mapping[str, object]) -> str:
    """A short, stable hash of the settings that change output bytes, and the pipeline version.

    ``values`` maps each such setting's name to its value (``conf`` decides
    which settings those are). Stable across processes and deploys: equal
    settings give an equal fingerprint, so caches stay warm; any change gives
    another. The template tags put it in their URLs, the server in its keys.
    """
    text = json.dumps({"pipeline": PIPELINE_VERSION, **values}, sort_keys=True, default=_jsonable)
    return sha256_hex(text)[:FINGERPRINT_LENGTH]


def cache_version(fingerprint: str, libvips_version: str) -> str:
    """What besides the canonical request decides an answer's bytes.

    The libvips version is in server keys but not in the tags' URLs: an
    upgrade renders afresh, but does not move every URL of a site.
    """
    return f"{fingerprint}:{libvips_version}"


def _jsonable(value: object) -> object:
    """Mappings as dicts and sequences as lists, for :func:`output_fingerprint`."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | list | frozenset | set):
        return sorted(value, key=repr) if isinstance(value, frozenset | set) else list(value)
    raise TypeError(f"cannot fingerprint {type(value).__name__}")
