"""Source and result limits: every one answers 422 (or clamps) and caches nothing.

Through the core thumbnailer, with the fixtures of tests/test_thumbnailer.py.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from django_oximg.core.pipeline import RenderSettings
from django_oximg.core.serving.handler import Thumbnailer
from tests import images
from tests.test_thumbnailer import (  # noqa: F401 (fixtures: the counting stores)
    CONTROL,
    cache,
    cached_files,
    decode,
    get,
    header,
    sources,
)

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free


def png_header_only(width: int, height: int) -> bytes:
    """A tiny PNG whose IHDR claims ``width`` x ``height`` (a pixel flood, bad input 28)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 16)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def assert_422_nothing_cached(reply_status: int, thumbnailer: Thumbnailer, cache_dir: Path) -> None:
    assert reply_status == 422
    assert thumbnailer.renders == 0
    assert cached_files(cache_dir) == []


def test_a_pixel_flood_png_is_refused_from_its_header(
    make: Callable[..., Thumbnailer], source_dir: Path, cache_dir: Path
) -> None:
    data = png_header_only(65535, 65535)
    assert len(data) < 100
    (source_dir / "flood.png").write_bytes(data)
    thumbnailer = make()
    reply = get(thumbnailer, "/rs:fit:100:100/plain/flood.png@jpeg")
    assert reply.body == b"Source image is too large\n"
    assert_422_nothing_cached(reply.status, thumbnailer, cache_dir)
    assert get(thumbnailer, CONTROL).status == 200


def test_resolution_counts_every_rendered_frame(
    make: Callable[..., Thumbnailer], source_dir: Path, cache_dir: Path
) -> None:
    (source_dir / "anim.gif").write_bytes(images.animated_gif(120, 90, frames=6))
    # 6 frames of 120x90 = 64,800 px: too many animated, fine as one frame.
    thumbnailer = make(max_src_resolution=50_000)
    animated = get(thumbnailer, "/rs:fit:60:60/plain/anim.gif@webp")
    assert_422_nothing_cached(animated.status, thumbnailer, cache_dir)
    still = get(thumbnailer, "/rs:fit:60:60/plain/anim.gif@jpeg")
    assert still.status == 200


@pytest.mark.parametrize(("limit", "frames_out"), [(3, 1), (6, 6)])
def test_animations_over_the_frame_limit_keep_only_the_first_frame(
    make: Callable[..., Thumbnailer], source_dir: Path, limit: int, frames_out: int
) -> None:
    (source_dir / "anim.gif").write_bytes(images.animated_gif(120, 90, frames=6))
    thumbnailer = make(render=RenderSettings(max_animation_frames=limit))
    reply = get(thumbnailer, "/rs:fit:60:60/plain/anim.gif@webp")
    assert reply.status == 200
    image = decode(reply.body)
    pages = image.get("n-pages") if image.get_typeof("n-pages") else 1
    assert pages == frames_out


def test_results_are_clamped_to_the_largest_dimension(make: Callable[..., Thumbnailer]) -> None:
    thumbnailer = make(render=RenderSettings(max_result_dimension=300))
    reply = get(thumbnailer, "/rs:fit:5000:5000:1/plain/photos/landscape.jpg@jpeg")
    assert reply.status == 200
    image = decode(reply.body)
    assert max(image.width, image.height) == 300


def test_a_job_alone_above_the_memory_budget_gets_422(
    make: Callable[..., Thumbnailer], cache_dir: Path
) -> None:
    thumbnailer = make(workers=1, queue_size=4, budget=1024 * 1024)
    reply = get(thumbnailer, CONTROL)
    assert reply.status == 422
    assert reply.body == b"Source image is too large\n"
    assert cached_files(cache_dir) == []


def test_a_budget_between_two_estimates_admits_the_small_job_and_refuses_the_large(
    make: Callable[..., Thumbnailer], source_dir: Path, cache_dir: Path
) -> None:
    """The budget is compared with each job's own estimate, not with a constant."""
    from django_oximg.core import pipeline
    from django_oximg.core.options import parse_path
    from django_oximg.core.pipeline.budget import estimate_peak_bytes

    (source_dir / "small.jpg").write_bytes(images.jpeg(320, 240))
    (source_dir / "large.png").write_bytes(bytes(images.photo(3000, 2000).pngsave_buffer()))
    requests = {
        "small": "/rs:fit:200:200/plain/small.jpg@jpeg",
        "large": "/rs:fit:2500:2500/plain/large.png@png",
    }
    estimates = {}
    for name, path in requests.items():
        data = (source_dir / path.split("/plain/")[1].split("@")[0]).read_bytes()
        info = pipeline.probe(data)
        plan = pipeline.plan_render(
            info, parse_path(path).options, path.rsplit("@", 1)[1], RenderSettings()
        )
        estimates[name] = estimate_peak_bytes(plan, 1, data)
    assert estimates["small"] * 4 < estimates["large"]
    budget = int((estimates["small"] * estimates["large"]) ** 0.5)
    thumbnailer = make(workers=1, queue_size=4, budget=budget)
    assert get(thumbnailer, requests["small"]).status == 200
    large = get(thumbnailer, requests["large"])
    assert (large.status, large.body) == (422, b"Source image is too large\n")
    assert len(cached_files(cache_dir)) == 1


def test_a_render_past_its_deadline_gets_503_and_frees_its_slot(
    make: Callable[..., Thumbnailer], source_dir: Path, cache_dir: Path
) -> None:
    (source_dir / "big.jpg").write_bytes(images.jpeg(3000, 2000))
    thumbnailer = make(workers=1, render_timeout=1e-6)
    reply = get(thumbnailer, "/rs:fit:2000:2000/bl:5/plain/big.jpg@png")
    assert reply.status == 503
    assert header(reply, "Retry-After") is not None
    assert header(reply, "Cache-Control") == "no-store"
    assert cached_files(cache_dir) == []
    assert thumbnailer.executor.stats().running == 0
    assert thumbnailer.executor.stats().reserved_bytes == 0


def test_fifty_identical_concurrent_misses_render_once(make: Callable[..., Thumbnailer]) -> None:
    thumbnailer = make()
    statuses: list[int] = []
    bodies: list[bytes] = []
    barrier = threading.Barrier(50)

    def fetch() -> None:
        barrier.wait()
        reply = get(thumbnailer, "/rs:fill:150:150/plain/photos/landscape.jpg@webp")
        statuses.append(reply.status)
        bodies.append(reply.body)

    threads = [threading.Thread(target=fetch) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert statuses == [200] * 50
    assert len(set(bodies)) == 1
    assert thumbnailer.renders == 1
    assert thumbnailer.source_loads == 1
