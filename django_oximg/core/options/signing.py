"""Sign and verify request paths the way imgproxy does.

A signed URL is ``/<signature>/<path>``, where ``path`` starts with ``/`` and::

    signature = base64url_unpadded(HMAC-SHA256(key, salt + path)[:signature_size])

Keys and salts are configured in hex, as imgproxy takes them, so an existing
imgproxy URL builder (or CDN rule) produces URLs this module accepts. Several
key/salt pairs allow rotation: we sign with the first and accept any of them.

The HMAC and the base64 come from itsdangerous, but its own verification is
too lenient for a URL signature: it accepts ``=`` padding, ignores non-ASCII
characters and accepts a last character whose unused low bits differ. Each of
those would let one signed image answer to many URLs, and so defeat a CDN or
the result cache. :meth:`URLSigner.verify` therefore checks the exact form of
the segment (length, alphabet, canonical encoding) before comparing digests in
constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from itsdangerous import Signer
from itsdangerous.encoding import base64_decode, base64_encode

from django_oximg.core.errors import InvalidSignature

#: Bytes of an HMAC-SHA256 digest; imgproxy's ``SIGNATURE_SIZE`` may keep fewer.
DIGEST_SIZE = 32

#: Signature segments imgproxy accepts in place of a signature when signing is
#: switched off. Kept to these two literals so a disabled signer never turns
#: arbitrary first segments into distinct cacheable URLs.
UNSIGNED_SEGMENTS = frozenset({"insecure", "unsafe"})

_HEX = re.compile("(?:[0-9A-Fa-f]{2})+")


@dataclass(frozen=True)
class KeyPair:
    """One imgproxy key and salt, already decoded from hex."""

    key: bytes
    salt: bytes

    def __repr__(self) -> str:
        """Keep secrets out of logs and tracebacks."""
        return f"KeyPair(key=<{len(self.key)} bytes>, salt=<{len(self.salt)} bytes>)"


def pairs_from_hex(keys: Sequence[str], salts: Sequence[str]) -> tuple[KeyPair, ...]:
    """Decode imgproxy-style hex keys and salts into pairs, in order.

    Raises ``ValueError`` naming the bad entry (by position, never by value)
    when a key or salt is empty or not hex, or when the two lists differ in
    length: imgproxy refuses to start in those cases too.
    """
    if isinstance(keys, str) or isinstance(salts, str):
        raise ValueError("keys and salts must be sequences of hex strings, not one string")
    if len(keys) != len(salts):
        raise ValueError(
            f"number of keys and number of salts should be equal: "
            f"{len(keys)} keys, {len(salts)} salts"
        )
    return tuple(
        KeyPair(key=_decode_hex(key, "key", index), salt=_decode_hex(salt, "salt", index))
        for index, (key, salt) in enumerate(zip(keys, salts, strict=True))
    )


def _decode_hex(text: str, name: str, index: int) -> bytes:
    """Decode one hex setting, with an error that says which one is wrong."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"{name} #{index} is empty or not a string")
    # Stricter than bytes.fromhex, which skips spaces: imgproxy's decoder does not.
    if not _HEX.fullmatch(text):
        raise ValueError(f"{name} #{index} is not valid hex (an even number of 0-9a-f digits)")
    return bytes.fromhex(text)


def signature_length(signature_size: int) -> int:
    """Characters of unpadded base64 for ``signature_size`` bytes (43 for 32)."""
    return math.ceil(signature_size * 4 / 3)


def path_bytes(path: str | bytes) -> bytes:
    """The exact bytes the HMAC covers.

    ``bytes`` are used as received. ``str`` is encoded as UTF-8, which is what
    URL builders sign; a WSGI caller holding the raw request URI as a
    latin-1 str (PEP 3333) should pass ``raw.encode("latin-1")`` instead.
    """
    return path if isinstance(path, bytes) else path.encode("utf-8")


