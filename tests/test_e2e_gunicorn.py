"""End to end over real HTTP: gunicorn (gthread, 2 workers) on 127.0.0.1.

Serves tests/e2e_app.py (Django wrapped in ``OximgMiddleware``) from a media
root made here, and fetches thumbnails with urllib. URLs are signed by the
independent imgproxy-style signer in tests/servers.py, so the server is
checked against the published scheme, not against itself.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import pyvips

from tests import images
from tests.servers import (
    HTTP_TIMEOUT,
    Fetched,
    Server,
    fetch,
    gunicorn,
    imgproxy_signature,
    imgproxy_url,
)

pytestmark = pytest.mark.one_django(
    reason=(
        "the subject is gunicorn's worker processes serving the app over real HTTP, not "
        "Django: the app's Django side runs on both Djangos in process (test_wsgi.py, "
        "test_views.py)"
    )
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """gunicorn (2 processes x 4 threads) serving tests.e2e_app from a media root made here."""
    media = tmp_path_factory.mktemp("e2e") / "media"
    (media / "photos").mkdir(parents=True)
    (media / "photos" / "landscape.jpg").write_bytes(images.jpeg(640, 480))
    (media / "photos" / "alpha.png").write_bytes(images.png_with_alpha())
    noise = images.noise(700, 500).jpegsave_buffer(Q=98)
    (media / "photos" / "noise.jpg").write_bytes(bytes(noise))
    with gunicorn(media, workers=2, threads=4) as running:
        yield running


def decode(body: bytes) -> pyvips.Image:
    return pyvips.Image.new_from_buffer(body, "")


def cache_files(media: Path) -> list[Path]:
    root = media / "oximg"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_a_jpeg_thumbnail_is_served_then_cached_with_a_stable_etag(server: Server) -> None:
    url = imgproxy_url(server.base, "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg")
    first = fetch(url)
    assert first.status == 200
    assert first.headers["content-type"] == "image/jpeg"
    image = decode(first.body)
    assert (image.width, image.height) == (200, 150)
    assert image.get("vips-loader").startswith("jpegload")

    second = fetch(url)
    assert second.status == 200
    assert second.body == first.body
    assert second.headers["etag"] == first.headers["etag"]
    assert second.headers["cache-control"] == "public, max-age=31536000, immutable"

    not_modified = fetch(url, **{"If-None-Match": first.headers["etag"]})
    assert not_modified.status == 304
    assert not_modified.body == b""


@pytest.mark.parametrize("quality", [90, 100])
def test_detail_too_dense_for_pillows_buffer_is_served(server: Server, quality: int) -> None:
    """Such a JPEG outgrows Pillow's buffer (tests/test_encoder.py); libvips writes it."""
    pids = server.worker_pids()
    path = f"/rs:fit:500:500/q:{quality}/plain/photos/noise.jpg@jpeg"
    answer = fetch(imgproxy_url(server.base, path))
    assert answer.status == 200, answer.body
    assert (decode(answer.body).width, decode(answer.body).height) == (500, 357)
    assert len(answer.body) > 500 * 357  # more than one byte a pixel: Pillow had no room
    assert server.worker_pids() == pids


def test_independent_signer_urls_give_the_requested_images(server: Server) -> None:
    webp = fetch(imgproxy_url(server.base, "/rs:fill:120:80/g:ce/plain/photos/landscape.jpg@webp"))
    assert webp.status == 200
    assert webp.headers["content-type"] == "image/webp"
    assert (decode(webp.body).width, decode(webp.body).height) == (120, 80)

    encoded = base64.urlsafe_b64encode(b"photos/alpha.png").rstrip(b"=").decode()
    png = fetch(imgproxy_url(server.base, f"/rs:fit:100:100/{encoded}.png"))
    assert png.status == 200
    image = decode(png.body)
    assert (image.width, image.height) == (100, 75)
    assert image.hasalpha()


def test_an_encoded_slash_is_one_cache_object_over_real_http(server: Server) -> None:
    """gunicorn passes RAW_URI: ``%2F`` verifies and maps to the same result."""
    plain = fetch(imgproxy_url(server.base, "/rs:fit:90:90/plain/photos/landscape.jpg@jpeg"))
    encoded = fetch(imgproxy_url(server.base, "/rs:fit:90:90/plain/photos%2Flandscape.jpg@jpeg"))
    assert plain.status == encoded.status == 200
    assert encoded.headers["etag"] == plain.headers["etag"]
    assert encoded.body == plain.body


def test_head_gets_the_length_and_no_body(server: Server) -> None:
    url = imgproxy_url(server.base, "/rs:fit:64:64/plain/photos/landscape.jpg@jpeg")
    get = fetch(url)
    head = fetch(url, method="HEAD")
    assert head.status == 200
    assert head.body == b""
    assert head.headers["content-length"] == str(len(get.body))


