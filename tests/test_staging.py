"""Staging a miss's work: the named staged works, their costs, and what they run.

The thumbnailer's tests (tests/test_thumbnailer.py, tests/test_limits.py)
cover the limits through whole requests; these check what staging hands the
executor: which staged work, at what cost, and that running it makes what
the pipeline makes on its own.
"""

from __future__ import annotations

import json

import pytest

from django_oximg.core import errors, pipeline
from django_oximg.core.limits.executor import Executor
from django_oximg.core.options import parse_path
from django_oximg.core.pipeline.budget import estimate_peak_bytes
from django_oximg.core.serving.info import InfoRequest
from django_oximg.core.serving.staging import (
    InfoWork,
    Limits,
    Made,
    RenderWork,
    SourceRead,
    StagedBytes,
    StagedRender,
    StagedSummary,
)
from tests import images

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

LIMITS = Limits(
    pipeline.RenderSettings(),
    max_src_resolution=50_000_000,
    max_src_file_size=50 * 1024 * 1024,
    render_timeout=30.0,
)


def read(data: bytes) -> SourceRead:
    return SourceRead(data, pipeline.probe(data))


def work_for(path: str) -> RenderWork:
    """The thumbnail ``path`` (``options/plain/source@format``) asks for."""
    return RenderWork(parse_path(path).options, path.rsplit("@", 1)[1])


def test_a_render_is_staged_with_the_estimate_of_the_plan_it_runs() -> None:
    source = read(images.jpeg(800, 600))
    observed: list[float] = []
    staged = work_for("/rs:fill:200:150/plain/a.jpg@webp").stage(source, LIMITS, observed.append)
    assert isinstance(staged, StagedRender)
    assert staged.cost == estimate_peak_bytes(staged.plan, 1, source.data)
    assert observed == []  # nothing has run yet
    result = staged.run()
    assert len(observed) == 1 and observed[0] >= 0
    alone = pipeline.render(
        source.data, staged.plan.options, "webp", LIMITS.render, deadline=None, plan=staged.plan
    )
    assert result == Made(alone.data)


def test_a_failed_render_is_timed_too() -> None:
    source = read(images.jpeg(800, 600))
    limits = Limits(LIMITS.render, LIMITS.max_src_resolution, LIMITS.max_src_file_size, 1e-9)
    observed: list[float] = []
    staged = work_for("/rs:fit:700:500/bl:8/plain/a.jpg@png").stage(source, limits, observed.append)
    with pytest.raises(errors.ProcessingTimeout):
        staged.run()
    assert len(observed) == 1


@pytest.mark.parametrize("options", ["raw:1", "skp:png"])
def test_an_unprocessed_answer_is_the_source_itself_costing_its_bytes(options: str) -> None:
    data = images.png_with_alpha(64, 48)
    staged = work_for(f"/{options}/plain/a.png@png").stage(read(data), LIMITS, pytest.fail)
    assert staged == StagedBytes(len(data), data)
    assert staged.run().data is data


def test_an_unprocessed_answer_is_checked_as_a_render_is() -> None:
    data = images.png_with_alpha(64, 48)
    small = Limits(LIMITS.render, 64 * 48 - 1, LIMITS.max_src_file_size, LIMITS.render_timeout)
    with pytest.raises(errors.SourceTooLarge):
        work_for("/raw:1/plain/a.png@png").stage(read(data), small, pytest.fail)
    with pytest.raises(errors.UnsupportedFormat):
        work_for("/raw:1/plain/a.jpg@jpeg").stage(read(data), LIMITS, pytest.fail)


def test_a_source_over_the_limits_is_refused_before_anything_is_planned() -> None:
    source = read(images.jpeg(400, 300))
    with pytest.raises(errors.SourceTooLarge):
        work_for("/msr:0.1/plain/a.jpg@jpeg").stage(source, LIMITS, pytest.fail)
    with pytest.raises(errors.SourceTooLarge):
        work_for(f"/msfs:{len(source.data) - 1}/plain/a.jpg@jpeg").stage(
            source, LIMITS, pytest.fail
        )


def test_an_info_document_from_the_header_is_made_at_once_and_costs_nothing() -> None:
    source = read(images.jpeg(320, 240))
    work = InfoWork(InfoRequest("a.jpg", blurhash=None, dominant_color=False))
    assert not work.needs_worker and not work.is_render
    staged = work.stage(source, LIMITS, pytest.fail)
    assert isinstance(staged, StagedBytes) and staged.cost == 0
    document = json.loads(staged.run().data)
    assert (document["width"], document["height"]) == (320, 240)


def test_an_info_summary_is_staged_with_its_own_small_estimate() -> None:
    source = read(images.jpeg(1600, 1200))
    work = InfoWork(InfoRequest("a.jpg"))
    assert work.needs_worker and not work.is_render
    staged = work.stage(source, LIMITS, pytest.fail)
    assert isinstance(staged, StagedSummary)
    plan = pipeline.summary_plan(source.info, LIMITS.render)
    assert staged.cost == estimate_peak_bytes(plan, 1, source.data)
    document = json.loads(staged.run().data)
    assert document["blurhash"] and document["dominant_color"]


def test_the_executor_reserves_a_staged_works_cost_and_runs_it() -> None:
    source = read(images.jpeg(640, 480))
    staged = work_for("/w:100/plain/a.jpg@jpeg").stage(source, LIMITS, lambda seconds: None)
    executor = Executor(1, 0, 5.0, memory_budget=staged.cost)
    try:
        assert executor.run_staged(lambda: staged) == staged.run()
        assert executor.stats().peak_reserved_bytes == staged.cost
        too_small = Executor(1, 0, 5.0, memory_budget=staged.cost - 1)
        try:
            with pytest.raises(errors.SourceTooLarge):
                too_small.run_staged(lambda: staged)
        finally:
            too_small.shutdown()
    finally:
        executor.shutdown()


def test_a_searched_render_gives_its_quality_and_what_the_search_cost() -> None:
    source = read(images.jpeg(800, 600))
    searched = work_for("/rs:fit:200:150/aq:size:4000:30:90/plain/a.jpg@jpeg")
    made = searched.stage(source, LIMITS, lambda seconds: None).run()
    assert isinstance(made, Made)
    assert 30 <= made.quality <= 90 and made.search == "size"
    assert 1 <= made.search_encodes <= 7
    assert len(made.data) <= 4000 or made.quality == 30
    fixed = work_for("/rs:fit:200:150/q:70/plain/a.jpg@jpeg").stage(source, LIMITS, lambda s: None)
    assert fixed.run() == Made(fixed.run().data)  # no quality, no search
