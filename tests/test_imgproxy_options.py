"""imgproxy's own option-parsing tests, ported.

Sources: ``options/parser/processing_options_test.go`` and
``options/parser/presets_test.go`` (imgproxy v4), with the v3 forms
(``options/processing_options_test.go``, ``options/presets_test.go``) where
they test something v4 does not. Each case names the imgproxy test function
it comes from; expected values are imgproxy's.

Also here: ``clientfeatures/detector_test.go`` (which client hints count)
and ``httpheaders/cdv_test.go`` (the ``Content-Disposition`` value).

Not ported, because they test settings django-oximg does not have:
``Base64URLIncludesFilename``, ``BaseURL``, ``URLReplacements``,
``ArgumentsSeparator``, ``EnforceWebp``/``EnforceAvif``/``EnforceJxl`` and
JPEG XL detection (6 + 3 + 3 cases), and the three preset tests of
imgproxy's ``name=value`` string form (``PRESETS`` is a dict here).
imgproxy's ``UsedPresets`` bookkeeping is not exposed; its preset cases are
checked through the options they set.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pyvips
from django.core.exceptions import ImproperlyConfigured

from django_oximg.conf import build_settings
from django_oximg.core.errors import ExpiredURL, InvalidOptions
from django_oximg.core.options import (
    Crop,
    Gravity,
    Options,
    URLRules,
    Watermark,
    parse_path,
)
from django_oximg.core.serving.client_hints import ClientHints, read_hints
from django_oximg.core.serving.handler import Thumbnailer
from django_oximg.core.serving.replies import content_disposition
from django_oximg.core.serving.staging import RenderWork
from django_oximg.core.stores.disk import FileSystemSourceStore
from django_oximg.core.stores.http import URL_ALIAS, HttpSourceConfig, HttpSourceStore
from tests import images
from tests.constants import KEY, MIB, SALT, SIGNER

#: The source every imgproxy option test names.
ORIGIN_URL = "http://images.dev/lorem/ipsum.jpg"
#: The same with a query, as imgproxy's base64 and escaping tests use it.
ORIGIN_URL_WITH_QUERY = ORIGIN_URL + "?param=value"


def parse(options: str, presets: dict[str, str] | None = None) -> Options:
    """``options`` applied to imgproxy's test source, as a URL would carry them."""
    return parse_path(f"/{options}/plain/{ORIGIN_URL}", presets).options


# -- the source URL: base64 and plain (TestParseBase64URL*, TestParsePlainURL*) -------


def test_parse_base64_url() -> None:
    # TestParseBase64URL
    encoded = base64.urlsafe_b64encode(ORIGIN_URL_WITH_QUERY.encode()).decode().rstrip("=")
    parsed = parse_path(f"/size:100:100/{encoded}.png")
    assert parsed.source == ORIGIN_URL_WITH_QUERY
    assert parsed.options.format == "png"


def test_parse_base64_url_without_extension() -> None:
    # TestParseBase64URLWithoutExtension
    encoded = base64.urlsafe_b64encode(ORIGIN_URL_WITH_QUERY.encode()).decode().rstrip("=")
    parsed = parse_path(f"/size:100:100/{encoded}")
    assert parsed.source == ORIGIN_URL_WITH_QUERY
    assert parsed.options.format == ""


def test_parse_plain_url() -> None:
    # TestParsePlainURL
    parsed = parse_path(f"/size:100:100/plain/{ORIGIN_URL}@png")
    assert parsed.source == ORIGIN_URL
    assert parsed.options.format == "png"


def test_parse_plain_url_without_extension() -> None:
    # TestParsePlainURLWithoutExtension
    parsed = parse_path(f"/size:100:100/plain/{ORIGIN_URL}")
    assert parsed.source == ORIGIN_URL
    assert parsed.options.format == ""


def test_parse_plain_url_escaped() -> None:
    # TestParsePlainURLEscaped: Go's url.PathEscape keeps only unreserved and :@&=+$.
    escaped = quote(ORIGIN_URL_WITH_QUERY, safe=":@&=+$")
    parsed = parse_path(f"/size:100:100/plain/{escaped}@png")
    assert parsed.source == ORIGIN_URL_WITH_QUERY
    assert parsed.options.format == "png"


