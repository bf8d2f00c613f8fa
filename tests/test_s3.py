"""S3 through django-storages against a real S3-compatible server on 127.0.0.1.

The server is moto's standalone server in a process of its own
(tests/s3_server.py), behind a small WSGI layer that logs every request it
receives (so tests count GETs and PUTs as the server saw them, across
processes too) and can answer object PUTs with a 500 (an S3 outage). boto3
talks to it over real HTTP, through ``S3Storage`` and the adapters in
``django_oximg/storage.py``.
"""

from __future__ import annotations

import socket
import threading
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from django.core.cache import cache
from django.test import Client
from storages.backends.s3 import S3Storage

from django_oximg import runtime, storage
from django_oximg.core.errors import SourceNotFound, SourceTimeout, SourceUnavailable
from django_oximg.thumbnails import get_info_url, get_thumbnail
from tests import images
from tests.constants import JOIN_TIMEOUT
from tests.s3_server import CREDENTIALS, S3Server, client_config, s3_server  # noqa: F401 (fixture)
from tests.servers import fetch as http_fetch
from tests.servers import gunicorn, imgproxy_url
from tests.services import redis_server
from tests.test_views import decode, fetch, signed

#: Two gunicorn servers sharing the S3 cache: the subject is the processes and the bucket
#: between them. The S3 storage runs on both Djangos in the tests above, and the Redis
#: leases through gunicorn in test_redis_coordination.py.
two_servers = pytest.mark.one_django(
    reason="the subject is two gunicorn processes sharing one bucket, not Django"
)

CONTROL = "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg"

#: One attempt per request (no retries, so an injected 500 fails at once),
#: short timeouts so a dead endpoint fails the test quickly.
CLIENT_CONFIG = client_config()


def s3_storage(server: S3Server, bucket: str, **options: Any) -> dict[str, Any]:
    """A ``STORAGES`` entry for django-storages' S3Storage on the test server."""
    return {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": bucket,
            "endpoint_url": server.endpoint,
            "client_config": CLIENT_CONFIG,
            **CREDENTIALS,
            **options,
        },
    }


@dataclass
class Buckets:
    source: str
    cache: str


@pytest.fixture
def buckets(s3_server: S3Server) -> Buckets:
    """A source bucket holding photos/landscape.jpg, and an empty cache bucket."""
    found = Buckets(s3_server.new_bucket(), s3_server.new_bucket())
    s3_server.client().put_object(
        Bucket=found.source, Key="photos/landscape.jpg", Body=images.jpeg(640, 480)
    )
    return found


def use_storages(settings: Any, media: Path, **extra: dict[str, Any]) -> None:
    """STORAGES: the media fixture's local default plus ``extra`` aliases."""
    settings.STORAGES = {**settings.STORAGES, **extra}


@pytest.fixture
def s3_cache(settings: Any, media: Path, s3_server: S3Server, buckets: Buckets) -> Buckets:
    """Sources on local disk (the media fixture), results in the S3 cache bucket."""
    use_storages(settings, media, s3cache=s3_storage(s3_server, buckets.cache))
    settings.OXIMG = {**settings.OXIMG, "CACHE_STORAGE": "s3cache"}
    return buckets


@pytest.fixture
def all_s3(settings: Any, media: Path, s3_server: S3Server, buckets: Buckets) -> Buckets:
    """Default source and result cache both on S3."""
    use_storages(
        settings,
        media,
        default=s3_storage(s3_server, buckets.source),
        s3cache=s3_storage(s3_server, buckets.cache),
    )
    settings.OXIMG = {**settings.OXIMG, "CACHE_STORAGE": "s3cache"}
    return buckets


@pytest.fixture
def client() -> Client:
    return Client()


# -- where sources and results live ------------------------------------------------------


def test_source_on_s3_with_the_cache_on_local_disk(
    settings: Any, media: Path, s3_server: S3Server, buckets: Buckets, client: Client
) -> None:
    use_storages(settings, media, default=s3_storage(s3_server, buckets.source))
    miss = fetch(client, signed(CONTROL))
    hit = fetch(client, signed(CONTROL))
    assert miss.status == hit.status == 200
    assert decode(miss.body).width == 200
    assert hit.body == miss.body
    assert "last-modified" in hit.headers  # from the local file (a miss has none)
    assert [p.suffix for p in (media / "oximg").rglob("*") if p.is_file()] == [".jpeg"]
    assert s3_server.count("GET", buckets.source) == 1
    assert s3_server.count("HEAD", buckets.source) == 0  # the size comes with the GET


