"""The benchmark tooling: driver statistics, URL lists, result parsing, and ``oximg_bench``.

No timing is asserted anywhere: only that figures are computed correctly from
given samples and that the command's JSON has its documented shape.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from bench import driver
from bench.cases import CASES, oximg_path, thumbor_path, url_list
from django_oximg.core import defaults

# --- statistics -----------------------------------------------------------------


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert driver.percentile(values, 0.50) == 50.0
    assert driver.percentile(values, 0.95) == 95.0
    assert driver.percentile(values, 0.99) == 99.0
    assert driver.percentile([7.0], 0.99) == 7.0
    assert math.isnan(driver.percentile([], 0.5))


def test_stats_from_samples_counts_only_2xx_in_rps() -> None:
    stats = driver.stats_from_samples(
        [0.010, 0.020, 0.030, 0.040], [200, 200, 429, 200], [100, 200, 0, 300], seconds=2.0
    )
    assert stats.requests == 4
    assert stats.ok == 3
    assert stats.rps == 1.5
    assert stats.statuses == {200: 3, 429: 1}
    assert stats.p50_ms == pytest.approx(20.0)
    assert stats.p99_ms == pytest.approx(40.0)
    assert stats.bytes_per_response == 150.0
    assert stats.to_dict()["statuses"] == {"200": 3, "429": 1}


def test_spread_ignores_nan_and_gives_median_min_max() -> None:
    result = driver.spread([3.0, math.nan, 1.0, 2.0])
    assert (result.median, result.low, result.high) == (2.0, 1.0, 3.0)
    assert math.isnan(driver.spread([math.nan]).median)


# --- URLs -------------------------------------------------------------------------


def test_diverse_widths_cycle_485_to_500() -> None:
    widths = driver.diverse_widths(20)
    assert widths[:16] == list(range(485, 501))
    assert widths[16:] == [485, 486, 487, 488]
    assert driver.diverse_widths(2, offset=15) == [500, 485]


def test_per_connection_deals_every_url_once() -> None:
    urls = [f"/u{i}" for i in range(10)]
    lists = driver.per_connection(urls, 3)
    assert len(lists) == 3
    assert sorted(u for lst in lists for u in lst) == sorted(urls)
    assert lists[0] == ["/u0", "/u3", "/u6", "/u9"]
    with pytest.raises(ValueError):
        driver.per_connection(urls, 0)


def test_diverse_urls_are_all_distinct_and_same_urls_identical() -> None:
    case = CASES["medium-jpeg"]
    diverse = url_list(case, 100, "diverse", "r1", oximg_path)
    assert len(set(diverse)) == 100
    assert all("/cb:r1" in path for path in diverse)
    same = url_list(case, 5, "same", "r1", oximg_path)
    assert len(set(same)) == 1
    with pytest.raises(ValueError):
        url_list(case, 5, "other", "r1", oximg_path)


def test_each_server_spells_the_same_operation() -> None:
    case = CASES["large-jpeg"]
    assert oximg_path(case, 490, "x7") == "/rs:fit:490:500/q:80/cb:x7/plain/large.jpg@jpeg"
    assert thumbor_path(case, 490, "x7") == (
        "/unsafe/fit-in/490x500/filters:quality(80)/large.jpg?cb=x7"
    )
    webp = CASES["alpha-png-webp"]
    assert thumbor_path(webp, 400, "") == (
        "/unsafe/fit-in/400x400/filters:format(webp):quality(75)/alpha.png"
    )
    assert webp.widths(2) == [385, 386]


def test_parsed_oximg_paths_are_valid_requests() -> None:
    from django_oximg.core.options import parse_path

    for case in CASES.values():
        parsed = parse_path(oximg_path(case, case.width, "t1"))
        assert parsed.source == case.source
        assert parsed.options.format == case.format


# --- result parsing -------------------------------------------------------------------


def test_wrk_output_is_parsed_from_our_json_line() -> None:
    output = (
        "Running 5s test @ http://127.0.0.1:1\n"
        'WRKJSON {"requests": 200, "micros": 4000000, "p50": 12000, "p95": 30000, '
        '"p99": 45000, "non2xx": 10, "connect": 0, "read": 1, "write": 0, "timeout": 0, '
        '"bytes": 1900000, "wrapped": 2}\n'
    )
    stats = driver.parse_wrk_output(output)
    assert stats.driver == "wrk"
    assert stats.wrapped == 2
    assert stats.statuses == {200: 190, 599: 10, 0: 1}
    assert stats.rps == 190 / 4.0
    assert (stats.p50_ms, stats.p95_ms, stats.p99_ms) == (12.0, 30.0, 45.0)
    assert stats.bytes_per_response == 10000.0
    with pytest.raises(ValueError):
        driver.parse_wrk_output("no summary here")


def test_wrk_threads_each_read_their_own_list_file(tmp_path: Path) -> None:
    driver.write_path_lists([["/a", "/b"], ["/c"]], tmp_path)
    assert (tmp_path / "1").read_text() == "/a\n/b\n"
    assert (tmp_path / "2").read_text() == "/c\n"
    script = driver.wrk_script(tmp_path, close=True)
    assert f'local directory = "{tmp_path}"' in script
    assert 'io.lines(directory .. "/" .. id)' in script
    assert "/a" not in script  # the lists stay out of every thread's Lua state
    assert 'wrk.headers["Connection"] = "close"' in script
    assert "Connection" not in driver.wrk_script(tmp_path, close=False).split("local threads")[1]


def test_the_python_driver_counts_connections_that_ran_out_of_paths() -> None:
    """A connection that starts its list over may get cache hits: the run must say so."""
    import http.server
    import threading

    class Answer(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        plenty = [f"/p{index}" for index in range(100_000)]
        stats = driver.python_closed_loop(server.server_address[1], [["/one"], plenty], 0.3)
    finally:
        server.shutdown()
        server.server_close()
    assert stats.ok > 2
    assert stats.wrapped == 1


def test_each_connection_gets_urls_for_a_core_to_itself() -> None:
    from bench.load import PER_CONNECTION_RATE, url_count

    for seconds, concurrency in ((5.0, 1), (5.0, 8), (3.0, 64)):
        assert url_count(seconds, concurrency) // concurrency >= seconds * PER_CONNECTION_RATE


def test_runs_whose_connections_wrapped_are_noted() -> None:
    from bench.load import Point, wrapped_notes

    clean = Point("oximg-wsgi", "medium-jpeg", "diverse", 8)
    clean.runs = [{"rps": 110.0, "wrapped": 0}, {"rps": 112.0}]
    hit = Point("oximg-wsgi-alt", "medium-jpeg", "diverse", 8)
    hit.runs = [{"rps": 120.0, "wrapped": 0}, {"rps": 474.0, "wrapped": 1}]
    (note,) = wrapped_notes([clean, hit])
    assert note.startswith("wrapped: oximg-wsgi-alt medium-jpeg diverse c=8 run 2: 1 connection")


def test_same_url_runs_are_not_noted_for_repeating_their_url() -> None:
    """Cache-hit runs walk one URL over and over on purpose."""
    from bench.load import Point, wrapped_notes

    hits = Point("oximg-wsgi-hit", "medium-jpeg", "same", 64)
    hits.runs = [{"rps": 1500.0, "wrapped": 64}]
    assert wrapped_notes([hits]) == []


def test_parse_head_reads_status_and_headers() -> None:
    status, headers = driver.parse_head(b"HTTP/1.1 429 Too Many\r\nRetry-After: 1\r\nX: y")
    assert status == 429
    assert headers == {"retry-after": "1", "x": "y"}
    with pytest.raises(ValueError):
        driver.parse_head(b"garbage")


def test_read_response_handles_length_chunked_and_close() -> None:
    async def read(raw: bytes) -> driver.Response:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await driver.read_response(reader)

    sized = asyncio.run(read(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"))
    assert (sized.status, sized.body_bytes, sized.keep_alive) == (200, 3, True)
    chunked = asyncio.run(
        read(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
        )
    )
    assert chunked.body_bytes == 5
    closing = asyncio.run(read(b"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\nbye"))
    assert (closing.status, closing.body_bytes, closing.keep_alive) == (404, 3, False)


def test_cpu_seconds_of_this_process_is_read_from_proc() -> None:
    import os

    assert driver.cpu_seconds(os.getpid()) > 0
    assert driver.cpu_seconds(2**22 + 12345) == 0.0
    assert os.getpid() in driver.process_tree(os.getpid())


def test_wrk_gets_a_thread_per_connection_unless_every_list_is_the_same() -> None:
    from bench.driver import wrk_threads

    distinct = [[f"/a{index}"] for index in range(64)]
    same = [["/a", "/a"] for _ in range(64)]
    assert wrk_threads(distinct) == 64
    assert wrk_threads(same) == min(64, os.cpu_count() or 1)
    assert wrk_threads(same[:1]) == 1


# --- the management command --------------------------------------------------------------


@pytest.mark.django_db
def test_oximg_bench_quick_writes_its_json_shape(media: Path, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "bench.json"
    call_command(
        "oximg_bench",
        "--quick",
        "--rounds",
        "2",
        "--seconds",
        "0.3",
        "--json",
        str(out),
        "--no-progress",
    )
    report = json.loads(out.read_text())
    assert set(report) >= {"meta", "results", "ratios", "notes"}
    assert report["meta"]["jpeg_shrink_margin"] == defaults.JPEG_SHRINK_MARGIN
    contenders = {row["contender"] for row in report["results"]}
    assert contenders == {"bare libvips", "pipeline.render", "thumbnailer"}
    for row in report["results"]:
        assert row["source"] == "medium"
        assert row["kind"] == "in-process"
        for figure in ("rps", "p50_ms", "p95_ms", "p99_ms", "cpu_ms_per_image", "bytes_per_image"):
            assert set(row[figure]) == {"median", "low", "high"}
        assert row["rps"]["median"] > 0
        assert row["bytes_per_image"]["median"] > 0
        assert len(row["runs"]) == 2
    # Every thumbnailer request was a miss (a hit would answer from a file, 0 body bytes).
    served = next(r for r in report["results"] if r["contender"] == "thumbnailer")
    assert served["bytes_per_image"]["low"] > 0.9 * served["bytes_per_image"]["high"]
    assert set(report["ratios"]) == {
        "medium pipeline.render / bare libvips",
        "medium thumbnailer / bare libvips",
    }
    # The sample source and everything cached for it are gone afterwards.
    assert not list((media / "oximg-bench").glob("*"))
    assert not [p for p in (media / "oximg").rglob("*") if p.is_file()]
    printed = capsys.readouterr().out
    assert "bare libvips" in printed


class Terminal(StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.django_db
@pytest.mark.parametrize("stderr", [Terminal, StringIO])
def test_oximg_bench_progress_redraws_one_line_on_a_terminal_else_writes_few(
    media: Path, stderr: type[StringIO]
) -> None:
    err = stderr()
    args = ("--quick", "--rounds", "2", "--seconds", "0.05")
    call_command("oximg_bench", *args, stdout=StringIO(), stderr=err)
    written = err.getvalue()
    if stderr is Terminal:
        # Redrawn in place (3 contenders x 2 rounds), then cleared: never a new line.
        assert "\roximg_bench: 6/6 [" in written and "\n" not in written
        assert written.endswith("\r")
    else:
        lines = written.splitlines()
        assert "\r" not in written and len(lines) == 6
        assert lines[-1].startswith("oximg_bench: 6/6 [")


@pytest.mark.django_db
def test_oximg_bench_reads_a_named_source(media: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    call_command(
        "oximg_bench",
        "--quick",
        "--seconds",
        "0.2",
        "--source",
        "photos/landscape.jpg",
        "--json",
        str(out),
        "--no-progress",
        "--compare",
    )
    report = json.loads(out.read_text())
    assert {row["source"] for row in report["results"]} == {"photos/landscape.jpg"}
    assert (media / "photos" / "landscape.jpg").exists()  # a named source is never deleted
    assert any("sorl-thumbnail" in note for note in report["notes"])


def test_oximg_bench_pages_renders_a_page_of_the_sites_images(
    media: Path, tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "pages.json"
    call_command("oximg_bench", "--pages", "--renders", "3", "--compare", "--json", str(out))
    report = json.loads(out.read_text())
    assert report["sources"] == ["photos/alpha.png", "photos/anim.gif", "photos/landscape.jpg"]
    (row,) = report["results"]
    assert row["contender"] == "django-oximg"
    assert row["tags"] == 3 * 5
    assert len(row["warm_ms"]) == 3
    assert row["first_ms"] > 0 and row["second_ms"] > 0
    assert report["import_ms"] > 0
    assert any("sorl-thumbnail" in note for note in report["notes"])
    printed = capsys.readouterr().out
    assert "django-oximg" in printed and "us/tag" in printed


def test_oximg_bench_pages_renders_the_sites_own_template(
    media: Path, tmp_path: Path, settings: Any
) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "gallery.html").write_text(
        '{% load oximg %}{% for s in sources %}{% thumbnail s "64" as t %}'
        '<img src="{{ t.url }}">{% endthumbnail %}{% endfor %}'
    )
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [str(templates)]}]
    out = tmp_path / "pages.json"
    call_command(
        "oximg_bench",
        "--pages",
        "--template",
        "gallery.html",
        "--source",
        "photos/landscape.jpg",
        "--renders",
        "2",
        "--json",
        str(out),
    )
    (row,) = json.loads(out.read_text())["results"]
    assert row["tags"] == 1


def test_oximg_bench_pages_draws_samples_when_the_storage_has_no_images(
    media: Path, tmp_path: Path
) -> None:
    for path in (media / "photos").iterdir():
        path.unlink()
    out = tmp_path / "pages.json"
    call_command("oximg_bench", "--pages", "--renders", "1", "--json", str(out))
    report = json.loads(out.read_text())
    assert len(report["sources"]) == 10
    assert report["results"][0]["tags"] == 50
    assert not list((media / "oximg-bench").glob("*"))


@pytest.mark.django_db
def test_oximg_bench_hits_compares_each_way_in_with_whitenoise(
    media: Path, tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "hits.json"
    call_command("oximg_bench", "--hits", "--rounds", "2", "--seconds", "0.2", "--json", str(out))
    report = json.loads(out.read_text())
    rows = {row["contender"]: row for row in report["hits"]}
    assert set(rows) == {"middleware", "view", "whitenoise"}
    for row in rows.values():
        assert row["kind"] == "hit" and len(row["runs"]) == 2
        assert row["rps"]["low"] > 0
        # The same bytes each time: one thumbnail, answered whole.
        assert row["bytes_per_image"]["low"] == row["bytes_per_image"]["high"] > 0
    assert len({row["bytes_per_image"]["median"] for row in rows.values()}) == 1
    printed = capsys.readouterr().out
    assert "medium middleware / whitenoise:" in printed
    assert "medium view / whitenoise:" in printed
    assert not list((media / "oximg-bench").glob("*"))
    assert not [p for p in (media / "oximg").rglob("*") if p.is_file()]


@pytest.mark.django_db
def test_oximg_bench_hits_without_the_view_in_the_urlconf_says_so(
    media: Path, tmp_path: Path, settings: Any
) -> None:
    settings.ROOT_URLCONF = "tests.urls_empty"
    out = tmp_path / "hits.json"
    call_command("oximg_bench", "--hits", "--rounds", "1", "--seconds", "0.1", "--json", str(out))
    report = json.loads(out.read_text())
    assert {row["contender"] for row in report["hits"]} == {"middleware", "whitenoise"}
    assert any("view is not in the URLconf" in note for note in report["notes"])


# --- the JPEG decode scale (JPEG_SHRINK_MARGIN) ------------------------------------------


@pytest.mark.parametrize(
    ("source", "target", "margin", "shrink"),
    [
        ((7360, 4912), (500, 334), 2.0, 4),  # libvips' own rule: 1840 px decoded
        ((7360, 4912), (500, 334), 1.5, 8),  # 920 px >= 750
        ((7360, 4912), (500, 334), 1.0, 8),
        ((2000, 1333), (500, 333), 2.0, 2),
        ((2000, 1333), (500, 333), 1.5, 2),  # 500 px < 750: still half size
        ((2000, 1333), (500, 333), 1.0, 4),  # Pillow's draft mode: 500 px
        ((400, 300), (500, 375), 1.0, 1),  # never below the target
    ],
)
def test_jpeg_shrink_leaves_the_margin(
    source: tuple[int, int], target: tuple[int, int], margin: float, shrink: int
) -> None:
    from django_oximg.core.pipeline.load import jpeg_shrink

    assert jpeg_shrink(*source, *target, margin) == shrink


def jpeg_with_orientation(orientation: int) -> bytes:
    import pyvips

    from tests import images

    image = images.photo(1600, 1000).copy()
    image.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    return bytes(image.jpegsave_buffer(Q=90, keep=pyvips.enums.ForeignKeep.EXIF))


@pytest.mark.parametrize("orientation", [1, 3, 6, 8])
@pytest.mark.parametrize("path", ["rs:fit:190:200", "rs:fill:150:150", "rs:fit:190:200/rot:90"])
def test_a_smaller_decode_gives_the_same_picture(orientation: int, path: str) -> None:
    """Margins 2 (libvips' rule) and 1 (8x decode) agree on size, rotation and content."""
    import pyvips

    from django_oximg.core import pipeline
    from django_oximg.core.options import parse_path

    data = jpeg_with_orientation(orientation)
    options = parse_path(f"/{path}/plain/x.jpg").options
    rendered = [
        pipeline.render(data, options, "png", pipeline.RenderSettings(jpeg_shrink_margin=m))
        for m in (2.0, 1.0)
    ]
    assert (rendered[0].width, rendered[0].height) == (rendered[1].width, rendered[1].height)
    wide, small = (pyvips.Image.new_from_buffer(r.data, "") for r in rendered)
    assert (wide.width, wide.height) == (small.width, small.height)
    # A wrong rotation or flip would differ by tens of levels on this gradient.
    assert (wide - small).abs().avg() < 4


@pytest.mark.parametrize("margin", [0.5, 9, "2"])
def test_jpeg_shrink_margin_is_validated(margin: object) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from django_oximg.conf import build_settings

    raw = {"KEY": "aa" * 32, "SALT": "bb" * 32, "JPEG_SHRINK_MARGIN": margin}
    with pytest.raises(ImproperlyConfigured, match="JPEG_SHRINK_MARGIN"):
        build_settings(raw)


def test_bare_thumbnail_is_the_plain_libvips_fit() -> None:
    import pyvips

    from django_oximg.benchmarking.bare_libvips import bare_thumbnail, sample_jpeg
    from tests import images

    data = bare_thumbnail(images.jpeg(800, 600), 200, 200, "jpeg", 80)
    image = pyvips.Image.new_from_buffer(data, "")
    assert (image.width, image.height) == (200, 150)
    sample = pyvips.Image.new_from_buffer(sample_jpeg(64, 48), "")
    assert (sample.width, sample.height, sample.bands) == (64, 48, 3)


@pytest.mark.django_db
def test_oximg_bench_plot_without_matplotlib_says_how_to_get_it(
    media: Path, tmp_path: Path
) -> None:
    import importlib.util

    from django.core.management.base import CommandError

    if importlib.util.find_spec("matplotlib"):
        pytest.skip("matplotlib is installed here")
    with pytest.raises(CommandError, match=r"django-oximg\[bench\]"):
        call_command(
            "oximg_bench",
            "--quick",
            "--seconds",
            "0.1",
            "--no-progress",
            "--source",
            "photos/landscape.jpg",
            "--plot",
            str(tmp_path / "x.png"),
        )


# --- bench/load.py options and bench/overhead.py's baseline app --------------------------


def test_alt_settings_are_parsed_as_json() -> None:
    from bench.load import parse_args

    args = parse_args(["--alt-settings", '{"WORKERS": 3}', "--contenders", "oximg-wsgi-alt"])
    assert args.alt_settings == {"WORKERS": 3}
    assert args.contenders == ["oximg-wsgi-alt"]
    assert parse_args([]).alt_settings is None


def test_a_sync_alt_server_runs_gunicorns_sync_worker_with_one_thread() -> None:
    """gunicorn turns a sync worker with more than one thread into gthread, silently."""
    from bench.load import parse_args
    from bench.servers import gunicorn_command

    args = parse_args(["--alt-worker-class", "sync", "--alt-processes", "3"])
    assert (args.alt_worker_class, args.alt_processes) == ("sync", 3)
    defaults = parse_args([])
    assert (defaults.alt_worker_class, defaults.alt_threads) == ("gthread", 160)
    assert parse_args(["--alt-threads", "40"]).alt_threads == 40

    def option(command: list[str], name: str) -> str:
        return command[command.index(name) + 1]

    sync = gunicorn_command("app:app", 8000, 160, 3, "sync")
    assert (option(sync, "--worker-class"), option(sync, "--threads")) == ("sync", "1")
    assert option(sync, "--workers") == "3"
    threaded = gunicorn_command("app:app", 8000, 160)
    assert (option(threaded, "--worker-class"), option(threaded, "--threads")) == ("gthread", "160")


def test_an_alt_server_is_started_only_when_it_differs() -> None:
    from bench.load import AltServer

    assert not AltServer().differs
    assert not AltServer(settings={}).differs
    assert AltServer(settings={"WORKERS": 1}).differs
    assert AltServer(threads=40).differs
    described = AltServer(processes=2).describe()
    assert described.endswith("in 2 gunicorn gthread process(es) of 160 threads")


def test_overhead_hello_app_answers_a_thumbnail_sized_body(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import overhead

    monkeypatch.setenv(overhead.VARIANT_ENV, "hello")
    app = overhead.application()
    started: list[tuple[str, list[tuple[str, str]]]] = []
    body = b"".join(app({}, lambda status, headers: started.append((status, headers))))
    assert started[0][0] == "200 OK"
    assert len(body) == overhead.HELLO_BYTES
    assert ("Content-Length", str(overhead.HELLO_BYTES)) in started[0][1]


def test_threads_vs_processes_reports_each_variant(tmp_path: Path) -> None:
    from bench import threads_vs_processes
    from django_oximg.benchmarking.bare_libvips import sample_jpeg

    source = tmp_path / "photo.jpg"
    source.write_bytes(sample_jpeg(640, 480))
    out = tmp_path / "report.json"
    report = threads_vs_processes.main(
        ["--renders", "3", "--runs", "1", "--source", str(source), "--json", str(out)]
    )
    assert json.loads(out.read_text())["summary"] == report["summary"]
    assert set(report["summary"]) == set(threads_vs_processes.VARIANTS)
    for variant, rows in report["results"].items():
        (row,) = rows
        assert row["cpu_ms_per_image"] > 0 and row["cores"] > 0, variant
    # Images counted: 3 per thread or process, after the warm-up loop.
    loops = [threads_vs_processes.render_loop(source, 2, 2)]
    assert loops[0]["images"] == 4
    assert threads_vs_processes.figures(loops * 2)["images_per_s"] == pytest.approx(
        8 / loops[0]["wall_s"]
    )


def test_saver_threads_saves_through_libvips_and_pillow(tmp_path: Path) -> None:
    from bench import saver_threads

    sizes = {encoder: saver_threads.saver(encoder)() for encoder in saver_threads.ENCODERS}
    # The same pixels and settings: the same size but for Pillow's 18-byte JFIF header.
    assert 1000 < sizes["libvips"] <= sizes["pillow"] <= sizes["libvips"] + 64
    report = saver_threads.main(["--saves", "2", "--runs", "1", "--json", str(tmp_path / "r")])
    assert len(report["summary"]) == len(saver_threads.VARIANTS) * len(saver_threads.ENCODERS)
    assert all(rows[0]["cores"] > 0 for rows in report["results"].values())


def test_threads_vs_processes_names_rows_by_encoder() -> None:
    from bench.threads_vs_processes import VARIANTS, row_names

    assert row_names(["pillow"]) == [(v, v, "pillow") for v in VARIANTS]
    rows = row_names(["pillow", "libvips"])
    assert rows[:2] == [
        ("1 thread, pillow", "1 thread", "pillow"),
        ("1 thread, libvips", "1 thread", "libvips"),
    ]
    assert len(rows) == 2 * len(VARIANTS)


def test_perf_report_shares_are_read_per_shared_object() -> None:
    from bench.driver import perf_shares

    report = (
        "# Samples: 12K of event 'cpu-clock'\n"
        "#\n"
        "    53.43%  [kernel.kallsyms]\n"
        "    35.34%  libpython3.11.so.1.0\n"
        "     4.30%  libvips-e42572c0.so.42\n"
    )
    assert perf_shares(report) == pytest.approx(
        {
            "[kernel.kallsyms]": 0.5343,
            "libpython3.11.so.1.0": 0.3534,
            "libvips-e42572c0.so.42": 0.043,
        }
    )


def test_split_by_object_subtracts_hello_and_scales_to_the_unsampled_difference() -> None:
    from bench.overhead import split_by_object

    hello = (0.5, {"python": 0.4, "kernel": 0.6})
    canned = (2.5, {"python": 0.4, "kernel": 0.5, "libvips": 0.1})
    split = split_by_object(hello, canned, unsampled=1.0)
    # Sampled difference 2.0 ms, unsampled 1.0 ms: every share is halved.
    assert split == pytest.approx({"python": 0.4, "kernel": 0.475, "libvips": 0.125})
    assert sum(split.values()) == pytest.approx(1.0)


def test_runs_far_from_their_points_median_cpu_are_noted() -> None:
    from bench.load import Point, outlier_notes

    steady = Point("oximg-wsgi", "medium-jpeg", "diverse", 8)
    steady.runs = [{"rps": 110.0, "cpu_ms_per_request": c} for c in (16.1, 17.0, 16.5)]
    odd = Point("oximg-wsgi-alt", "medium-jpeg", "diverse", 8)
    odd.runs = [
        {"rps": 114.7, "cpu_ms_per_request": 16.9},
        {"rps": 232.0, "cpu_ms_per_request": 7.9},
        {"rps": 111.6, "cpu_ms_per_request": 17.1},
    ]
    single = Point("pipeline", "medium-jpeg", "diverse", 2)
    single.runs = [{"rps": 120.0, "cpu_ms_per_request": 14.3}]
    (note,) = outlier_notes([steady, odd, single])
    assert note.startswith("outlier: oximg-wsgi-alt medium-jpeg diverse c=8 run 2: 232.0 req/s")
    assert "7.9 CPU ms/req against a median of 16.9" in note


def test_wait_until_idle_returns_at_once_for_an_idle_server_and_gives_up_on_a_busy_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a clock of its own: how much CPU a real busy process gets depends on the machine."""
    from types import SimpleNamespace

    from bench import driver

    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    monkeypatch.setattr(driver, "time", SimpleNamespace(monotonic=lambda: now[0], sleep=sleep))
    monkeypatch.setattr(driver, "process_tree", lambda root: [root])
    # pid 1 never uses CPU; pid 2 uses one CPU all the time.
    monkeypatch.setattr(driver, "cpu_seconds", lambda pid: 0.0 if pid == 1 else now[0])
    assert driver.wait_until_idle(1, interval=0.1, limit=20.0) == pytest.approx(0.1)
    now[0] = 0.0
    assert driver.wait_until_idle(2, interval=0.1, limit=0.5) == pytest.approx(0.5)
    # Half a CPU is still busy at the default threshold, a twentieth is not.
    monkeypatch.setattr(driver, "cpu_seconds", lambda pid: now[0] * 0.5)
    now[0] = 0.0
    assert driver.wait_until_idle(3, interval=0.1, limit=0.5) == pytest.approx(0.5)
    monkeypatch.setattr(driver, "cpu_seconds", lambda pid: now[0] * 0.04)
    now[0] = 0.0
    assert driver.wait_until_idle(3, interval=0.1, limit=0.5) == pytest.approx(0.1)


def test_instruction_count_is_read_from_cachegrinds_summary() -> None:
    from bench.instructions import instructions

    report = (
        "==41== Cachegrind, a high-precision tracing profiler\n"
        "==41== I   refs:      1,234,567,890\n"
    )
    assert instructions(report) == 1_234_567_890
    with pytest.raises(ValueError):
        instructions("==41== ERROR SUMMARY: 0 errors\n")


# --- quality per byte (bench/matched.py, bench/quality.py) ---------------------------


def test_qualities_are_a_list_or_an_inclusive_range() -> None:
    from bench.matched import parse_qualities

    assert parse_qualities("80,40,60,60") == [40, 60, 80]
    assert parse_qualities("30..95:5") == list(range(30, 96, 5))
    assert parse_qualities("1..3") == [1, 2, 3]


def test_score_at_bytes_interpolates_in_log_bytes_between_neighbours() -> None:
    from bench.matched import score_at_bytes

    curve = [(4000.0, 80.0), (1000.0, 60.0), (2000.0, 70.0)]
    assert score_at_bytes(curve, 2000.0) == 70.0
    # Half-way in log(bytes) between 1000 and 4000 is 2000, not 2500.
    assert score_at_bytes([(1000.0, 60.0), (4000.0, 80.0)], 2000.0) == pytest.approx(70.0)
    assert score_at_bytes(curve, 1000.0 * 2**0.5) == pytest.approx(65.0)
    assert math.isnan(score_at_bytes(curve, 999.0))
    assert math.isnan(score_at_bytes(curve, 4001.0))
    assert math.isnan(score_at_bytes([], 1000.0))


def test_bytes_at_score_is_the_inverse_and_takes_the_cheapest_way() -> None:
    from bench.matched import bytes_at_score, score_at_bytes

    curve = [(1000.0, 60.0), (2000.0, 70.0), (4000.0, 80.0)]
    assert bytes_at_score(curve, 65.0) == pytest.approx(1000.0 * 2**0.5)
    assert score_at_bytes(curve, bytes_at_score(curve, 77.0)) == pytest.approx(77.0)
    # A step that costs bytes and buys nothing: the first (cheapest) crossing wins.
    bumpy = [(1000.0, 60.0), (2000.0, 70.0), (3000.0, 69.0), (4000.0, 80.0)]
    assert bytes_at_score(bumpy, 69.5) < 2000.0
    assert math.isnan(bytes_at_score(curve, 85.0))


def test_medians_and_worst_leave_nan_out() -> None:
    from bench.matched import median, percent_change, worst

    assert median([3.0, math.nan, 1.0, 2.0]) == 2.0
    assert math.isnan(median([math.nan]))
    assert worst({"b": -1.0, "a": -1.0, "c": math.nan, "d": 2.0}) == ("a", -1.0)
    assert worst({"c": math.nan})[0] == ""
    assert percent_change(90.0, 100.0) == pytest.approx(-10.0)
    assert math.isnan(percent_change(math.nan, 100.0))


def test_markdown_table_aligns_numbers_and_refuses_ragged_rows() -> None:
    from bench.matched import markdown_table, number

    assert [number(-0.04, signed=True), number(1.26, signed=True), number(math.nan)] == [
        "0.0",
        "+1.3",
        "-",
    ]
    table = markdown_table(["name", "Δ"], [["a", "+1.3"], ["b", "-"]])
    assert table.splitlines() == ["| name | Δ |", "|---|---:|", "| a | +1.3 |", "| b | - |"]
    with pytest.raises(ValueError):
        markdown_table(["name", "Δ"], [["a"]])


def quality_result(curves: dict[str, list[tuple[int, int, float]]]) -> dict[str, Any]:
    """bench/quality.py's per-photo result for (quality, bytes, score) sweeps."""
    return {
        "contenders": {
            key: {
                "label": key,
                "dims": "500x313",
                "curve": {str(q): {"bytes": b, "score": s} for q, b, s in sweep},
                "lossless": {"bytes": 300_000, "score": 90.0},
            }
            for key, sweep in curves.items()
        }
    }


def test_contenders_are_read_at_django_oximgs_bytes_and_tabled() -> None:
    from bench.quality import matched_points, summary_table
    from bench.quality_contenders import CASES

    case = CASES["fit-jpeg"]
    oximg = [(60, 10_000, 70.0), (80, 20_000, 80.0), (90, 40_000, 86.0)]
    # The same look for 10 % fewer bytes, swept from q80 up only.
    smaller = [(q, int(b * 0.9), s) for q, b, s in oximg if q >= 80] + [(95, 60_000, 90.0)]
    per_photo = {}
    for photo in ("a.jpg", "b.jpg"):
        result = quality_result({"oximg": oximg, "smaller": smaller})
        result["matched"] = matched_points(result, case)
        per_photo[photo] = result
    read = per_photo["a.jpg"]["matched"]
    assert set(read) == {"q60", "q80", "q90"}
    assert read["q80"]["oximg"]["delta"] == 0.0
    assert read["q80"]["smaller"]["bytes_pct"] == pytest.approx(-10.0, abs=0.01)
    assert read["q80"]["smaller"]["delta"] > 0
    assert math.isnan(read["q60"]["smaller"]["delta"])  # 10000 B is below its sweep
    table = summary_table({"fit-jpeg": per_photo}, case)
    row = next(line for line in table.splitlines() if line.startswith("| `smaller`"))
    assert "-10%" in row
    assert "| - |" in row  # the q60 column: off its curve


def test_a_fill_keeps_the_centred_region_of_the_box_aspect_ratio() -> None:
    from bench.quality_contenders import cover_region

    assert cover_region(2560, 1600, 320, 320) == (1600, 1600)
    assert cover_region(1600, 2560, 320, 320) == (1600, 1600)
    assert cover_region(2000, 1000, 400, 100) == (2000, 500)


@pytest.mark.parametrize("eighths", [2, 3, 4])
def test_the_dct_scales_decode_at_the_eighths_they_name(eighths: int) -> None:
    """The scale ``jpeg_decoders.py --dct-scales`` times is the one it names, its pixels whole."""
    import pyvips

    from bench.images import photo
    from bench.jpeg_decoders import decode_eighths

    data = bytes(photo(800, 600).jpegsave_buffer(Q=90))
    decoded = decode_eighths(data, eighths)
    assert decoded.size == (100 * eighths, 75 * eighths)
    reference = pyvips.Image.new_from_buffer(data, "").resize(eighths / 8)
    ours = pyvips.Image.new_from_memory(decoded.tobytes(), *decoded.size, 3, "uchar")
    assert (ours - reference).abs().avg() < 4  # the image, not garbage


def test_render_ahead_sets_decode_at_the_scales_it_says() -> None:
    """bench/render_ahead.py's two sets share as many decodes as the table says
    (three scales, one), and one decode gives the separate renders' bytes."""
    from bench.images import photo
    from bench.render_ahead import CASES as AHEAD_CASES
    from bench.render_ahead import one_decode, separate

    data = bytes(photo(2000, 1333).jpegsave_buffer(Q=90))
    typical, one_scale = AHEAD_CASES.values()
    assert one_decode(data, typical)[1] == 3
    made, decodes = one_decode(data, one_scale)
    assert decodes == 1
    assert made == separate(data, one_scale)


# --- bench/node_memory.py, bench/s3_requests.py and the S3 and Redis servers' settings ---


def test_bench_settings_offer_s3_storages_and_a_redis_cache_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import runpy

    from bench import servers

    path = str(Path(__file__).resolve().parent.parent / "bench" / "bench_settings.py")
    monkeypatch.setenv("OXIMG_BENCH_MEDIA_ROOT", "/nowhere")
    plain = runpy.run_path(path)
    assert set(plain["STORAGES"]) == {"default"}
    assert set(plain["CACHES"]) == {"default"}
    for name, value in servers.s3_environment("http://127.0.0.1:9", "src", "out").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OXIMG_BENCH_REDIS_URL", "unix:///nowhere/redis.sock")
    deployed = runpy.run_path(path)
    s3source, s3cache = deployed["STORAGES"]["s3source"], deployed["STORAGES"]["s3cache"]
    assert s3source["OPTIONS"]["bucket_name"] == "src"
    assert s3cache["OPTIONS"]["bucket_name"] == "out"
    assert s3cache["OPTIONS"]["endpoint_url"] == "http://127.0.0.1:9"
    coordination = deployed["CACHES"]["coordination"]
    assert coordination["LOCATION"] == "unix:///nowhere/redis.sock"
    assert coordination["OPTIONS"]["socket_timeout"] > 0  # oximg.W010


def test_load_gives_the_before_server_its_own_settings_and_may_start_redis() -> None:
    from bench.load import parse_args

    args = parse_args(["--before-settings", '{"COORDINATION_CACHE": "coordination"}', "--redis"])
    assert args.before_settings == {"COORDINATION_CACHE": "coordination"}
    assert args.redis
    defaults_ = parse_args([])
    assert (defaults_.before_settings, defaults_.redis) == (None, False)


def test_node_memory_misses_are_distinct_sizes_of_the_photos_in_turn() -> None:
    from bench.node_memory import PHOTOS, distinct_misses

    paths = distinct_misses(96, "t")
    assert len(set(paths)) == 96
    widths = [int(path.split("/rs:fit:")[1].split(":")[0]) for path in paths]
    assert len(set(widths)) == 96
    assert min(widths) >= 300 and max(widths) <= 500
    names = list(PHOTOS)
    assert [names.index(path.split("/plain/")[1].split("@")[0]) for path in paths[:4]] == [
        0,
        1,
        2,
        0,
    ]


def test_node_memory_compares_each_runs_peak_with_the_deployment_formula() -> None:
    from bench.node_memory import limit_mib, table

    assert limit_mib(120.0, 256) == 476.0
    run = {"hits_rss": 130.0, "misses_rss": 140.0, "threads": 68.0, "hits": {}, "misses": {}}
    runs = [
        {**run, "idle_rss": 100.0, "peak": 150.0},
        {**run, "idle_rss": 110.0, "peak": 500.0},  # over 110 + 256 + 100
        {**run, "idle_rss": 120.0, "peak": 160.0},
    ]
    (row,) = table({"oximg": runs}, 256)[2:]
    cells = [cell.strip() for cell in row.split("|")[1:-1]]
    assert cells[0] == "oximg"
    assert cells[1] == "110 (100-120)"  # idle
    assert cells[5] == "50 (40-390)"  # peak - idle
    assert cells[6] == "466 (456-476)"
    assert cells[7] == "2 of 3"


def test_s3_requests_are_counted_by_bucket_and_method() -> None:
    from bench.s3_requests import classify, metric_value

    log = [
        ("GET", "/src/photos/p0.jpg"),
        ("GET", "/out/ab/cd/key.jpg"),
        ("GET", "/out/ab/cd/key.jpg"),
        ("PUT", "/out/ab/cd/key.jpg"),
        ("HEAD", "/out/ab/cd/key.jpg"),
        ("GET", "/out"),  # a bucket operation (ListObjects)
        ("GET", "/elsewhere/x.jpg"),
    ]
    counts = classify(log, "src", "out")
    assert counts == {
        ("source", "GET"): 1,
        ("cache", "GET"): 2,
        ("cache", "PUT"): 1,
        ("cache", "HEAD"): 1,
        ("other", "GET"): 2,
    }
    text = (
        "# HELP oximg_cache_hits_total Requests found\n"
        "oximg_cache_hits_total 3.0\n"
        "oximg_cache_hits_created 1.7e9\n"
        "oximg_cache_misses_total 21.0\n"
    )
    assert metric_value(text, "oximg_cache_hits") == 3.0
    assert metric_value(text, "oximg_cache_misses") == 21.0
    assert metric_value(text, "oximg_renders") == 0.0


# --- bench/page_bytes.py: a page's bytes from the browser's records ---------------


def page_visit(images: list[tuple[str, int, int, int, str]], html: int = 3000) -> dict[str, Any]:
    """A visit's records: (url, transferSize, encodedBodySize, wire status, MIME) per image.

    The images in page order; a cache hit's ``transferSize`` (and bytes received) is 0.
    """
    resources = [
        {"name": url, "initiatorType": "img", "transferSize": sent, "encodedBodySize": body}
        for url, sent, body, _status, _mime in images
    ]
    responses = [
        {"url": url, "status": status, "mimeType": mime, "encodedDataLength": sent}
        for url, sent, _body, status, mime in images
    ]
    navigation = {
        "name": "http://127.0.0.1:1/",
        "initiatorType": "navigation",
        "transferSize": html + 300,
        "encodedBodySize": html,
        "loadMs": 120.5,
    }
    page = {"url": navigation["name"], "status": 200, "mimeType": "text/html"}
    return {
        "navigation": navigation,
        # Resource Timing lists requests as they started, not in page order.
        "resources": resources[::-1],
        "responses": [*responses, {**page, "encodedDataLength": html + 250}],
        "images": [{"src": url, "width": 10, "height": 10} for url, *_ in images],
    }


def test_page_bytes_summary_counts_the_cache_revalidations_bytes_and_formats() -> None:
    from bench.page_bytes import summarize

    visit = page_visit(
        [
            ("/img/a.avif", 10_300, 10_000, 200, "image/avif"),
            ("/img/b.webp", 5_300, 5_000, 200, "image/webp"),
            ("/media/c.jpg", 300, 7_000, 304, "image/jpeg"),
            ("/img/d.png", 0, 4_000, 200, "image/png"),
            ("/img/e.avif", 4_300, 4_000, 200, "image/avif"),
        ]
    )
    assert summarize(visit, photos=3) == {
        "requests": 6,
        "from_cache": 1,
        "revalidated": 1,
        "wire_bytes": 3250 + 10_300 + 5_300 + 300 + 4_300,
        "image_bytes": 30_000,
        "photo_bytes": 22_000,
        "graphic_bytes": 8_000,
        "html_bytes": 3000,
        "images": 5,
        "photo_formats": {"avif": 1, "jpeg": 1, "webp": 1},
        "graphic_formats": {"avif": 1, "png": 1},
        "load_ms": 120.5,
    }


def test_page_bytes_ratios_pair_contenders_within_a_round_and_skip_the_refused() -> None:
    from bench.page_bytes import ratios, summarize, table

    def result(body: int) -> dict[str, Any]:
        photo = ("/i.avif", body + 300, body, 200, "image/avif")
        graphic = ("/g.png", 1300, 1000, 200, "image/png")
        cached = [(url, 0, size, status, mime) for url, _, size, status, mime in (photo, graphic)]
        first = summarize(page_visit([photo, graphic], 3050), photos=1)
        repeat = summarize(page_visit(cached, 3050), photos=1)
        # The server's CPU during each visit, here in proportion to the photo's bytes.
        return {
            "first": {**first, "server_cpu_s": body / 10_000},
            "repeat": {**repeat, "server_cpu_s": 0.001},
        }

    rounds = [
        {"oximg-auto": result(2_000), "sorl": result(9_000), "oximg-best": {"skipped": "no"}},
        {"oximg-auto": result(4_000), "sorl": result(5_000), "oximg-best": {"skipped": "no"}},
    ]
    assert ratios(rounds, "oximg-auto", "first", "server_cpu_s") == pytest.approx([2 / 9, 4 / 5])
    assert ratios(rounds, "oximg-auto", "first", "photo_bytes") == [2_000 / 9_000, 4_000 / 5_000]
    assert ratios(rounds, "oximg-best", "first", "photo_bytes") == []
    lines = table(rounds, ["oximg-auto", "oximg-best", "sorl"]).splitlines()
    assert len(lines) == 2 + 4  # header, rule, two visits of each contender that ran
    first = [cell.strip() for cell in lines[2].split("|")[1:-1]]
    assert first[0] == 'django-oximg format="auto"'
    assert first[2] == "3 (0 / 0)"
    # Received: 3050 + 250 for the page, 300 more than each image's body.
    assert first[3] == "7.9"  # KB, the median of 6900 and 8900 bytes
    assert first[4] == "0.70 (0.50-0.90)"  # 6900 / 13900 and 8900 / 9900
    assert first[5] == "3.0"  # KB of photos, the median of 2000 and 4000
    assert first[6] == "1.0"
    assert first[7] == "1 avif; 1 png"
    assert first[9] == "0.30"  # server CPU s, the median of 0.2 and 0.4
    repeat = [cell.strip() for cell in lines[3].split("|")[1:-1]]
    assert repeat[2] == "3 (2 / 0)"
    assert repeat[3] == "3.3"
