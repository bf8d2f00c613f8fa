"""Renders in a child process: the same bytes, killed at the deadline, errors carried back.

``core/pipeline/isolated.py`` runs a render whose encoder libvips cannot
stop (large AVIF and GIF results, WebP with a large alpha channel) in a
child process, which the watchdog kills at the render deadline. Which
renders go there is the plan's decision (tests/test_pipeline.py); the
deadline through gunicorn is tested in tests/test_e2e_bounds.py.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest
import pyvips

from django_oximg.core import pipeline
from django_oximg.core.errors import InvalidImage, ProcessingTimeout
from django_oximg.core.options import Options, parse_path
from django_oximg.core.pipeline.isolated import outcome, render_isolated
from django_oximg.core.pipeline.render import render_here
from tests import images, site_extensions

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

SETTINGS = pipeline.RenderSettings()


def plan_for(data: bytes, options: Options, fmt: str) -> pipeline.Plan:
    """The plan for ``data``, in a child process whatever its size."""
    return replace(
        pipeline.plan_render(pipeline.probe(data), options, fmt, SETTINGS), isolated=True
    )


def children() -> set[int]:
    """This process's child processes (Linux ``/proc``)."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        found.update(int(pid) for pid in (task / "children").read_text().split())
    return found


def with_metadata() -> bytes:
    """A JPEG with an ICC profile and EXIF, to be kept (``sm:0``)."""
    image = pyvips.Image.new_from_buffer(images.jpeg(400, 300), "")
    image = image.icc_transform("srgb", embedded=False)  # attaches libvips' sRGB profile
    return bytes(image.jpegsave_buffer(Q=90, keep="all"))


@pytest.mark.parametrize(
    ("source", "options", "fmt"),
    [
        (lambda: images.jpeg(640, 480), Options(width=300), "avif"),
        (lambda: images.jpeg(640, 480), Options(width=300), "gif"),
        (lambda: images.png_with_alpha(320, 240), Options(width=200), "webp"),
        (lambda: images.animated_gif(120, 90, 6), Options(width=60), "gif"),
        (with_metadata, Options(width=200, strip_metadata=False), "avif"),
    ],
    ids=["avif", "gif", "webp-alpha", "animated-gif", "avif-keeping-metadata"],
)
def test_the_child_gives_the_bytes_this_process_gives(
    source: object, options: Options, fmt: str
) -> None:
    data = source()  # type: ignore[operator]
    plan = plan_for(data, options, fmt)
    here = render_here(data, replace(plan, isolated=False), SETTINGS, None)
    there = pipeline.render(data, options, fmt, SETTINGS, plan=plan)
    assert there == here


@pytest.mark.parametrize("method", ["size:3000", "dssim:0.02"])
def test_the_child_gives_the_quality_its_search_chose(method: str) -> None:
    """An AVIF whose quality ``autoquality`` searched: the quality crosses the pipe too."""
    data = images.jpeg(640, 480)
    options = parse_path(f"/w:300/aq:{method}:40:70/plain/x").options
    plan = plan_for(data, options, "avif")
    here = render_here(data, replace(plan, isolated=False), SETTINGS, None)
    there = pipeline.render(data, options, "avif", SETTINGS, plan=plan)
    assert 40 <= there.quality <= 70 and there.search_encodes > 0
    assert there == here


def test_a_sites_step_runs_in_the_child_as_here() -> None:
    """The child gets the extension by pickling and imports its module (no Django)."""
    settings = pipeline.RenderSettings(extensions=(site_extensions.SEPIA,))
    options = parse_path("/w:200/sep:0.9/plain/x", extensions=settings.extensions).options
    data = images.jpeg(400, 300)
    plan = replace(
        pipeline.plan_render(pipeline.probe(data), options, "png", settings), isolated=True
    )
    here = render_here(data, replace(plan, isolated=False), settings, None)
    there = pipeline.render(data, options, "png", settings, plan=plan)
    assert there == here
    assert there != pipeline.render(data, options._replace(extensions=()), "png", SETTINGS)


@pytest.mark.parametrize("fmt", ["avif", "gif"])
def test_a_child_past_its_deadline_is_killed_and_reaped(fmt: str) -> None:
    """An 8192x8192 AVIF or GIF takes its encoder seconds; the deadline is a second away.

    (The thumbnailer would refuse both up front: the plan is used as is here.)
    """
    data = images.jpeg(2048, 2048)
    options = Options(width=8192, height=8192, enlarge=True)
    plan = plan_for(data, options, fmt)
    before = children()
    with pytest.raises(ProcessingTimeout):
        render_isolated(data, plan, SETTINGS, time.monotonic() + 1.0)
    assert children() <= before


def test_a_project_error_in_the_child_reaches_the_caller() -> None:
    """The header reads fine here; the child finds the data cut short."""
    whole = images.jpeg(640, 480)
    plan = plan_for(whole, Options(width=300), "avif")
    with pytest.raises(InvalidImage):
        render_isolated(whole[: len(whole) // 2], plan, SETTINGS, None)


def test_a_child_killed_by_anything_but_the_deadline_is_a_bad_image() -> None:
    """A loader that crashes on a hostile file, or the OOM killer: the file is to blame."""
    with pytest.raises(InvalidImage, match="SIGSEGV"):
        outcome(-signal.SIGSEGV, b"", b"")


def test_a_child_that_fails_otherwise_is_a_server_error_with_its_output() -> None:
    with pytest.raises(RuntimeError, match="Traceback: a bug"):
        outcome(1, b"", b"Traceback: a bug")
