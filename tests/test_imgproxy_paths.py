"""imgproxy's own request-path tests (``handlers/path_test.go``), ported.

imgproxy splits the request URI into the signature and the path after it,
then repairs the path (``redenormalizePath``) before the signature is
checked. Here the same steps are :func:`raw_request_path`,
:func:`path_after_prefix` and :func:`split_signed_path` (which repairs with
:func:`restored_path`). imgproxy's expected paths have no leading ``/``;
ours keep it, as the signature covers it.
"""

from __future__ import annotations

import pytest

from django_oximg.core.errors import InvalidSignature
from django_oximg.core.options.signing import restored_path, split_signed_path
from django_oximg.core.serving.middleware import path_after_prefix, raw_request_path

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free


def split_request(request_uri: str, prefix: str = "") -> tuple[str, str]:
    """(signature, path) from a raw request URI, as the WSGI middleware gets them."""
    raw = raw_request_path({"RAW_URI": request_uri})
    return split_signed_path(path_after_prefix(raw, prefix) if prefix else raw)


@pytest.mark.parametrize(
    ("prefix", "request_uri", "expected_path", "expected_signature"),
    [
        pytest.param(
            "",
            "/dummy_signature/rs:fill:300:200/plain/http://example.com/image.jpg",
            "rs:fill:300:200/plain/http://example.com/image.jpg",
            "dummy_signature",
            id="BasicPath",
        ),
        pytest.param(
            "",
            "/dummy_signature/rs:fill:300:200/plain/http://example.com/image.jpg"
            "?param1=value1&param2=value2",
            "rs:fill:300:200/plain/http://example.com/image.jpg",
            "dummy_signature",
            id="PathWithQueryParams",
        ),
        pytest.param(
            "/imgproxy",
            "/imgproxy/dummy_signature/rs:fill:300:200/plain/http://example.com/image.jpg",
            "rs:fill:300:200/plain/http://example.com/image.jpg",
            "dummy_signature",
            id="PathWithPrefix",
        ),
        pytest.param(
            "",
            "/dummy_signature/rs:fill:300:200/plain/https:/example.com/path/to/image.jpg",
            "rs:fill:300:200/plain/https://example.com/path/to/image.jpg",
            "dummy_signature",
            id="PathWithRedenormalization",
        ),
    ],
)
def test_parse_path(
    prefix: str, request_uri: str, expected_path: str, expected_signature: str
) -> None:
    # TestParsePath
    assert split_request(request_uri, prefix) == (expected_signature, "/" + expected_path)


@pytest.mark.parametrize(
    "request_uri",
    [
        pytest.param("/invalid_path_without_slash", id="NoSignatureSeparator"),
        pytest.param("/", id="EmptyPath"),
        pytest.param("/signature_only", id="OnlySignature"),
    ],
)
def test_parse_path_error(request_uri: str) -> None:
    # TestParsePath, its error cases. imgproxy answers these 404 (a path error);
    # here a path without a signature segment is a 403 (docs/urls.md, differences).
    with pytest.raises(InvalidSignature):
        split_request(request_uri)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param(
            "/plain/http:/example.com/image.jpg", "/plain/http://example.com/image.jpg", id="HTTP"
        ),
        pytest.param(
            "/plain/https:/example.com/image.jpg",
            "/plain/https://example.com/image.jpg",
            id="HTTPS",
        ),
        pytest.param("/plain/local:/image.jpg", "/plain/local:///image.jpg", id="Local"),
        pytest.param(
            "/plain/http://example.com/image.jpg",
            "/plain/http://example.com/image.jpg",
            id="NormalizedPath",
        ),
        pytest.param(
            "/rs:fill:300:200/plain/example.com/image.jpg",
            "/rs:fill:300:200/plain/example.com/image.jpg",
            id="ProtocolMissing",
        ),
        pytest.param("", "", id="EmptyString"),
        pytest.param("/", "/", id="SingleSlash"),
        pytest.param(
            "/http:/example.com/image.jpg", "/http:/example.com/image.jpg", id="NoPlainPrefix"
        ),
        pytest.param(
            "/plain/example.com/image.jpg", "/plain/example.com/image.jpg", id="NoProtocol"
        ),
        pytest.param("/plain/http:", "/plain/http:", id="EndsWithProtocol"),
        pytest.param("/plain/http:/test", "/plain/http://test", id="OnlyProtocol"),
    ],
)
def test_redenormalize_path_http_protocol(path: str, expected: str) -> None:
    # TestRedenormalizePathHTTPProtocol
    assert restored_path(path) == expected
