"""Two gunicorn servers sharing one result cache and Redis render a hot key once.

Real parts: two gunicorn servers (gthread) on 127.0.0.1 over the same media
and result cache, as two machines behind a load balancer; redis-server on a
Unix socket; Django's RedisCache for the leases. Source reads are counted
across processes by a storage that logs every open to a file, and made slow
(1 s) so the second server asks while the first still holds the lease.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests import images
from tests.servers import fetch, gunicorn, imgproxy_url
from tests.services import redis_server

HOT = "/rs:fit:800:800/plain/big.jpg@jpg"
REQUESTS = 24


def hammer(bases: list[str]) -> list[tuple[int, bytes, str]]:
    """REQUESTS concurrent requests for HOT, alternating between the servers."""
    results: list[tuple[int, bytes, str]] = []

    def get(base: str) -> None:
        response = fetch(imgproxy_url(base, HOT))
        results.append((response.status, response.body, response.headers["x-worker-pid"]))

    threads = [
        threading.Thread(target=get, args=(bases[index % len(bases)],)) for index in range(REQUESTS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


@pytest.mark.parametrize(("coordinated", "reads"), [(True, 1), (False, 2)])
def test_two_servers_render_a_hot_key_once_with_redis(
    tmp_path: Path, coordinated: bool, reads: int
) -> None:
    """With Redis leases one read; without (the control), each server reads once."""
    media = tmp_path / "media"
    media.mkdir()
    (media / "big.jpg").write_bytes(images.jpeg(1600, 1200))
    read_log = tmp_path / "reads.log"
    read_log.touch()

    with ExitStack() as stack:
        redis_url = stack.enter_context(redis_server(tmp_path))
        env = {
            "OXIMG_E2E_REDIS_URL": redis_url,
            "OXIMG_E2E_READ_LOG": str(read_log),
            "OXIMG_E2E_READ_DELAY": "1.0",
        }
        oximg = {"COORDINATION_CACHE": "coordination"} if coordinated else {}
        servers = [
            stack.enter_context(
                gunicorn(media, workers=1, threads=16, oximg=oximg, env=env, log_name=f"g{n}.log")
            )
            for n in range(2)
        ]
        results = hammer([server.base for server in servers])

    assert [status for status, _, _ in results] == [200] * REQUESTS
    assert len({body for _, body, _ in results}) == 1
    assert len({pid for _, _, pid in results}) == 2
    lines = read_log.read_text().splitlines()
    assert len(lines) == reads, lines