def test_source_on_local_disk_with_the_cache_on_s3(
    s3_cache: Buckets, s3_server: S3Server, client: Client, settings: Any
) -> None:
    miss = fetch(client, signed(CONTROL))
    assert miss.status == 200
    assert s3_server.count("PUT", s3_cache.cache) == 1
    [key] = s3_server.keys(s3_cache.cache)
    assert key.endswith(".jpeg")
    stored = s3_server.client().get_object(Bucket=s3_cache.cache, Key=key)
    with stored["Body"] as body:
        assert body.read() == miss.body
    assert stored["ContentType"] == "image/jpeg"
    assert stored["CacheControl"] == "public, max-age=31536000, immutable"


@pytest.mark.parametrize(("accept", "fmt"), [("image/webp,*/*", "webp"), ("*/*", "jpeg")])
def test_a_best_answer_is_stored_with_the_type_of_its_bytes(
    s3_cache: Buckets, s3_server: S3Server, client: Client, accept: str, fmt: str
) -> None:
    miss = fetch(client, signed(CONTROL.replace("@jpeg", "@best")), HTTP_ACCEPT=accept)
    hit = fetch(client, signed(CONTROL.replace("@jpeg", "@best")), HTTP_ACCEPT=accept)
    assert miss.status == hit.status == 200
    assert miss.headers["content-type"] == hit.headers["content-type"] == f"image/{fmt}"
    assert hit.body == miss.body
    [key] = s3_server.keys(s3_cache.cache)
    assert key.endswith(".best")
    assert s3_server.client().head_object(Bucket=s3_cache.cache, Key=key)["ContentType"] == (
        f"image/{fmt}"
    )


def test_both_on_s3_nothing_is_downloaded_or_uploaded_twice(
    all_s3: Buckets, s3_server: S3Server, client: Client
) -> None:
    """A miss: one source GET, one cache lookup, one PutObject; a hit: one GET, no PUT."""
    miss = fetch(client, signed(CONTROL))
    assert miss.status == 200
    assert s3_server.count("GET", all_s3.source) == 1
    assert s3_server.count("PUT", all_s3.cache) == 1
    # The thumbnailer looks twice on a miss; the second look costs no request.
    assert s3_server.count("GET", all_s3.cache) == 1
    hit = fetch(client, signed(CONTROL))
    assert hit.status == 200
    assert hit.body == miss.body
    assert s3_server.count("GET", all_s3.source) == 1
    assert s3_server.count("PUT", all_s3.cache) == 1
    assert s3_server.count("GET", all_s3.cache) == 2
    assert s3_server.count("HEAD", all_s3.cache) == 0


def test_a_named_source_alias_reads_from_its_own_s3_storage(
    settings: Any, media: Path, s3_server: S3Server, buckets: Buckets, client: Client
) -> None:
    s3_server.client().put_object(
        Bucket=buckets.source, Key="path/x.jpg", Body=images.jpeg(300, 600)
    )
    use_storages(
        settings,
        media,
        s3photos=s3_storage(s3_server, buckets.source),
        s3cache=s3_storage(s3_server, buckets.cache),
    )
    settings.OXIMG = {
        **settings.OXIMG,
        "SOURCES": {"archive": "s3photos"},
        "CACHE_STORAGE": "s3cache",
    }
    answer = fetch(client, signed("/rs:fit:100:100/plain/archive:path/x.jpg@png"))
    assert answer.status == 200
    image = decode(answer.body)
    assert (image.width, image.height) == (50, 100)
    assert s3_server.count("GET", buckets.source) == 1
    # The default source (local disk) has no path/x.jpg: the alias really chose S3.
    assert fetch(client, signed("/rs:fit:100:100/plain/path/x.jpg@png")).status == 404


def test_the_tag_builds_a_url_for_a_named_s3_source(
    settings: Any, media: Path, s3_server: S3Server, buckets: Buckets, client: Client
) -> None:
    s3_server.client().put_object(
        Bucket=buckets.source, Key="path/x.jpg", Body=images.jpeg(300, 600)
    )
    use_storages(settings, media, s3photos=s3_storage(s3_server, buckets.source))
    settings.OXIMG = {**settings.OXIMG, "SOURCES": {"archive": "s3photos"}}
    thumbnail = get_thumbnail("archive:path/x.jpg", "100x100")
    assert (thumbnail.width, thumbnail.height) == (50, 100)
    answer = fetch(client, thumbnail.url)
    assert answer.status == 200
    assert (decode(answer.body).width, decode(answer.body).height) == (50, 100)