# -- one option at a time (TestParsePath*) ------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # TestParsePathFormat
        ("format:webp", Options(format="webp")),
        # TestParsePathResize
        (
            "resize:fill:100:200:1",
            Options(resizing_type="fill", width=100, height=200, enlarge=True),
        ),
        # TestParsePathResizingType
        ("resizing_type:fill", Options(resizing_type="fill")),
        # TestParsePathSize
        ("size:100:200:1", Options(width=100, height=200, enlarge=True)),
        # TestParsePathWidth
        ("width:100", Options(width=100)),
        # TestParsePathHeight
        ("height:100", Options(height=100)),
        # TestParsePathEnlarge
        ("enlarge:1", Options(enlarge=True)),
        # TestParsePathExtend
        ("extend:1:so:10:20", Options(extend=True, extend_gravity=Gravity("so", 10, 20))),
        # TestParsePathGravity
        ("gravity:soea", Options(gravity=Gravity("soea"))),
        # TestParsePathGravityFocusPoint
        ("gravity:fp:0.5:0.75", Options(gravity=Gravity("fp", 0.5, 0.75))),
        # TestParsePathCrop: no crop gravity means the request's gravity.
        ("crop:100:200", Options(crop=Crop(100, 200))),
        # TestParsePathCropGravity
        ("crop:100:200:nowe:10:20", Options(crop=Crop(100, 200, Gravity("nowe", 10, 20)))),
        # TestParsePathQuality
        ("quality:55", Options(quality=55)),
        # TestParsePathBackground
        ("background:128:129:130", Options(background=(128, 129, 130))),
        # TestParsePathBackgroundHex
        ("background:ffddee", Options(background=(0xFF, 0xDD, 0xEE))),
        # TestParsePathBackgroundDisable
        ("background:fff/background:", Options(background=None)),
        # TestParsePathBlur
        ("blur:0.2", Options(blur=0.2)),
        # TestParsePathSharpen
        ("sharpen:0.2", Options(sharpen=0.2)),
        # TestParsePathDpr
        ("dpr:2", Options(dpr=2.0)),
        # TestParsePathCachebuster
        ("cachebuster:123", Options(cachebuster="123")),
        # TestParsePathStripMetadata
        ("strip_metadata:true", Options(strip_metadata=True)),
        # TestParseExpires (a date in 3000)
        ("exp:32503669200", Options(expires=32503669200)),
        # TestParsePathWatermark
        (
            "watermark:0.5:soea:10:20:0.6",
            Options(watermark=Watermark(0.5, "soea", 10.0, 20.0, 0.6)),
        ),
        # TestParseSkipProcessing
        ("skp:jpg:png", Options(skip_processing=("jpeg", "png"))),
    ],
)
def test_parse_path_option(options: str, expected: Options) -> None:
    assert parse(options) == expected


@pytest.mark.parametrize(
    "options",
    [
        "extend:1:sm",  # TestParsePathExtendSmartGravity
        "extend:1:re",  # TestParsePathExtendReplicateGravity
        "gravity:re",  # TestParsePathGravityReplicate
        "crop:100:200:re",  # TestParsePathCropGravityReplicate
    ],
)
def test_parse_path_refuses(options: str) -> None:
    with pytest.raises(InvalidOptions):
        parse(options)


# -- presets (TestParsePathPreset*, presets_test.go) ---------------------------------


def test_parse_path_preset() -> None:
    # TestParsePathPreset
    presets = {"test1": "resizing_type:fill", "test2": "blur:0.2/quality:50"}
    assert parse("preset:test1:test2", presets) == Options(
        resizing_type="fill", blur=0.2, quality=50
    )


def test_parse_path_preset_default() -> None:
    # TestParsePathPresetDefault: the default preset first, the URL's options after it.
    presets = {"default": "resizing_type:fill/blur:0.2/quality:50"}
    assert parse("quality:70", presets) == Options(resizing_type="fill", blur=0.2, quality=70)


def test_parse_path_preset_loop_detection() -> None:
    # TestParsePathPresetLoopDetection (v4): presets naming each other apply once each.
    presets = {"test1": "resizing_type:fill/preset:test2", "test2": "blur:0.2/preset:test1"}
    assert parse("preset:test1", presets) == Options(resizing_type="fill", blur=0.2)


def test_parse_path_preset_named_twice() -> None:
    # TestParsePathPresetLoopDetection (v3): "preset:test1:test2:test1" is no error.
    presets = {"test1": "resizing_type:fill", "test2": "blur:0.2/quality:50"}
    assert parse("preset:test1:test2:test1", presets) == Options(
        resizing_type="fill", blur=0.2, quality=50
    )


def settings_with_presets(presets: dict[str, str]) -> Any:
    return build_settings({"KEY": KEY, "SALT": SALT, "PRESETS": presets})


