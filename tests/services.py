"""System services the tests start themselves (redis-server and nginx from Debian, a tmpfs).

When a service's program is missing (or a tmpfs cannot be mounted) the
test is skipped with the reason, except under ``OXIMG_REQUIRE_SERVICES=1``
(set by .ci/run, which installs them and runs as root), where it fails: CI
must never pass by skipping.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from tests.constants import MIB

#: Bound on waiting for a service to accept connections.
STARTUP_TIMEOUT = 20.0

#: Bound on waiting for a process to stop or continue after a signal.
SIGNAL_TIMEOUT = 5.0

#: Bound on a graceful stop before the process is killed.
STOP_TIMEOUT = 10.0

#: Where Debian installs daemons, often not on a user's PATH.
SYSTEM_PROGRAMS = "/usr/sbin:/sbin"


def require_program(name: str) -> str:
    """The program's path; skip (or fail in CI) when it is not installed."""
    found = shutil.which(name) or shutil.which(name, path=SYSTEM_PROGRAMS)
    if found:
        return found
    missing(f"{name} is not installed (Debian package: apt-get install {name})")


def missing(message: str) -> NoReturn:
    """Skip the test for something it needs and does not have; in CI, fail it."""
    if os.environ.get("OXIMG_REQUIRE_SERVICES") == "1":
        pytest.fail(message)
    pytest.skip(message)


@dataclass
class RedisServer:
    """A running redis-server that a test can freeze (SIGSTOP) and thaw (SIGCONT).

    Frozen, it keeps its socket and its connections: clients connect (the
    kernel queues them) and send, and get no answer until it is resumed, as
    from a server stuck in a long command or a swapped-out host.
    """

    url: str
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def pause(self) -> None:
        """Stop the process (SIGSTOP); returns once it is stopped."""
        self.process.send_signal(signal.SIGSTOP)
        wait_for_state(self.pid, stopped=True)

    def resume(self) -> None:
        """Continue the process (SIGCONT); returns once it runs again."""
        self.process.send_signal(signal.SIGCONT)
        wait_for_state(self.pid, stopped=False)


def process_state(pid: int) -> str:
    """The state letter of ``/proc/PID/stat`` ("T" for a stopped process)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def wait_for_state(pid: int, *, stopped: bool) -> None:
    """A signal is delivered asynchronously: poll until the process is (not) stopped."""
    deadline = time.monotonic() + SIGNAL_TIMEOUT
    while (process_state(pid) == "T") != stopped:
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {pid} did not {'stop' if stopped else 'continue'}")
        time.sleep(0.001)


@contextmanager
def redis_process(directory: Path) -> Iterator[RedisServer]:
    """A private redis-server on a Unix socket in ``directory`` (no TCP port).

    Stopped on exit, and continued first if the test left it paused (a
    stopped process keeps SIGTERM pending until it is continued).
    """
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
        yield RedisServer(f"unix://{socket_path}", process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """:func:`redis_process` for a test that only needs its URL."""
    with redis_process(directory) as server:
        yield server.url


# -- a disk that fills up ------------------------------------------------------------------


@dataclass
class SmallDisk:
    """A tmpfs of its own at ``path`` that a test can fill up and free again.

    The filler is ``path / "filler"``: give the server under test a
    directory inside ``path``, so it never sees the filler.
    """

    path: Path
    size: int

    @property
    def filler(self) -> Path:
        return self.path / "filler"

    def fill(self) -> None:
        """Write a filler file until the disk is full (ENOSPC).

        The last write is cut short at the last free page, so every later
        write that needs a page fails with ENOSPC: all writes to new files
        (the result cache writes each result to a new temporary file).
        Creating files and directories still succeeds (a tmpfs counts only
        data against its size), and so does a write into the unused end of
        the last page of a file written before.
        """
        block = bytes(MIB)
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                os.write(fd, block)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
        finally:
            os.close(fd)

    def free(self) -> None:
        """Remove the filler: the disk has room again."""
        self.filler.unlink(missing_ok=True)


@contextmanager
def small_disk(size: int = 8 * MIB, parent: Path | None = None) -> Iterator[SmallDisk]:
    """A ``size``-byte tmpfs mounted at a new directory (in ``parent``, else the system's tmp).

    Mounting needs root (or CAP_SYS_ADMIN): without it the test is skipped
    (failed in CI). Always unmounted on exit, lazily if a file in it is still
    open, and its directory removed.
    """
    mount = require_program("mount")
    umount = require_program("umount")
    path = Path(tempfile.mkdtemp(prefix="oximg-disk-", dir=parent))
    mounted = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={size}", "oximg-test", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        path.rmdir()
        missing(f"cannot mount a tmpfs at {path}: {mounted.stderr.strip()}")
    try:
        yield SmallDisk(path, size)
    finally:
        if subprocess.run([umount, str(path)], capture_output=True, check=False).returncode:
            subprocess.run([umount, "--lazy", str(path)], capture_output=True, check=True)
        path.rmdir()


# -- nginx ---------------------------------------------------------------------------------

#: The configuration around the caller's ``http {}`` body: every path nginx
#: writes is in the private directory (``{dir}``), none of the package's.
NGINX_CONFIG = """\
{user}
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log notice;
events {{
    worker_connections 256;
}}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
{body}
}}
"""


def nginx_user() -> str:
    """As root, workers would run as ``nobody`` and not reach the test's private directory."""
    if os.geteuid() != 0:
        return ""  # the directive only applies to a master started as root
    return f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};"