def test_the_tag_reads_a_large_photo_with_a_head_and_one_ranged_get(
    settings: Any, media: Path, s3_server: S3Server, buckets: Buckets
) -> None:
    """The size comes from the first kilobytes: the 8 MB body is never downloaded."""
    photo = images.jpeg(300, 600)
    large = photo + bytes(8 * 1024 * 1024)  # whatever follows the image: never read
    s3_server.client().put_object(Bucket=buckets.source, Key="big/x.jpg", Body=large)
    s3_server.client().put_object(Bucket=buckets.source, Key="big/empty.jpg", Body=b"")
    use_storages(settings, media, s3photos=s3_storage(s3_server, buckets.source))
    settings.OXIMG = {**settings.OXIMG, "SOURCES": {"archive": "s3photos"}}
    thumbnail = get_thumbnail("archive:big/x.jpg", "100x100")
    assert (thumbnail.width, thumbnail.height) == (50, 100)
    assert s3_server.count("HEAD", buckets.source) == 1
    assert s3_server.count("GET", buckets.source) == 1
    store = runtime.get_source_resolver().stores["archive"]
    assert isinstance(store, storage.S3SourceStore)
    assert store.read_header("big/x.jpg", 4096) == large[:4096]
    assert store.read_header("big/empty.jpg", 4096) == b""
    with pytest.raises(SourceNotFound):
        store.read_header("big/missing.jpg", 4096)


# -- source errors ---------------------------------------------------------------------------


def test_a_missing_key_is_a_404_and_nothing_is_stored(
    all_s3: Buckets, s3_server: S3Server, client: Client
) -> None:
    answer = fetch(client, signed("/rs:fit:200:200/plain/photos/nothing.jpg@jpeg"))
    assert answer.status == 404
    assert answer.headers["cache-control"] == "no-store"
    assert s3_server.keys(all_s3.cache) == []


def test_an_oversized_source_is_refused_from_its_content_length(
    all_s3: Buckets, s3_server: S3Server, client: Client, settings: Any
) -> None:
    settings.OXIMG = {**settings.OXIMG, "MAX_SRC_FILE_SIZE": 1000}
    answer = fetch(client, signed(CONTROL))
    assert answer.status == 422
    assert s3_server.count("GET", all_s3.source) == 1
    assert s3_server.count("HEAD", all_s3.source) == 0


def direct_storage(endpoint: str, bucket: str, **config: Any) -> S3Storage:
    options: dict[str, Any] = {
        "s3": {"addressing_style": "path"},
        "retries": {"total_max_attempts": 1, "mode": "standard"},
        "connect_timeout": 2,
        "read_timeout": 2,
        **config,
    }
    return S3Storage(
        bucket_name=bucket, endpoint_url=endpoint, client_config=Config(**options), **CREDENTIALS
    )