@pytest.mark.parametrize(
    "presets",
    [
        {"test": "resize:fit:100:200/sharpen:2"},  # TestParsePreset
        {"test": "resize:fit:100:200/sharpen:2"},  # TestValidatePresets
    ],
)
def test_valid_preset_is_kept_and_applies(presets: dict[str, str]) -> None:
    # TestParsePreset, TestValidatePresets
    assert dict(settings_with_presets(presets).PRESETS) == presets
    assert parse("pr:test", presets) == Options(width=100, height=200, sharpen=2.0)


@pytest.mark.parametrize(
    "presets",
    [
        {"": "resize:fit:100:200/sharpen:2"},  # TestParsePresetEmptyName
        {"test": ""},  # TestParsePresetEmptyValue
        {"test": "resize:fit:100:200/sharpen:2/blur"},  # TestParsePresetInvalidValue
        {"test": "resize:fit:-1:-2/sharpen:2"},  # TestValidatePresetsInvalid
    ],
)
def test_invalid_preset_is_refused_at_start_up(presets: dict[str, str]) -> None:
    with pytest.raises(ImproperlyConfigured):
        settings_with_presets(presets)


# -- the request: expiry and format detection ---------------------------------------


@pytest.fixture
def thumbnailers(make: Callable[..., Thumbnailer], tmp_path: Path) -> Callable[..., Thumbnailer]:
    """Thumbnailers over a source directory holding a 640x480 ``photo.jpg``."""
    (tmp_path / "photo.jpg").write_bytes(images.jpeg(640, 480))

    def build(**config: Any) -> Thumbnailer:
        # URL sources are checked against an allowlist, never fetched here.
        remote = HttpSourceStore(HttpSourceConfig(prefixes=(ORIGIN_URL.rsplit("/", 1)[0] + "/",)))
        stores = {"": FileSystemSourceStore(tmp_path), URL_ALIAS: remote}
        return make(workers=1, queue_size=4, budget=256 * MIB, stores=stores, **config)

    return build


def test_parse_expires_expired(thumbnailers: Callable[..., Thumbnailer]) -> None:
    # TestParseExpiresExpired: a timestamp in the past refuses the URL.
    assert time.time() > 1609448400
    with pytest.raises(ExpiredURL):
        thumbnailers().job_for(SIGNER.signed_path(f"/exp:1609448400/plain/{ORIGIN_URL}"), "")


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("image/webp", "webp"),  # TestParsePathWebpDetection
        ("image/avif", "avif"),  # TestParsePathAvifDetection
    ],
)
def test_parse_path_format_detection(
    thumbnailers: Callable[..., Thumbnailer], accept: str, expected: str
) -> None:
    job = thumbnailers().job_for(SIGNER.signed_path(f"/plain/{ORIGIN_URL}"), accept)
    assert isinstance(job.work, RenderWork)
    assert job.work.format == expected


def rendered_size(thumbnailer: Thumbnailer, path: str, **headers: str) -> tuple[int, int]:
    reply = thumbnailer.reply(SIGNER.signed_path(path), "GET", headers)
    assert reply.status == 200, reply.body
    image = pyvips.Image.new_from_buffer(reply.body, "")
    return image.width, image.height


@pytest.mark.parametrize(
    ("path", "headers", "expected"),
    [
        # TestParsePathClientHints/NoClientHints
        ("/plain/photo.jpg@png", {}, (640, 480)),
        # TestParsePathWidthHeaderDisabled, TestParsePathDprHeaderDisabled (v3):
        # without client hints switched on, Width and DPR change nothing.
        ("/plain/photo.jpg@png", {"HTTP_WIDTH": "100"}, (640, 480)),
        ("/w:100/plain/photo.jpg@png", {"HTTP_DPR": "2"}, (100, 75)),
    ],
)
def test_client_hints_ignored(
    thumbnailers: Callable[..., Thumbnailer],
    path: str,
    headers: dict[str, str],
    expected: tuple[int, int],
) -> None:
    assert rendered_size(thumbnailers(), path, **headers) == expected


def test_parse_skip_processing_invalid() -> None:
    # TestParseSkipProcessingInvalid: the error names the bad format.
    with pytest.raises(InvalidOptions) as caught:
        parse("skp:jpg:png:bad_format")
    assert "bad_format" in caught.value.public


