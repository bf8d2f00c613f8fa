"""docs/deployment.md's nginx block, run as it stands in front of two gunicorn nodes.

The block is read out of the page (the fenced ``nginx`` block with the
``upstream``), its two example node addresses replaced with two real
gunicorn nodes on 127.0.0.1, its cache directory with a private one and its
``listen`` with a free port: nothing else of it is changed, so a block that
stops working breaks this test. What the page promises of it:

* a second request for a URL is a cache hit;
* a query string is neither passed on (a thumbnail URL with one is a 404)
  nor part of the cache key;
* a node killed with ``kill -9`` costs nothing but the other node's work;
* errors are not cached.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests import images
from tests.constants import JOIN_TIMEOUT
from tests.servers import REPO_ROOT, Server, gunicorn, imgproxy_signature, request
from tests.services import nginx_server

pytestmark = pytest.mark.one_django(
    reason=(
        "the subject is docs/deployment.md's nginx block in front of two gunicorn nodes, not "
        "Django: the app's Django side runs on both Djangos in process (test_wsgi.py, "
        "test_views.py)"
    )
)

#: The example node addresses in the block, in order.
EXAMPLE_NODES = ("10.0.0.11:8000", "10.0.0.12:8000")


def documented_block() -> str:
    text = (REPO_ROOT / "docs" / "deployment.md").read_text()
    blocks = re.findall(r"```nginx\n(.*?)```", text, flags=re.DOTALL)
    (block,) = [block for block in blocks if "upstream oximg" in block]
    return block


def runnable(block: str, nodes: list[Server]) -> str:
    for example, node in zip(EXAMPLE_NODES, nodes, strict=True):
        assert example in block
        block = block.replace(example, node.base.removeprefix("http://"))
    for documented, ours in (
        ("/var/cache/nginx/oximg", "{dir}/cache"),
        ("listen 80;", "listen {listen};"),
    ):
        assert block.count(documented) == 1, documented
        block = block.replace(documented, ours)
    return block


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Server]]]:
    media = tmp_path_factory.mktemp("deployment")
    with ExitStack() as stack:
        nodes = []
        for name in ("one", "two"):
            root = media / name
            (root / "photos").mkdir(parents=True)
            for number in range(4):
                (root / "photos" / f"p{number}.jpg").write_bytes(images.jpeg(400 + number, 300))
            nodes.append(
                stack.enter_context(gunicorn(root, workers=1, threads=8, log_name=f"{name}.log"))
            )
        base = stack.enter_context(
            nginx_server(runnable(documented_block(), nodes), media / "nginx")
        )
        yield base, nodes


def url(base: str, number: int, width: int = 100) -> str:
    path = f"/rs:fit:{width}:{width}/plain/photos/p{number}.jpg@jpg"
    return f"{base}/img/{imgproxy_signature(path)}{path}"


def test_a_second_request_is_a_hit_and_a_query_string_changes_nothing(
    front: tuple[str, list[Server]],
) -> None:
    base, _nodes = front
    first = request(url(base, 0))
    assert (first.status, first.headers["x-cache-status"]) == (200, "MISS")
    again = request(url(base, 0))
    assert (again.status, again.headers["x-cache-status"]) == (200, "HIT")
    junk = request(url(base, 0) + "?v=2&utm_source=x")
    assert (junk.status, junk.headers["x-cache-status"]) == (200, "HIT")
    assert first.body == again.body == junk.body
    # A new URL with a query string: passed on without it (else it would be a 404).
    fresh = request(url(base, 1) + "?cachebuster=1")
    assert (fresh.status, fresh.headers["x-cache-status"]) == (200, "MISS")


def test_errors_are_not_cached(front: tuple[str, list[Server]]) -> None:
    base, _nodes = front
    bad = f"{base}/img/{'A' * 43}/rs:fit:10:10/plain/photos/p0.jpg@jpg"
    for _ in range(2):
        answer = request(bad)
        assert answer.status == 403
        assert answer.headers["x-cache-status"] == "MISS"


def test_a_node_killed_mid_traffic_costs_only_the_other_nodes_work(
    front: tuple[str, list[Server]],
) -> None:
    base, nodes = front
    victim = nodes[0]
    for pid in victim.worker_pids():
        os.kill(pid, signal.SIGKILL)
    os.kill(victim.process.pid, signal.SIGKILL)
    victim.process.wait(JOIN_TIMEOUT)
    answers = [request(url(base, number % 4, 120 + number)) for number in range(8)]
    assert [answer.status for answer in answers] == [200] * 8
    assert {answer.headers["x-cache-status"] for answer in answers} == {"MISS"}
    workers = {answer.headers["x-worker-pid"] for answer in answers}
    assert workers == {str(pid) for pid in nodes[1].worker_pids()}
    # nginx did try the dead node, and took it out of rotation.
    log = Path(nodes[1].media.parent / "nginx" / "error.log").read_text()
    assert f'upstream: "{victim.base}/img/' in log
    assert "upstream server temporarily disabled" in log
