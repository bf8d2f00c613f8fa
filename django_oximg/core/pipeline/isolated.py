"""Renders in a child process, which the render deadline can kill.

libvips stops a computation when its kill flag is set (the watchdog of
:mod:`django_oximg.core.limits.deadlines` sets it at the deadline), but only
between the strips of pixels it computes. Two encoders do their work after
that, where nothing can stop them: libheif's AV1 encoder for AVIF and
libvips' GIF quantiser and ditherer. A 4096x4096 AVIF at effort 2 ran 6.8 s
past a 1 s deadline; an 8192x8192 GIF, minutes. Nor can a thread be stopped
from Python. A process can: a render whose plan says
:attr:`~django_oximg.core.pipeline.plan.Plan.isolated` (its encoder may run
longer than ``IN_PROCESS_ENCODE_SECONDS``) runs whole in a child process
(``python -m django_oximg.core.pipeline.child``), which gets the plan, the
settings and the source on its standard input and answers with the result
or the project error on its standard output. At the deadline the watchdog
kills it (SIGKILL), and the render fails with
:class:`~django_oximg.core.errors.ProcessingTimeout` at once.

The price: about 0.1 s of wall time and 0.15 s of CPU to start the child
and import the pipeline, and its interpreter's memory (estimated in
:mod:`django_oximg.core.pipeline.budget`), for renders that take at least a quarter
of a second of encoding anyway. The output bytes are the same as in the
process (tests/test_isolated.py): the same code, the same libvips. A bonus:
a loader that crashes on a hostile file takes the child down, not the
server (a 422).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyvips

from django_oximg.core.errors import InvalidImage, OximgError, ProcessingTimeout
from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.pipeline.rendered import Rendered

if TYPE_CHECKING:
    from django_oximg.core.pipeline.plan import Plan, RenderSettings

#: The child's entry point, run with ``python -m``.
CHILD_MODULE = "django_oximg.core.pipeline.child"

#: Characters of the child's standard error kept in an error's detail.
STDERR_KEPT = 2000


def child_command() -> list[str]:
    return [sys.executable, "-m", CHILD_MODULE]


def child_environment() -> dict[str, str]:
    """This process's environment, with its import path: the child finds the same package."""
    path = os.pathsep.join(os.path.abspath(entry or os.curdir) for entry in sys.path)
    return {**os.environ, "PYTHONPATH": path}


def render_isolated(
    data: bytes, plan: Plan, settings: RenderSettings, deadline: float | None
) -> Rendered:
    """Render ``data`` as ``plan`` says in a child process killed at ``deadline``."""
    import pickle  # here, not at the top: most processes never start a child

    # The header libvips parsed is an image handle of this process; the
    # child reads it again from the source if it needs it.
    portable = replace(plan, source=replace(plan.source, header=None))
    request = pickle.dumps((portable, settings, pyvips.concurrency_get()))
    with Deadline(deadline) as watch:
        child = subprocess.Popen(
            child_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_environment(),
        )
        watch.on_expiry(child.kill)
        try:
            send(child, request, data)
            out, err = child.communicate()
        finally:
            if child.poll() is None:  # interrupted here: never leave it running
                child.kill()
                child.wait()
    if watch.expired:
        raise ProcessingTimeout("render deadline passed: the render process was killed")
    return outcome(child.returncode, out, err)


def send(child: subprocess.Popen[bytes], request: bytes, data: bytes) -> None:
    """Write the request, then the source, to the child's standard input.

    ``communicate`` then flushes and closes it.
    """
    assert child.stdin is not None
    try:
        child.stdin.write(len(request).to_bytes(8, "big"))
        child.stdin.write(request)
        child.stdin.write(data)
    except OSError:  # the child died (killed at the deadline): its exit status says why
        pass


def outcome(returncode: int, out: bytes, err: bytes) -> Rendered:
    """The child's result, or the error it reported, or why it died."""
    import pickle

    if returncode == 0:
        answer: Any = pickle.loads(out)
        if isinstance(answer, OximgError):
            raise answer
        return answer  # type: ignore[no-any-return]
    tail = err.decode("utf-8", "replace")[-STDERR_KEPT:]
    if returncode < 0:
        # Not our kill (that is a timeout, above): a loader or encoder that
        # crashed, or the kernel's OOM killer. The file is the likely cause.
        name = signal.Signals(-returncode).name
        raise InvalidImage(f"the render process died of {name}: {tail}")
    raise RuntimeError(f"the render process failed with status {returncode}: {tail}")