@pytest.mark.parametrize(
    ("path", "headers", "expected"),
    [
        # TestParsePathClientHints/WidthOnly; TestParsePathWidthHeader (v3). imgproxy
        # gives 100 wide; here hints are rounded up to the width ladder's 112.
        ("/plain/photo.jpg@png", {"HTTP_WIDTH": "100"}, (112, 84)),
        # TestParsePathClientHints/DprOnly; TestParsePathDprHeader (v3)
        ("/w:100/plain/photo.jpg@png", {"HTTP_DPR": "2"}, (200, 150)),
        # TestParsePathClientHints/WidthAndDpr: Width is physical pixels (50 CSS
        # pixels, 56 on the ladder, at DPR 2; imgproxy: 100).
        ("/plain/photo.jpg@png", {"HTTP_WIDTH": "100", "HTTP_DPR": "2"}, (112, 84)),
        # TestParsePathWidthHeaderRedefine (v3)
        ("/width:150/plain/photo.jpg@png", {"HTTP_WIDTH": "100"}, (150, 113)),
        # TestParsePathClientHintsRedefine: the URL's width and dpr win over the hints.
        (
            "/width:150/dpr:3.0/plain/photo.jpg@png",
            {"HTTP_WIDTH": "100", "HTTP_DPR": "2"},
            (450, 338),
        ),
    ],
)
def test_client_hints(
    thumbnailers: Callable[..., Thumbnailer],
    path: str,
    headers: dict[str, str],
    expected: tuple[int, int],
) -> None:
    # imgproxy reads them with IMGPROXY_ENABLE_CLIENT_HINTS; here OXIMG["CLIENT_HINTS"].
    assert rendered_size(thumbnailers(client_hints=True), path, **headers) == expected


# -- which client hints count (clientfeatures/detector_test.go) ---------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        # TestFeaturesClientHintsDPR
        pytest.param({"HTTP_DPR": "1.5"}, ClientHints(dpr=1.5), id="ValidDPR"),
        pytest.param({"HTTP_SEC_CH_DPR": "2.0"}, ClientHints(dpr=2.0), id="ValidSecChDPR"),
        pytest.param(
            {"HTTP_DPR": "3.0", "HTTP_SEC_CH_DPR": "2.5"},
            ClientHints(dpr=2.5),
            id="ValidDprAndSecChDPR",
        ),
        pytest.param({"HTTP_DPR": "-1.0"}, ClientHints(), id="InvalidDPR_Negative"),
        pytest.param({"HTTP_DPR": "10.0"}, ClientHints(), id="InvalidDPR_TooHigh"),
        pytest.param({"HTTP_DPR": "abc"}, ClientHints(), id="InvalidDPR_NonNumeric"),
        # TestFeaturesClientHintsWidth
        pytest.param({"HTTP_WIDTH": "800"}, ClientHints(width=800), id="ValidWidth"),
        pytest.param({"HTTP_SEC_CH_WIDTH": "1024"}, ClientHints(width=1024), id="ValidSecChWidth"),
        pytest.param(
            {"HTTP_WIDTH": "1280", "HTTP_SEC_CH_WIDTH": "1440"},
            ClientHints(width=1440),
            id="ValidWidthAndSecChWidth",
        ),
        pytest.param({"HTTP_WIDTH": "-800"}, ClientHints(), id="InvalidWidth_Negative"),
        pytest.param({"HTTP_WIDTH": "abc"}, ClientHints(), id="InvalidWidth_NonNumeric"),
    ],
)
def test_client_hint_values(headers: dict[str, str], expected: ClientHints) -> None:
    assert read_hints(headers) == expected


@pytest.mark.parametrize(
    ("client_hints", "auto_format", "expected"),
    [
        # TestSetVary/AutoWebP_Enabled (and the other auto-format rows)
        (False, True, "Accept"),
        # TestSetVary/EnableClientHints_Enabled
        (True, False, "Sec-CH-DPR, DPR, Sec-CH-Width, Width"),
        # TestSetVary/Combined
        (True, True, "Accept, Sec-CH-DPR, DPR, Sec-CH-Width, Width"),
    ],
)
def test_vary(
    thumbnailers: Callable[..., Thumbnailer], client_hints: bool, auto_format: bool, expected: str
) -> None:
    # TestSetVary: imgproxy's Vary for a URL that names neither format, width nor dpr
    # (here a URL that sets them varies on fewer headers: test_client_hints.py).
    thumbnailer = thumbnailers(client_hints=client_hints, auto_format=auto_format)
    reply = thumbnailer.reply(SIGNER.signed_path("/plain/photo.jpg"), "GET", {})
    assert reply.status == 200
    assert dict(reply.headers)["Vary"] == expected