def test_source_errors_map_to_404_502_and_504(s3_server: S3Server, buckets: Buckets) -> None:
    """Missing key 404; missing bucket and refused connection 502; no answer 504."""
    store = storage.source_store(direct_storage(s3_server.endpoint, buckets.source))
    assert isinstance(store, storage.S3SourceStore)
    with pytest.raises(SourceNotFound):
        store.read("photos/nothing.jpg", 10**6)
    with pytest.raises(SourceNotFound):
        store.version("photos/nothing.jpg")
    no_bucket = storage.source_store(direct_storage(s3_server.endpoint, "oximg-no-such-bucket"))
    with pytest.raises(SourceUnavailable):
        no_bucket.read("photos/landscape.jpg", 10**6)

    # Bound but not listening: connections are refused, and no server started
    # beside this test can take the port while the request is made.
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{unused.getsockname()[1]}"
        refused = storage.source_store(direct_storage(endpoint, "b-b-b"))
        with pytest.raises(SourceUnavailable) as caught:
            refused.read("photos/landscape.jpg", 10**6)
    assert not isinstance(caught.value, SourceTimeout)

    with socket.socket() as silent:  # accepts (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        blackhole = storage.source_store(direct_storage(endpoint, "b-b-b", read_timeout=0.3))
        with pytest.raises(SourceTimeout):
            blackhole.read("photos/landscape.jpg", 10**6)


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every boto3 session made from now on (each loads botocore's models: MiBs)."""
    made: list[Any] = []

    class Counted(boto3.Session):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(boto3, "Session", Counted)
    return made


def test_every_thread_shares_one_boto3_client_per_store(
    s3_server: S3Server, buckets: Buckets, sessions: list[Any]
) -> None:
    """boto3 clients are thread-safe: one per store and process, not one per thread."""
    store = storage.source_store(direct_storage(s3_server.endpoint, buckets.source))
    assert isinstance(store, storage.S3SourceStore)
    clients: list[Any] = []
    versions: list[str] = []

    def use() -> None:
        clients.append(store.client())
        versions.append(store.version("photos/landscape.jpg"))

    threads = [threading.Thread(target=use) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert len(versions) == 16 and len(set(versions)) == 1
    assert len({id(client) for client in clients}) == 1
    assert len(sessions) == 1


def test_the_shared_client_bounds_each_call_whatever_the_storage_says(
    s3_server: S3Server,
) -> None:
    """botocore's defaults (60 s, several attempts) would let one call hold a request."""
    slow = direct_storage(s3_server.endpoint, "b-b-b", read_timeout=60, connect_timeout=60)
    cache = storage.cache_store(slow, timeout=3.0)
    source = storage.source_store(slow, timeout=6.0)
    assert isinstance(cache, storage.S3CacheStore) and isinstance(source, storage.S3SourceStore)
    cache_config = cache.client().meta.config
    assert (cache_config.connect_timeout, cache_config.read_timeout) == (1.0, 2.0)
    assert cache_config.retries["total_max_attempts"] == 1
    source_config = source.client().meta.config
    assert (source_config.connect_timeout, source_config.read_timeout) == (1.0, 2.0)
    assert source_config.retries["total_max_attempts"] == 2
    assert source_config.s3 == {"addressing_style": "path"}  # the storage's own options kept


def test_concurrent_hits_on_s3_make_one_client_per_store(
    all_s3: Buckets, sessions: list[Any]
) -> None:
    """64 threads hitting the S3 cache: memory independent of the thread count."""
    thumbnailer = runtime.get_thumbnailer()
    path = runtime.get_signer().signed_path(CONTROL)
    assert thumbnailer.reply(path, "GET", {}).status == 200  # the miss: a read, a PutObject
    statuses: list[int] = []

    def hit() -> None:
        reply = thumbnailer.reply(path, "GET", {})
        assert reply.file is not None  # streamed from S3
        with reply.file:
            assert reply.file.read()
        statuses.append(reply.status)

    threads = [threading.Thread(target=hit) for _ in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert statuses == [200] * 64
    assert len(sessions) == 2  # the source store's and the cache store's


def test_concurrent_requests_for_different_sizes_all_succeed(
    all_s3: Buckets, s3_server: S3Server
) -> None:
    """Pool threads and request threads share one S3Storage per alias."""
    thumbnailer = runtime.get_thumbnailer()
    statuses: list[int] = []

    def request(width: int) -> None:
        reply = thumbnailer.reply(
            runtime.get_signer().signed_path(
                f"/rs:fit:{width}:{width}/plain/photos/landscape.jpg@jpeg"
            ),
            "GET",
            {},
        )
        if reply.file is not None:
            reply.file.close()
        statuses.append(reply.status)

    threads = [threading.Thread(target=request, args=(100 + n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert statuses == [200] * 8
    assert s3_server.count("PUT", all_s3.cache) == 8


# -- versions for the tag -------------------------------------------------------------------


def same_length(a: bytes, b: bytes) -> tuple[bytes, bytes]:
    """Pad the shorter JPEG after its end marker (decoders ignore trailing bytes)."""
    size = max(len(a), len(b))
    return a.ljust(size, b"\0"), b.ljust(size, b"\0")


def test_the_tag_url_changes_when_the_s3_object_is_replaced(
    settings: Any, media: Path, s3_server: S3Server, buckets: Buckets
) -> None:
    """The version is the ETag: a same-size replacement in the same second still counts."""
    use_storages(settings, media, default=s3_storage(s3_server, buckets.source))
    first, second = same_length(images.jpeg(640, 480), images.jpeg(480, 640))
    s3 = s3_server.client()
    s3.put_object(Bucket=buckets.source, Key="photos/v.jpg", Body=first)
    before = get_thumbnail("photos/v.jpg", "100x100")
    s3.put_object(Bucket=buckets.source, Key="photos/v.jpg", Body=second)
    assert get_thumbnail("photos/v.jpg", "100x100").url == before.url  # metadata cached
    cache.clear()  # what the timeout (or a purge hook) does
    after = get_thumbnail("photos/v.jpg", "100x100")
    assert after.url != before.url
    assert (before.width, before.height, after.width, after.height) == (100, 75, 75, 100)


# -- cache hits: streamed or redirected ------------------------------------------------------


def test_a_hit_streams_identical_bytes_and_honours_head_and_if_none_match(
    s3_cache: Buckets, s3_server: S3Server, client: Client
) -> None:
    miss = fetch(client, signed(CONTROL))
    hit = fetch(client, signed(CONTROL))
    assert hit.status == 200
    assert hit.streamed  # sent as it is read from S3, not buffered first
    assert hit.body == miss.body
    assert hit.headers["etag"] == miss.headers["etag"]
    assert hit.headers["content-length"] == str(len(miss.body))
    assert hit.headers["content-type"] == "image/jpeg"
    head = fetch(client, signed(CONTROL), method="head")
    assert (head.status, head.body) == (200, b"")
    assert head.headers["content-length"] == str(len(miss.body))
    again = fetch(client, signed(CONTROL), HTTP_IF_NONE_MATCH=miss.headers["etag"])
    assert (again.status, again.body) == (304, b"")
    assert s3_server.count("PUT", s3_cache.cache) == 1


#: CONTROL with its quality searched.
SEARCHED = "/rs:fit:200:200/aq:size:5000:40:90/plain/photos/landscape.jpg@jpeg"


def test_the_searched_quality_is_stored_beside_the_result_and_sent_on_hits(
    s3_cache: Buckets, s3_server: S3Server, client: Client
) -> None:
    miss = fetch(client, signed(SEARCHED))
    quality = miss.headers["x-oximg-quality"]
    assert 40 <= int(quality) <= 90
    keys = s3_server.keys(s3_cache.cache)
    [result] = [key for key in keys if key.endswith(".jpeg")]
    assert sorted(keys) == sorted([result, result + ".quality"])
    hit = fetch(client, signed(SEARCHED))
    assert (hit.status, hit.body) == (200, miss.body)
    assert hit.streamed
    assert hit.headers["x-oximg-quality"] == quality
    # The miss's lookup; the hit's, and its sidecar's.
    assert s3_server.count("GET", s3_cache.cache) == 3
    assert s3_server.count("PUT", s3_cache.cache) == 2  # the sidecar, then the result
    plain = [fetch(client, signed(CONTROL)) for _ in range(2)]
    assert all("x-oximg-quality" not in reply.headers for reply in plain)
    assert s3_server.count("GET", s3_cache.cache) == 5  # one lookup each


def test_a_redirected_hit_reads_no_quality_sidecar(
    s3_cache: Buckets, s3_server: S3Server, client: Client, settings: Any
) -> None:
    settings.OXIMG = {**settings.OXIMG, "CACHE_REDIRECT": True}
    miss = fetch(client, signed(SEARCHED))
    assert "x-oximg-quality" in miss.headers
    hit = fetch(client, signed(SEARCHED))
    assert hit.status == 302 and "x-oximg-quality" not in hit.headers
    assert s3_server.count("HEAD", s3_cache.cache) == 2  # the miss's lookup and the hit's
    assert s3_server.count("GET", s3_cache.cache) == 0


def test_cache_redirect_answers_302_to_the_object(
    s3_cache: Buckets, s3_server: S3Server, client: Client, settings: Any
) -> None:
    settings.OXIMG = {**settings.OXIMG, "CACHE_REDIRECT": True}
    miss = fetch(client, signed(CONTROL))
    assert miss.status == 200
    hit = fetch(client, signed(CONTROL))
    assert hit.status == 302
    assert hit.headers["cache-control"] == "no-store"
    [key] = s3_server.keys(s3_cache.cache)
    location = hit.headers["location"]
    assert location.startswith(f"{s3_server.endpoint}/{s3_cache.cache}/{key}?")
    with urllib.request.urlopen(location, timeout=30) as response:
        assert response.read() == miss.body
        assert response.headers["Content-Type"] == "image/jpeg"
        assert response.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    # Lookups are HEADs (the miss's and the hit's); the only GET is the client's.
    assert s3_server.count("HEAD", s3_cache.cache) == 2
    assert s3_server.count("GET", s3_cache.cache) == 1
    assert s3_server.count("PUT", s3_cache.cache) == 1


def test_an_info_document_is_stored_and_redirected_to_as_json(
    s3_cache: Buckets, s3_server: S3Server, client: Client, settings: Any
) -> None:
    settings.OXIMG = {**settings.OXIMG, "CACHE_REDIRECT": True}
    url = get_info_url("photos/landscape.jpg")
    miss = fetch(client, url)
    assert miss.status == 200
    assert miss.headers["content-type"] == "application/json"
    [key] = s3_server.keys(s3_cache.cache)
    assert key.endswith(".json")
    hit = fetch(client, url)
    assert hit.status == 302
    with urllib.request.urlopen(hit.headers["location"], timeout=30) as response:
        assert response.read() == miss.body
        assert response.headers["Content-Type"] == "application/json"


def test_a_failing_putobject_still_answers_from_memory_and_caches_nothing(
    s3_cache: Buckets, s3_server: S3Server, client: Client
) -> None:
    """Bad input 48 (docs/security.md) with S3: PutObject answers 500."""
    with s3_server.failing_puts():
        first = fetch(client, signed(CONTROL))
        second = fetch(client, signed(CONTROL))
        health = fetch(client, "/img/health", raw=False)
    assert first.status == second.status == 200
    assert first.body == second.body
    assert decode(first.body).width == 200
    assert s3_server.keys(s3_cache.cache) == []
    assert s3_server.count("PUT", s3_cache.cache) == 2  # tried once per render, no retry
    assert runtime.get_thumbnailer().renders == 2
    assert health.status == 503
    third = fetch(client, signed(CONTROL))  # S3 is back: this render is stored
    assert third.status == 200
    assert len(s3_server.keys(s3_cache.cache)) == 1


# -- two gunicorn servers sharing the S3 cache and Redis ------------------------------------

HOT = "/rs:fit:800:800/plain/big.jpg@jpg"
REQUESTS = 24


def hammer(bases: list[str]) -> list[tuple[int, bytes]]:
    """REQUESTS concurrent requests for HOT, alternating between the servers."""
    results: list[tuple[int, bytes]] = []

    def get(base: str) -> None:
        response = http_fetch(imgproxy_url(base, HOT))
        results.append((response.status, response.body))

    threads = [
        threading.Thread(target=get, args=(bases[index % len(bases)],)) for index in range(REQUESTS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


@two_servers
@pytest.mark.parametrize(("coordinated", "renders"), [(True, 1), (False, 2)])
def test_two_servers_sharing_an_s3_cache_and_redis_render_a_hot_key_once(
    tmp_path: Path, s3_server: S3Server, coordinated: bool, renders: int
) -> None:
    """One PutObject and one source read across both servers with Redis leases.

    Without leases (the control), each server renders once. Sources are on
    local disk, read slowly (1 s) so the second server asks while the first
    still renders; every render ends in one PutObject to the shared bucket.
    """
    media = tmp_path / "media"
    media.mkdir()
    (media / "big.jpg").write_bytes(images.jpeg(1600, 1200))
    read_log = tmp_path / "reads.log"
    read_log.touch()
    bucket = s3_server.new_bucket()

    with ExitStack() as stack:
        env = {
            "OXIMG_E2E_REDIS_URL": stack.enter_context(redis_server(tmp_path)),
            "OXIMG_E2E_READ_LOG": str(read_log),
            "OXIMG_E2E_READ_DELAY": "1.0",
            "OXIMG_E2E_S3_ENDPOINT": s3_server.endpoint,
            "OXIMG_E2E_S3_BUCKET": bucket,
        }
        oximg = {"CACHE_STORAGE": "s3cache"}
        if coordinated:
            oximg["COORDINATION_CACHE"] = "coordination"
        servers = [
            stack.enter_context(
                gunicorn(media, workers=1, threads=16, oximg=oximg, env=env, log_name=f"g{n}.log")
            )
            for n in range(2)
        ]
        results = hammer([server.base for server in servers])
        hit = http_fetch(imgproxy_url(servers[1].base, HOT))

    assert [status for status, _ in results] == [200] * REQUESTS
    assert len({body for _, body in results}) == 1
    assert (hit.status, hit.body) == (200, results[0][1])
    assert len(read_log.read_text().splitlines()) == renders
    assert s3_server.count("PUT", bucket) == renders
    assert len(s3_server.keys(bucket)) == 1
    assert not (media / "oximg").exists()  # the local disk holds no results