def test_a_range_of_a_cached_result_is_sent_as_206(server: Server) -> None:
    """Cached results go out through gunicorn's file wrapper (sendfile), slices too."""
    url = imgproxy_url(server.base, "/rs:fit:180:180/plain/photos/landscape.jpg@jpeg")
    full = fetch(url).body
    fetch(url)  # make sure both workers could have it from disk
    partial = fetch(url, Range="bytes=50-149")
    assert partial.status == 206
    assert partial.headers["content-range"] == f"bytes 50-149/{len(full)}"
    assert partial.body == full[50:150]
    tail = fetch(url, Range="bytes=-20")
    assert tail.status == 206
    assert tail.body == full[-20:]


@pytest.mark.parametrize(
    ("path", "signature", "status"),
    [
        ("/rs:fit:200:200/plain/photos/landscape.jpg@jpeg", "A" * 43, 403),
        ("/rs:fit:200:200/plain/photos/missing.jpg@jpeg", None, 404),
        ("/rs:fit:200:200/plain/%2e%2e/%2e%2e/etc/passwd@jpeg", None, 404),
        ("/rs:fit:200:200/nope:1/plain/photos/landscape.jpg@jpeg", None, 400),
    ],
)
def test_errors_over_real_http_are_not_stored(
    server: Server, path: str, signature: str | None, status: int
) -> None:
    signature = signature or imgproxy_signature(path)
    answer = fetch(f"{server.base}/img/{signature}{path}")
    assert answer.status == status
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["content-type"].startswith("text/plain")


def test_concurrent_identical_requests_all_get_the_same_bytes(server: Server) -> None:
    url = imgproxy_url(server.base, "/rs:fit:150:150/q:70/plain/photos/landscape.jpg@webp")
    answers: list[Fetched] = []
    lock = threading.Lock()

    def request() -> None:
        answer = fetch(url)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=request) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HTTP_TIMEOUT)
    assert [answer.status for answer in answers] == [200] * 12
    assert len({answer.body for answer in answers}) == 1
    assert len({answer.headers["etag"] for answer in answers}) == 1


def test_the_cache_holds_whole_files_only(server: Server) -> None:
    fetch(imgproxy_url(server.base, "/rs:fit:50:50/plain/photos/landscape.jpg@jpeg"))
    files = cache_files(server.media)
    assert files
    assert not [p for p in files if p.name.startswith("tmp-")]
    for path in files:
        assert decode(path.read_bytes()).width > 0


def test_other_paths_reach_django(server: Server) -> None:
    answer = fetch(server.base + "/not-a-thumbnail/")
    assert answer.status == 404
    assert answer.headers["content-type"].startswith("text/html")


def test_one_image_has_one_url_over_real_http(server: Server) -> None:
    """Other spellings of a signed URL would be other CDN entries: they are 404s."""
    url = imgproxy_url(server.base, "/rs:fit:90:90/plain/photos/landscape.jpg@jpeg")
    assert fetch(url).status == 200
    for other in (url + "?v=2", url + "?", url.replace("/img/", "/im%67/", 1)):
        answer = fetch(other)
        assert answer.status == 404, other
        assert answer.headers["cache-control"] == "no-store"
        assert answer.headers["x-content-type-options"] == "nosniff"


def test_every_answer_says_nosniff_over_real_http(server: Server) -> None:
    url = imgproxy_url(server.base, "/rs:fit:80:80/plain/photos/landscape.jpg@jpeg")
    answers = [
        fetch(url),  # miss
        fetch(url),  # hit, through sendfile
        fetch(url, **{"If-None-Match": fetch(url).headers["etag"]}),  # 304
        fetch(url, Range="bytes=999999-"),  # 416
        fetch(imgproxy_url(server.base, "/q:500/plain/photos/landscape.jpg@jpeg")),  # 400
        fetch(server.base + "/img/health"),
    ]
    assert [a.status for a in answers] == [200, 200, 304, 416, 400, 200]
    for answer in answers:
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert answers[3].headers["cache-control"] == "no-store"


def test_an_expiring_url_is_never_immutable_over_real_http(server: Server) -> None:
    expires = int(time.time()) + 3600
    url = imgproxy_url(server.base, f"/exp:{expires}/rs:fit:70:70/plain/photos/landscape.jpg@jpeg")
    answer = fetch(url)
    assert answer.status == 200
    directives = [d.strip() for d in answer.headers["cache-control"].split(",")]
    assert "immutable" not in directives
    [max_age] = [int(d.split("=")[1]) for d in directives if d.startswith("max-age=")]
    assert expires - int(time.time()) - 1 <= max_age <= 3600
