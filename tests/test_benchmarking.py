"""The benchmark package stays off the request path, and its gunicorn helpers.

``oximg_bench``'s own figures are tested in tests/test_bench.py; here, that
a serving process never imports what measures it, and that the server
start and stop shared with ``bench/servers.py`` start, answer and stop.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from django_oximg.benchmarking import gunicorn
from tests.servers import STARTUP_TIMEOUT

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Every way a request reaches the package: the WSGI entry points, the
#: URLconf and its view, the tag library, the runtime with its thumbnailer
#: built, and one thumbnail served through the middleware.
REQUEST_PATH_SCRIPT = textwrap.dedent(
    """
    import io, json, sys
    import django
    django.setup()
    import django_oximg.wsgi, django_oximg.urls, django_oximg.views
    import django_oximg.templatetags.oximg
    from django_oximg import runtime
    runtime.get_thumbnailer()
    from django.core.wsgi import get_wsgi_application
    app = django_oximg.wsgi.OximgMiddleware(get_wsgi_application())
    statuses = []
    environ = {
        "REQUEST_METHOD": "GET", "PATH_INFO": "/img/x/plain/none.jpg", "QUERY_STRING": "",
        "SERVER_NAME": "testserver", "SERVER_PORT": "80", "HTTP_HOST": "testserver",
        "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr,
    }
    b"".join(app(environ, lambda status, headers, exc_info=None: statuses.append(status)))
    loaded = sorted(
        name for name in sys.modules
        if name.startswith(("django_oximg.benchmarking", "django_oximg.management"))
    )
    print(json.dumps({"loaded": loaded, "status": statuses[0]}))
    """
)


def test_the_request_path_imports_no_benchmark_module(tmp_path: Path) -> None:
    """In a new process: this one has imported the benchmark for other tests."""
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="tests.settings",
        PYTHONPATH=str(REPO_ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-c", REQUEST_PATH_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO_ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"].startswith("403")  # the request went through the thumbnailer
    assert result["loaded"] == []


@pytest.mark.parametrize("worker_class", ["gthread", "sync"])
def test_the_gunicorn_command_gives_a_sync_worker_one_thread(worker_class: str) -> None:
    """gunicorn turns a sync worker with more than one thread into gthread, silently."""
    command = gunicorn.gunicorn_command("app:app", 8000, 160, 3, worker_class)

    def option(name: str) -> str:
        return command[command.index(name) + 1]

    assert option("--worker-class") == worker_class
    assert option("--threads") == ("160" if worker_class == "gthread" else "1")
    assert (option("--workers"), option("--bind"), command[-1]) == (
        "3",
        "127.0.0.1:8000",
        "app:app",
    )


def listening_port(process: subprocess.Popen[bytes], log: Path) -> int:
    """The port http.server says it serves on ("Serving HTTP on 127.0.0.1 port N ...")."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not (found := re.search(r"Serving HTTP on \S+ port (\d+)", log.read_text())):
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError("http.server never said its port:\n" + log.read_text())
        time.sleep(0.01)
    return int(found[1])


def test_a_started_server_is_waited_for_and_its_whole_group_stopped(tmp_path: Path) -> None:
    """A real server in its own process group: its first answer timed, then stopped."""
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        # Port 0: the kernel's choice, read from the server's first line. A
        # port found free beforehand (free_port) may be taken by a test running
        # beside this one before the server binds it.
        process = subprocess.Popen(
            [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        port = listening_port(process, log)
        seconds = gunicorn.wait_for_answer(process, port, "/", timeout=30, ok_only=True, log=log)
        assert seconds >= 0
        assert gunicorn.status_of(port, "/missing") == 404
        with pytest.raises(RuntimeError, match="answered 404"):
            gunicorn.wait_for_answer(process, port, "/missing", timeout=30, ok_only=True, log=log)
    finally:
        gunicorn.stop(process)
    assert process.returncode is not None
    gunicorn.stop(process)  # a stopped server: nothing to do


def test_a_server_that_exits_at_start_up_is_reported_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("no such module\n")
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()
    with pytest.raises(RuntimeError, match="exited at start-up:\nno such module"):
        gunicorn.wait_for_answer(
            process, gunicorn.free_port(), "/", timeout=5, ok_only=False, log=log
        )
