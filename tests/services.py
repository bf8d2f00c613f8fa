"""System services the tests start themselves (redis-server from Debian), and what else they need.

When a service's program is missing the test is skipped with the reason,
except under ``OXIMG_REQUIRE_SERVICES=1`` (set by .ci/run, which installs
them), where it fails: CI must never pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest

#: Bound on waiting for a service to accept connections.
STARTUP_TIMEOUT = 20.0


def require_program(name: str) -> str:
    """The program's path; skip (or fail in CI) when it is not installed."""
    found = shutil.which(name)
    if found:
        return found
    missing(f"{name} is not installed (Debian package: apt-get install {name})")


def missing(message: str) -> NoReturn:
    """Skip the test for something it needs and does not have; in CI, fail it."""
    if os.environ.get("OXIMG_REQUIRE_SERVICES") == "1":
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """A private redis-server on a Unix socket only (no TCP port); yields its URL."""
    program = require_program("redis-server")
    socket_path = directory / "redis.sock"
    process = subprocess.Popen(
        [
            program,
            "--port",
            "0",
            "--unixsocket",
            str(socket_path),
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not socket_path.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)
        yield f"unix://{socket_path}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