# -- ONLY_PRESETS and ALLOWED_PROCESSING_OPTIONS -----------------------------------------

ONLY_PRESETS = URLRules(only_presets=True)
TEST_PRESETS = {"test1": "blur:0.2", "test2": "quality:50"}


def test_parse_path_only_presets() -> None:
    # TestParsePathOnlyPresets
    parsed = parse_path(f"/test1:test2/plain/{ORIGIN_URL}@png", TEST_PRESETS, ONLY_PRESETS)
    assert parsed.options == Options(blur=0.2, quality=50, format="png")
    assert parsed.source == ORIGIN_URL


def test_parse_base64_url_only_presets() -> None:
    # TestParseBase64URLOnlyPresets
    encoded = base64.urlsafe_b64encode(ORIGIN_URL_WITH_QUERY.encode()).decode().rstrip("=")
    parsed = parse_path(f"/test1:test2/{encoded}.png", TEST_PRESETS, ONLY_PRESETS)
    assert parsed.options == Options(blur=0.2, quality=50, format="png")
    assert parsed.source == ORIGIN_URL_WITH_QUERY


@pytest.mark.parametrize(
    ("options", "forbidden"),
    [
        ("w:100/h:200", ""),
        ("w:100/h:200/blur:10", "blur"),
        ("w:100/h:200/pr:test1", ""),
        ("w:100/h:200/pr:test1/blur:10", "blur"),
    ],
)
def test_parse_allowed_options(options: str, forbidden: str) -> None:
    # TestParseAllowedOptions: a preset may use options the URL may not.
    rules = URLRules(allowed_options=frozenset({"w", "h", "pr"}))
    encoded = base64.urlsafe_b64encode(ORIGIN_URL_WITH_QUERY.encode()).decode().rstrip("=")
    path = f"/{options}/{encoded}.png"
    if not forbidden:
        parse_path(path, {"test1": "blur:0.2"}, rules)
        return
    with pytest.raises(InvalidOptions) as caught:
        parse_path(path, {"test1": "blur:0.2"}, rules)
    assert caught.value.public == f"Forbidden option: {forbidden}"


# -- Content-Disposition (httpheaders/cdv_test.go) ----------------------------------------


@pytest.mark.parametrize(
    ("source", "filename", "fmt", "attachment", "expected"),
    [
        pytest.param(
            "http://example.com/test.jpg",
            "",
            "jpeg",
            False,
            'inline; filename="test.jpg"',
            id="BasicURL",
        ),
        pytest.param(
            "http://example.com/path/to/",
            "",
            "",
            False,
            'inline; filename="image"',
            id="EmptyFilename",
        ),
        pytest.param(
            "http://example.com/path/to/",
            "",
            "png",
            False,
            'inline; filename="image.png"',
            id="EmptyFilenameWithExt",
        ),
        pytest.param(
            "http://example.com/path/to/",
            "example",
            "png",
            False,
            'inline; filename="example.png"',
            id="EmptyFilenameWithFilenameAndExt",
        ),
        pytest.param(
            "http://example.com/path/to/",
            "example",
            "jpeg",
            False,
            'inline; filename="example.jpg"',
            id="EmptyFilenameWithFilenameOverride",
        ),
        pytest.param(
            "http://example.com/path/to/face.png",
            "",
            "jpeg",
            False,
            'inline; filename="face.jpg"',
            id="PresentFilenameWithExtOverride",
        ),
        pytest.param(
            "http://example.com/path/to/123.png",
            "face",
            "jpeg",
            False,
            'inline; filename="face.jpg"',
            id="PresentFilenameWithFilenameOverride",
        ),
        pytest.param(
            "http://example.com/test.jpg",
            "",
            "jpeg",
            True,
            'attachment; filename="test.jpg"',
            id="AttachmentDisposition",
        ),
        pytest.param(
            "http://example.com/test.jpg",
            'my"file',
            "png",
            False,
            'inline; filename="my%22file.png"',
            id="FilenameWithQuotes",
        ),
    ],
)
def test_content_disposition_value(
    source: str, filename: str, fmt: str, attachment: bool, expected: str
) -> None:
    # TestContentDispositionValue. Not ported: EmptyFilenameWithFallback (the
    # same as EmptyFilenameWithExt here) and FilenameWithContentType (the
    # extension here always comes from the output format).
    assert content_disposition(source, filename, fmt, attachment=attachment) == expected