@contextmanager
def nginx_server(config_body: str, directory: Path | None = None) -> Iterator[str]:
    """Debian's nginx in the foreground on a free port of 127.0.0.1; yields its base URL.

    ``config_body`` goes inside ``http {}`` (``upstream``, ``map``,
    ``proxy_cache_path`` and ``server`` blocks) with two placeholders,
    replaced as plain text (nginx's own braces and ``$variables`` stay as they
    are): ``{listen}``, the address for the ``listen`` directive
    (``127.0.0.1:PORT``), which the body must use once, and ``{dir}``, the
    private directory (for ``proxy_cache_path {dir}/cache ...``, say). The
    directory is ``directory`` if given (nginx.conf, error.log and access.log
    stay there for the test to read), else a temporary one removed on exit.

    The port is bound here and handed to nginx as an inherited socket (the
    ``NGINX`` environment variable, as in nginx's binary upgrade), so no
    other process can take it in between; nginx is ready once it has
    written its pid file. Stopped on exit (SIGTERM, then SIGKILL of its
    process group).
    """
    if config_body.count("{listen}") != 1:
        raise ValueError("the configuration must listen on {listen}, once")
    program = require_program("nginx")
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nginx-")))
        directory.mkdir(parents=True, exist_ok=True)
        listener = stack.enter_context(socket.create_server(("127.0.0.1", 0), backlog=256))
        listener.setblocking(False)  # as nginx's own are (it does not set it on inherited ones)
        listen = f"127.0.0.1:{listener.getsockname()[1]}"
        body = config_body.replace("{listen}", listen).replace("{dir}", str(directory))
        config = directory / "nginx.conf"
        config.write_text(NGINX_CONFIG.format(user=nginx_user(), dir=directory, body=body))
        error_log = directory / "error.log"
        pid_file = directory / "nginx.pid"
        command = [program, "-p", f"{directory}/", "-c", str(config), "-e", str(error_log)]
        process = subprocess.Popen(
            [*command, "-g", "daemon off;"],
            env={**os.environ, "NGINX": f"{listener.fileno()};"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(listener.fileno(),),
            start_new_session=True,  # its workers in its process group, to kill them all
        )
        listener.close()  # nginx holds the only copy now
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while not pid_file.exists():
                if process.poll() is not None or time.monotonic() > deadline:
                    log = error_log.read_text(errors="replace") if error_log.exists() else ""
                    raise RuntimeError(f"nginx did not start:\n{log}")
                time.sleep(0.01)
            yield f"http://{listen}"
        finally:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


#: Bound on a test module's run in a pytest of its own (migrations, a few dozen renders).
OWN_PYTEST_TIMEOUT = 600


def own_pytest(module: str, settings: str, *options: str) -> subprocess.CompletedProcess[str]:
    """Run the test module ``module`` (a file) in a pytest of its own with the
    settings module ``settings``: a site whose settings cannot share a process
    with the rest of the suite gets a run of its own, driven by one test."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            module,
            f"--ds={settings}",
            *options,
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
        ],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=OWN_PYTEST_TIMEOUT,
        check=False,
    )
