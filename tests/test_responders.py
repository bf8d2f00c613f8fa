"""Tests for django_oximg.core.serving.replies: status table, headers, ETag, 304, Range."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from django_oximg.core import errors
from django_oximg.core.serving.replies import (
    ERROR_STATUS,
    Reply,
    Result,
    cache_control,
    content_disposition,
    error_reply,
    etag_matches,
    method_not_allowed,
    not_found,
    result_reply,
    status_for,
)

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

CACHE_CONTROL = "public, max-age=31536000, immutable"
ETAG = '"0123456789abcdef"'
DATA = bytes(range(256)) * 8

#: Every concrete error and its status (docs/security.md, docs/urls.md).
EXPECTED_STATUS = {
    errors.InvalidOptions: 400,
    errors.InvalidSignature: 403,
    errors.SourceNotFound: 404,
    errors.ExpiredURL: 404,
    errors.UnsupportedFormat: 415,
    errors.InvalidImage: 422,
    errors.SourceTooLarge: 422,
    errors.ResultTooLarge: 422,
    errors.Overloaded: 429,
    errors.SourceUnavailable: 502,
    errors.ProcessingTimeout: 503,
    errors.SourceTimeout: 504,
}


def all_error_classes() -> list[type[errors.OximgError]]:
    """Every subclass of OximgError, so a new one without a status is caught."""
    found: list[type[errors.OximgError]] = []
    pending = list(errors.OximgError.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return [cls for cls in found if cls.__module__ == errors.__name__]


def header(reply: Reply, name: str) -> str | None:
    found = [value for key, value in reply.headers if key.lower() == name.lower()]
    assert len(found) <= 1, f"{name} sent {len(found)} times"
    return found[0] if found else None


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda cls: cls.__name__)
def test_every_error_class_has_its_documented_status(cls: type[errors.OximgError]) -> None:
    assert status_for(cls("detail")) == EXPECTED_STATUS[cls]


def test_every_status_in_the_table_is_an_error() -> None:
    assert all(400 <= status < 600 for status in ERROR_STATUS.values())


def test_an_unlisted_subclass_gets_its_parents_status() -> None:
    class Corrupt(errors.InvalidImage):
        pass

    assert status_for(Corrupt()) == 422


def test_the_base_class_has_no_status() -> None:
    with pytest.raises(TypeError):
        status_for(errors.OximgError("?"))


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda cls: cls.__name__)
def test_error_replies_are_short_plain_text_and_never_stored(
    cls: type[errors.OximgError],
) -> None:
    reply = error_reply(cls(detail="/srv/media/secret/path.jpg: libvips said no"))
    assert reply.status == EXPECTED_STATUS[cls]
    assert header(reply, "Cache-Control") == "no-store"
    assert header(reply, "Content-Type") == "text/plain; charset=utf-8"
    assert header(reply, "Content-Length") == str(len(reply.body))
    assert reply.body == cls.public.encode() + b"\n"
    assert len(reply.body) < 100
    assert b"secret" not in reply.body  # details are for logs only
    assert reply.file is None


def test_a_public_message_given_by_the_raiser_is_the_body() -> None:
    reply = error_reply(errors.InvalidOptions(detail="w: 'abc'", public="Invalid width: abc"))
    assert reply.body == b"Invalid width: abc\n"


@pytest.mark.parametrize(
    ("error", "retry_after"),
    [
        (errors.Overloaded(), "1"),
        (errors.ProcessingTimeout(), "2"),
        (errors.SourceTimeout(), "2"),  # a stalled storage recovers; a retry then renders
        (errors.SourceUnavailable(), None),
        (errors.InvalidImage(), None),
    ],
)
def test_retryable_rejections_say_when_to_retry(
    error: errors.OximgError, retry_after: str | None
) -> None:
    assert header(error_reply(error), "Retry-After") == retry_after


def test_an_error_answer_to_head_has_the_length_but_no_body() -> None:
    get = error_reply(errors.SourceNotFound(), "GET")
    head = error_reply(errors.SourceNotFound(), "HEAD")
    assert head.body == b""
    assert head.headers == get.headers


def test_method_not_allowed() -> None:
    reply = method_not_allowed()
    assert reply.status == 405
    assert reply.status_line == "405 Method Not Allowed"
    assert header(reply, "Allow") == "GET, HEAD"
    assert header(reply, "Cache-Control") == "no-store"


# -- Content-Disposition ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "filename", "fmt", "attachment", "expected"),
    [
        # A backslash would escape the next character of the quoted string (RFC 9110).
        ("a.jpg", "back\\slash", "png", False, 'inline; filename="back%5Cslash.png"'),
        ("a.jpg", "\\", "jpeg", True, 'attachment; filename="%5C.jpg"'),
        # Outside printable ASCII: "_" in filename, percent-encoded UTF-8 in filename*.
        (
            "a.jpg",
            "café",
            "png",
            False,
            "inline; filename=\"caf_.png\"; filename*=UTF-8''caf%C3%A9.png",
        ),
        (
            "a.jpg",
            "写真",
            "webp",
            True,
            "attachment; filename=\"__.webp\"; filename*=UTF-8''%E5%86%99%E7%9C%9F.webp",
        ),
        # One "_" per character, however many UTF-8 bytes it takes.
        (
            "a.jpg",
            "\U0001f600",
            "gif",
            False,
            "inline; filename=\"_.gif\"; filename*=UTF-8''%F0%9F%98%80.gif",
        ),
        # The source's own name is treated the same way.
        (
            "photos/Ölbild.jpg",
            "",
            "jpeg",
            False,
            "inline; filename=\"_lbild.jpg\"; filename*=UTF-8''%C3%96lbild.jpg",
        ),
        # All at once; filename* keeps RFC 5987's attr-char as it is and encodes the rest.
        (
            "a.jpg",
            'a\\b é"',
            "png",
            False,
            "inline; filename=\"a%5Cb _%22.png\"; filename*=UTF-8''a%5Cb%20%C3%A9%22.png",
        ),
        (
            "a.jpg",
            "é!#$&+-^_`|~ '*%;",
            "png",
            False,
            'inline; filename="_!#$&+-^_`|~ \'*%;.png"; '
            "filename*=UTF-8''%C3%A9!#$&+-^_`|~%20%27%2A%25%3B.png",
        ),
    ],
)
def test_content_disposition_escapes_backslashes_and_encodes_non_ascii(
    source: str, filename: str, fmt: str, attachment: bool, expected: str
) -> None:
    assert content_disposition(source, filename, fmt, attachment=attachment) == expected


# -- ETag matching ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("if_none_match", "matches"),
    [
        (ETAG, True),
        (f"W/{ETAG}", True),
        (f'"other", {ETAG}', True),
        ("*", True),
        (" * ", True),
        ("", False),
        ('"other"', False),
        (ETAG[:-2] + '"', False),
        ("0123456789abcdef", False),
    ],
)
def test_if_none_match_uses_weak_comparison(if_none_match: str, matches: bool) -> None:
    assert etag_matches(if_none_match, ETAG) is matches


# -- results in memory -----------------------------------------------------------------


def memory_result(negotiated: bool = False) -> Result:
    vary = ("Accept",) if negotiated else ()
    return Result("image/webp", ETAG, vary, data=DATA, size=len(DATA))


def test_a_result_in_memory_gets_200_with_all_headers() -> None:
    reply = result_reply(memory_result(), "GET", {}, CACHE_CONTROL)
    assert reply.status == 200
    assert reply.body == DATA
    assert dict(reply.headers) == {
        "Content-Type": "image/webp",
        "Cache-Control": CACHE_CONTROL,
        "ETag": ETAG,
        "Content-Length": str(len(DATA)),
        "X-Content-Type-Options": "nosniff",
    }


def test_vary_accept_is_sent_only_for_negotiated_results() -> None:
    negotiated = result_reply(memory_result(negotiated=True), "GET", {}, CACHE_CONTROL)
    assert header(negotiated, "Vary") == "Accept"
    fixed = result_reply(memory_result(negotiated=False), "GET", {}, CACHE_CONTROL)
    assert header(fixed, "Vary") is None


def test_a_result_in_memory_gets_304_for_its_etag() -> None:
    reply = result_reply(
        memory_result(negotiated=True), "GET", {"HTTP_IF_NONE_MATCH": ETAG}, CACHE_CONTROL
    )
    assert reply.status == 304
    assert reply.body == b""
    assert header(reply, "ETag") == ETAG
    assert header(reply, "Cache-Control") == CACHE_CONTROL
    assert header(reply, "Vary") == "Accept"
    assert header(reply, "Content-Type") is None


def test_head_of_a_result_in_memory_has_its_length_and_no_body() -> None:
    reply = result_reply(memory_result(), "HEAD", {}, CACHE_CONTROL)
    assert reply.status == 200
    assert reply.body == b""
    assert header(reply, "Content-Length") == str(len(DATA))


# -- results on disk (whitenoise) ------------------------------------------------------


@pytest.fixture
def file_result(tmp_path: Path) -> Result:
    path = tmp_path / "result.webp"
    path.write_bytes(DATA)
    return Result("image/webp", ETAG, ("Accept",), path=str(path), size=len(DATA))


@pytest.fixture
def replies() -> Iterator[list[Reply]]:
    """Replies made by a test; their files are closed afterwards."""
    made: list[Reply] = []
    yield made
    for reply in made:
        if reply.file is not None:
            reply.file.close()


def test_a_result_on_disk_is_handed_out_as_an_open_file(
    file_result: Result, replies: list[Reply]
) -> None:
    reply = result_reply(file_result, "GET", {}, CACHE_CONTROL)
    replies.append(reply)
    assert reply.status == 200
    assert reply.file is not None
    assert reply.file.read() == DATA
    assert header(reply, "Content-Length") == str(len(DATA))
    assert header(reply, "ETag") == ETAG  # ours, not whitenoise's mtime-based one
    assert header(reply, "Cache-Control") == CACHE_CONTROL
    assert header(reply, "Content-Type") == "image/webp"
    assert header(reply, "Vary") == "Accept"


def test_a_result_on_disk_gets_304_for_its_etag_without_opening_it(
    file_result: Result,
) -> None:
    reply = result_reply(file_result, "GET", {"HTTP_IF_NONE_MATCH": ETAG}, CACHE_CONTROL)
    assert reply.status == 304
    assert reply.file is None
    assert header(reply, "ETag") == ETAG
    assert header(reply, "Vary") == "Accept"  # a CDN revalidating keeps its variants apart
    assert header(reply, "X-Content-Type-Options") == "nosniff"


def test_a_range_of_a_result_on_disk_gets_206(file_result: Result, replies: list[Reply]) -> None:
    reply = result_reply(file_result, "GET", {"HTTP_RANGE": "bytes=10-19"}, CACHE_CONTROL)
    replies.append(reply)
    assert reply.status == 206
    assert header(reply, "Content-Range") == f"bytes 10-19/{len(DATA)}"
    assert header(reply, "Content-Length") == "10"
    assert reply.file is not None
    assert reply.file.read(10) == DATA[10:20]


def test_an_unsatisfiable_range_gets_416(file_result: Result, replies: list[Reply]) -> None:
    reply = result_reply(file_result, "GET", {"HTTP_RANGE": "bytes=99999-"}, CACHE_CONTROL)
    replies.append(reply)
    assert reply.status == 416
    # An error like any other: stored by no one, never sniffed.
    assert header(reply, "Cache-Control") == "no-store"
    assert [name for name, _ in reply.headers].count("Cache-Control") == 1
    assert header(reply, "X-Content-Type-Options") == "nosniff"


def test_head_of_a_result_on_disk_opens_nothing(file_result: Result) -> None:
    reply = result_reply(file_result, "HEAD", {}, CACHE_CONTROL)
    assert reply.status == 200
    assert reply.file is None
    assert header(reply, "Content-Length") == str(len(DATA))


# -- Cache-Control of expiring URLs -------------------------------------------------------


NOW = 1_700_000_000.0


def test_a_url_without_expiry_keeps_the_configured_cache_control() -> None:
    assert cache_control(CACHE_CONTROL, 0, NOW) == CACHE_CONTROL


@pytest.mark.parametrize("left", [0, 1, 59, 3600, 31536000])
def test_an_expiring_url_is_kept_no_longer_than_it_has_left(left: int) -> None:
    value = cache_control("public, max-age=31536000, immutable", int(NOW) + left, NOW)
    assert value == f"public, max-age={left}"


def test_every_lifetime_directive_is_capped_and_one_is_added_when_missing() -> None:
    expires = int(NOW) + 100
    assert cache_control("public, max-age=50, s-maxage=31536000", expires, NOW) == (
        "public, max-age=50, s-maxage=100"
    )
    assert cache_control("public, immutable", expires, NOW) == "public, max-age=100"
    assert cache_control("no-store", expires, NOW) == "no-store"


def test_a_url_past_its_expiry_gets_max_age_zero() -> None:
    assert cache_control(CACHE_CONTROL, int(NOW) - 5, NOW).endswith("max-age=0")


# -- every reply ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        Reply(200, [("Content-Type", "image/webp")], b"x"),
        Reply(404),
        method_not_allowed(),
        not_found(),
        error_reply(errors.InvalidOptions("bad")),
    ],
)
def test_every_reply_carries_nosniff_once(reply: Reply) -> None:
    names = [name.lower() for name, _ in reply.headers]
    assert names.count("x-content-type-options") == 1
    assert header(reply, "X-Content-Type-Options") == "nosniff"