class URLSigner:
    """Signs paths with the first key/salt pair and verifies against all of them.

    Thread-safe: it holds only immutable state, and every digest uses a fresh
    HMAC object.
    """

    def __init__(self, pairs: Sequence[KeyPair], signature_size: int = DIGEST_SIZE) -> None:
        if not pairs:
            raise ValueError("at least one key/salt pair is needed to sign URLs")
        if not 1 <= signature_size <= DIGEST_SIZE:
            raise ValueError(f"signature size should be within 1 and 32, got {signature_size}")
        self._salts = tuple(pair.salt for pair in pairs)
        # key_derivation="none": imgproxy uses the decoded key as the HMAC key
        # as is, and its salt is a message prefix, not itsdangerous' salt.
        self._signers = tuple(
            Signer(secret_key=pair.key, key_derivation="none", digest_method=hashlib.sha256)
            for pair in pairs
        )
        self.signature_size = signature_size
        length = signature_length(signature_size)
        self._form = re.compile(f"[A-Za-z0-9_-]{{{length}}}")

    def __repr__(self) -> str:
        return f"URLSigner(<{len(self._signers)} pairs>, signature_size={self.signature_size})"

    def _digest(self, index: int, path: str | bytes) -> bytes:
        """The truncated raw HMAC of ``salt + path`` with pair ``index``."""
        signer = self._signers[index]
        message = self._salts[index] + path_bytes(path)
        digest = signer.algorithm.get_signature(signer.derive_key(), message)
        return digest[: self.signature_size]

    def sign(self, path: str | bytes) -> str:
        """The signature segment for ``path`` (which starts with ``/``)."""
        return base64_encode(self._digest(0, path)).decode("ascii")

    def signed_path(self, path: str) -> str:
        """``path`` with its signature segment in front: ``/<signature><path>``."""
        return f"/{self.sign(path)}{path}"

    def verify(self, signature: str, path: str | bytes) -> None:
        """Raise :class:`InvalidSignature` unless ``signature`` signs ``path``.

        ``signature`` must be the segment exactly as it appeared in the raw
        URL, before any percent-decoding, so that no two spellings of it pass.
        """
        if signature in UNSIGNED_SEGMENTS:
            raise InvalidSignature("unsigned placeholder while signing is enabled")
        claimed = self._decode_strictly(signature)
        try:
            message = path_bytes(path)
        except UnicodeEncodeError as error:  # lone surrogates: no URL builder signed this
            raise InvalidSignature("path is not encodable as UTF-8") from error
        matched = False
        for index in range(len(self._signers)):
            # No early exit: the time taken does not depend on which pair matched.
            matched |= hmac.compare_digest(claimed, self._digest(index, message))
        if not matched:
            raise InvalidSignature("signature does not match the path")

    def _decode_strictly(self, signature: str) -> bytes:
        """Decode the segment, accepting only the one canonical spelling."""
        if not self._form.fullmatch(signature):
            raise InvalidSignature("malformed signature segment")
        claimed = base64_decode(signature)
        if base64_encode(claimed).decode("ascii") != signature:
            raise InvalidSignature("non-canonical signature encoding")
        return claimed


def split_signed_path(full_path: str) -> tuple[str, str]:
    """Split ``/<signature>/<rest>`` into ``(signature, restored_path("/<rest>"))``.

    The part after the signature comes back repaired as imgproxy repairs it
    (:func:`restored_path`): that is the path the signature covers and the
    parser reads. Raises :class:`InvalidSignature` when there is no non-empty
    first segment followed by a ``/``, so a request without one never reaches
    storage.
    """
    if not full_path.startswith("/"):
        raise InvalidSignature("path does not start with /")
    signature, slash, rest = full_path[1:].partition("/")
    if not slash or not signature:
        raise InvalidSignature("missing signature segment")
    return signature, restored_path("/" + rest)


#: imgproxy's pattern for a plain source whose ``//`` after the scheme was
#: collapsed to ``/`` by a browser or proxy (``http:/host/a.jpg``). ``\S`` as Go
#: reads it: anything but ASCII space, tab, newline, form feed and carriage return.
COLLAPSED_SCHEME = re.compile(r"/plain/([^ \t\n\f\r]+):/([^/])")

#: The one spelling of an encoded ``:`` that imgproxy reads in option segments.
ENCODED_COLON = "%3A"


def restored_path(path: str) -> str:
    """``path`` (from the ``/`` after the signature on) as imgproxy verifies and parses it.

    Browsers and proxies rewrite URLs; imgproxy undoes three rewrites before
    it checks the signature, so the signature covers the repaired path and a
    rewritten URL still verifies. Each repair is made exactly as imgproxy
    makes it and no further, because every spelling that verifies is one
    more URL for the same image in a CDN:

    1. One empty segment right after the signature is dropped
       (``/<sig>//plain/a.png`` is ``/<sig>/plain/a.png``, as in imgproxy v4,
       whose signature check adds the leading ``/`` only when it is missing).
    2. ``%3A`` (upper case only) in the option segments becomes ``:``; the
       source is left alone (its percent-encoding is decoded once, later).
    3. In a plain source, ``<scheme>:/x`` becomes ``<scheme>://x``
       (``local:/x`` becomes ``local:///x``), imgproxy's ``redenormalizePath``.
       As in imgproxy the pattern is greedy: only the last ``:/`` after
       ``/plain/`` is repaired.
    """
    if path.startswith("//"):
        path = path[1:]
    if ENCODED_COLON in path:
        path = _decode_option_colons(path)
    return COLLAPSED_SCHEME.sub(_uncollapse, path)


def _decode_option_colons(path: str) -> str:
    """``%3A`` read as ``:`` in the segments before the source (the first without a colon)."""
    segments = path.split("/")
    for index in range(1, len(segments)):
        segment = segments[index].replace(ENCODED_COLON, ":")
        if ":" not in segment:
            break
        segments[index] = segment
    return "/".join(segments)


def _uncollapse(match: re.Match[str]) -> str:
    scheme = match[1]
    slashes = ":///" if scheme == "local" else "://"
    return f"/plain/{scheme}{slashes}{match[2]}"


def verified_rest(full_path: str, signer: URLSigner, allow_unsigned: bool = False) -> str:
    """Check a request path's signature segment and return the path after it.

    The one place the rule for imgproxy's placeholders is spelled: with
    ``allow_unsigned`` (``ALLOW_UNSIGNED``), ``insecure`` or ``unsafe`` may
    stand in for a signature, and signed URLs keep working; without it
    every path must carry a valid signature and the placeholders are refused.
    """
    signature, rest = split_signed_path(full_path)
    if not (allow_unsigned and signature in UNSIGNED_SEGMENTS):
        signer.verify(signature, rest)
    return rest
