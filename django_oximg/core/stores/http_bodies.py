"""A response's body read within its limits: bytes, memory, time and encoding.

The size limit holds before the body (``Content-Length`` checked) and while
it comes (at most ``max_bytes + 1`` bytes read); the bytes are reserved in
the memory budget ahead of the read; the download's time limit is checked
after every read; a gzip body is inflated in full within the same limit or
refused, never truncated. A ranged read (the first kilobytes, for a header)
takes at most its limit, whatever the server sends.
"""

from __future__ import annotations

import io
import zlib
from typing import TypeAlias

from urllib3.response import BaseHTTPResponse

from django_oximg.core.errors import InvalidImage, SourceTimeout, SourceTooLarge, SourceUnavailable
from django_oximg.core.stores.http_connections import TimeLimit
from django_oximg.core.stores.http_guard import HttpUrl
from django_oximg.core.stores.protocols import Reserve

Response: TypeAlias = BaseHTTPResponse

#: Bytes asked of the socket per read: big enough to be cheap per byte, small
#: enough that a read past the size limit stops close to it.
CHUNK = 64 * 1024

#: A body of unknown length is reserved from the memory budget this much at a
#: time, ahead of the bytes read (one reservation per chunk would be 800
#: lock round trips for a 50 MiB body).
RESERVE_STEP = 1024 * 1024

#: ``Content-Encoding`` values decoded here. Images are compressed already, so
#: we ask for ``identity``; a server that gzips anyway is decoded in full or
#: refused, never truncated. Anything else (br, zstd, deflate) is refused.
GZIP_ENCODINGS = frozenset({"gzip", "x-gzip"})


def read_body(
    response: Response,
    url: HttpUrl,
    max_bytes: int,
    time_limit: TimeLimit,
    reserve: Reserve,
) -> bytes:
    """The whole body: at most ``max_bytes``, gzip decoded, counted as it comes.

    ``reserve`` gets the declared ``Content-Length`` before the body is read,
    or, without one, :data:`RESERVE_STEP` bytes at a time ahead of it; at most
    ``max_bytes + 1`` bytes are asked of the socket, so a body that is too
    large is refused as soon as it shows.
    """
    declared = declared_length(response)
    if declared is not None and declared > max_bytes:
        raise SourceTooLarge(f"{url} declares {declared} bytes, limit {max_bytes}")
    reserved = declared if declared is not None else 0
    reserve(reserved)
    # A BytesIO, not a bytearray: its getvalue() hands over the buffer it
    # grew, where bytes(bytearray) would hold the body twice for a moment.
    data = io.BytesIO()
    size = 0
    while True:
        chunk = response.read(min(CHUNK, max_bytes + 1 - size), decode_content=False)
        if time_limit.expired:
            raise SourceTimeout(f"{url}: download took longer than {time_limit.seconds} s")
        if not chunk:
            break
        if size + len(chunk) > reserved:
            step = max(RESERVE_STEP, size + len(chunk) - reserved)
            reserve(step)
            reserved += step
        size += data.write(chunk)
        if size > max_bytes:
            raise SourceTooLarge(f"{url} sent more than {max_bytes} bytes")
        time_limit.remaining()
    if declared is not None and size != declared:
        raise SourceUnavailable(f"{url} sent {size} of {declared} bytes")
    body = decoded(data.getvalue(), response.headers.get("Content-Encoding", ""), max_bytes, url)
    if len(body) > reserved:  # inflated from gzip
        reserve(len(body) - reserved)
    return body


def read_prefix(response: Response, url: HttpUrl, limit: int, time_limit: TimeLimit) -> bytes:
    """At most ``limit`` bytes of the body, whatever length the server sends."""
    data = bytearray()
    while len(data) < limit:
        chunk = response.read(min(CHUNK, limit - len(data)), decode_content=False)
        if time_limit.expired:
            raise SourceTimeout(f"{url}: download took longer than {time_limit.seconds} s")
        if not chunk:
            break
        data += chunk
        time_limit.remaining()
    return decoded_prefix(bytes(data), response.headers.get("Content-Encoding", ""), limit, url)


def ignore(_nbytes: int) -> None:
    """The ``reserve`` of a read that counts its bytes against nothing."""


def declared_length(response: Response) -> int | None:
    """The ``Content-Length`` as a number, or None when absent (chunked, close-delimited).

    urllib3 itself refuses conflicting or malformed values (502).
    """
    value = response.headers.get("Content-Length")
    if value is None or not value.strip().isdigit():
        return None
    return int(value.strip())


def gzip_inflater(encoding: str, url: HttpUrl) -> zlib._Decompress | None:
    """A gzip decompressor for a body sent with ``encoding``, or None when it is not encoded."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding not in GZIP_ENCODINGS:
        raise InvalidImage(f"{url}: unsupported Content-Encoding {encoding!r}")
    return zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)


def decoded(data: bytes, encoding: str, max_bytes: int, url: HttpUrl) -> bytes:
    """``data`` with its Content-Encoding undone, complete and within ``max_bytes``."""
    inflater = gzip_inflater(encoding, url)
    if inflater is None:
        return data
    try:
        body = inflater.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise InvalidImage(f"{url}: broken gzip body: {exc}") from exc
    if len(body) > max_bytes:
        raise SourceTooLarge(f"{url} inflates to more than {max_bytes} bytes")
    if not inflater.eof or inflater.unused_data:
        raise InvalidImage(f"{url}: gzip body is truncated or has trailing data")
    return body


def decoded_prefix(data: bytes, encoding: str, limit: int, url: HttpUrl) -> bytes:
    """The first ``limit`` bytes of what ``data``, the start of a body, decodes to."""
    inflater = gzip_inflater(encoding, url)
    if inflater is None:
        return data
    try:
        return inflater.decompress(data, limit)
    except zlib.error as exc:
        raise InvalidImage(f"{url}: broken gzip body: {exc}") from exc
