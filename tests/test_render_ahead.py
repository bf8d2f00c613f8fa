"""Declared sizes rendered ahead in a background task (django_oximg/render_ahead/).

The end-to-end tests run docs/render-ahead.md's example as it is written: a
project made of its model and settings blocks, migrated, a photo saved in one
process, django-tasks-db's ``db_worker`` in another rendering its sizes, and
gunicorn serving the URLs the docs' template writes, each of whose first
requests must be a hit (``/img/metrics`` counts no render). The rest runs in
this process, with the dummy task backend, which records what is enqueued;
the last part renders ahead with core thumbnailers under a 64 MiB memory
budget and asks the same thumbnailer for each size afterwards.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pyvips
from django.core.files.base import ContentFile
from django.db import connections, transaction
from django.template import Context, Template, TemplateSyntaxError

from django_oximg import conf, runtime
from django_oximg.arguments import tag_options
from django_oximg.core import pipeline
from django_oximg.core.errors import SourceTooLarge
from django_oximg.core.keys import source_directory
from django_oximg.core.pipeline.batch import BatchStats
from django_oximg.core.serving.handler import Thumbnailer
from django_oximg.core.serving.staging import RenderWork, SourceRead, StagedRender
from django_oximg.core.stores.disk import FileSystemCacheStore, FileSystemSourceStore
from django_oximg.declared_sizes import parse_size
from django_oximg.render_ahead import tasks
from django_oximg.render_ahead.rendering import AheadOutcome, AheadRequest, render_ahead
from django_oximg.thumbnails import get_thumbnail
from tests import bombs, images
from tests.constants import MIB, SIGNER
from tests.servers import STOP_TIMEOUT, request, without_control_socket
from tests.test_thumbnailer import get
from tests.testapp.models import Document

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS_PAGE = REPO_ROOT / "docs" / "render-ahead.md"

#: Bounds on the subprocesses: generous, the machine is shared.
COMMAND_TIMEOUT = 120.0
RESULTS_TIMEOUT = 90.0

DJANGO = (sys.executable, "-m", "django")

#: The task backends recording what is enqueued (django.tasks on Django 6).
TASKS_MODULE = "django.tasks" if importlib.util.find_spec("django.tasks") else "django_tasks"
DUMMY_BACKEND = f"{TASKS_MODULE}.backends.dummy.DummyBackend"
IMMEDIATE_BACKEND = f"{TASKS_MODULE}.backends.immediate.ImmediateBackend"


def docs_block(start: str, language: str = "python") -> str:
    """The one code block of docs/render-ahead.md whose first line is ``start``."""
    found = re.findall(rf"```{language}\n({re.escape(start)}\n.*?)```", DOCS_PAGE.read_text(), re.S)
    assert len(found) == 1, (start, found)
    return str(found[0])


# -- the docs' example, end to end, with a real worker process -------------------------


#: What the test project has around the docs' blocks: a database file, media,
#: the URLconf and WSGI file, and quick retries (three attempts in all).
PROJECT_SETTINGS_HEAD = """\
import os

SECRET_KEY = "render-ahead-tests"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["AHEAD_DB"]}
}
MEDIA_ROOT = os.environ["AHEAD_MEDIA"]
MEDIA_URL = "/media/"
ROOT_URLCONF = "mysite.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
LOGGING = {
    "version": 1,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django_oximg": {"handlers": ["stderr"], "level": "INFO"}},
}
"""
PROJECT_SETTINGS_TAIL = """
OXIMG.update(
    METRICS=True,
    WORKERS=1,
    RENDER_AHEAD_RETRIES=2,
    RENDER_AHEAD_RETRY_DELAY=0.2,
    KEY="ab" * 32,
    SALT="cd" * 16,
)
SILENCED_SYSTEM_CHECKS = ["oximg.W008"]
"""
PROJECT_FILES = {
    "mysite/__init__.py": "",
    "mysite/urls.py": (
        "from django.urls import include, path\n\n"
        'urlpatterns = [path("img/", include("django_oximg.urls"))]\n'
    ),
    "mysite/wsgi.py": (
        "from django.core.wsgi import get_wsgi_application\n\n"
        "application = get_wsgi_application()\n"
    ),
    "gallery/__init__.py": "",
}

#: Run in the project by ``manage.py shell``: save a photo from an upload, as a
#: form would, and write down what the docs' template writes for it.
SAVE_PHOTO = """
import json, sys
from django.core.files.base import ContentFile
from django.template import Context, Template
from gallery.models import Photo

photo = Photo()
photo.image.save(sys.argv[1], ContentFile(open(sys.argv[2], "rb").read()))
pages = {}
for name in ("thumb", "card", "large"):
    pages[name] = Template(sys.argv[3].replace('"card"', f'"{name}"')).render(
        Context({"photo": photo})
    )
print(json.dumps({
    "pk": photo.pk,
    "name": photo.image.name,
    "pages": pages,
    "rendered_here": "pyvips" in sys.modules,
}))
"""


@dataclass
class Project:
    root: Path
    media: Path
    env: dict[str, str]
    worker_log: Path

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*DJANGO, *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    def save_photo(self, name: str, data: bytes) -> dict[str, Any]:
        upload = self.root / "upload.bin"
        upload.write_bytes(data)
        template = docs_block("{% load oximg %}", "django")
        script = self.root / "save_photo.py"
        script.write_text(
            "import sys\nsys.argv = sys.argv[:1] + "
            + repr([name, str(upload), template])
            + "\n"
            + SAVE_PHOTO
        )
        result = self.manage("shell", "-c", script.read_text())
        return dict(json.loads(result.stdout.strip().splitlines()[-1]))

    def results(self) -> set[Path]:
        """Every file in the result cache (temporary files included)."""
        cache = self.media / "oximg"
        return {path for path in cache.rglob("*") if path.is_file()} if cache.exists() else set()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    """The docs' example as a project, migrated, with ``db_worker`` running; stopped after."""
    root = tmp_path_factory.mktemp("render-ahead")
    for name, text in PROJECT_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "gallery" / "models.py").write_text(docs_block("# gallery/models.py"))
    settings_block = docs_block("# mysite/settings.py, beside your own settings")
    (root / "mysite" / "settings.py").write_text(
        PROJECT_SETTINGS_HEAD + settings_block + PROJECT_SETTINGS_TAIL
    )
    media = root / "media"
    media.mkdir()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "mysite.settings",
        "PYTHONPATH": os.pathsep.join([str(root), str(REPO_ROOT)]),
        "AHEAD_DB": str(root / "db.sqlite3"),
        "AHEAD_MEDIA": str(media),
    }
    found = Project(root, media, env, root / "worker.log")
    found.manage("makemigrations", "gallery", "-v", "0")
    found.manage("migrate", "-v", "0")
    with found.worker_log.open("wb") as log:
        worker = subprocess.Popen(
            [*DJANGO, "db_worker", "--interval", "0.1", "--no-startup-delay", "--no-reload", "-v2"],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield found
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def wait_for(condition: Callable[[], bool], what: str, log: Path) -> None:
    deadline = time.monotonic() + RESULTS_TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no {what} in {RESULTS_TIMEOUT:g} s; worker log:\n" + log.read_text()
            )
        time.sleep(0.1)


@dataclass
class Served:
    base: str
    process: subprocess.Popen[bytes]


def gunicorn(project: Project) -> Served:
    """gunicorn serving the project (one worker) on a socket bound here."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    with listener, (project.root / "gunicorn.log").open("wb") as log:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "gunicorn", "--bind", f"fd://{listener.fileno()}"),
                *("--workers", "1", "--threads", "2", *without_control_socket(), "mysite.wsgi"),
            ],
            cwd=project.root,
            env=project.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(listener.fileno(),),
        )
        port = listener.getsockname()[1]
    served = Served(f"http://127.0.0.1:{port}", process)
    deadline = time.monotonic() + COMMAND_TIMEOUT
    while True:
        try:
            request(served.base + "/img/health", timeout=5.0)
            return served
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop(served)
                raise
            time.sleep(0.1)


def stop(served: Served) -> None:
    served.process.terminate()
    try:
        served.process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        served.process.kill()
        served.process.wait()


def image_src(page: str) -> tuple[str, int, int]:
    """The ``src``, ``width`` and ``height`` of the page's one ``<img>``."""
    found = re.search(r'<img src="([^"]+)" width="(\d+)" height="(\d+)"', page)
    assert found, page
    return found[1].replace("&amp;", "&"), int(found[2]), int(found[3])


def renders_counted(base: str) -> float:
    metrics = request(base + "/img/metrics").body.decode()
    found = re.search(r"^oximg_renders(?:_total)? (\S+)$", metrics, re.M)
    assert found, metrics
    return float(found[1])


def test_the_docs_example_renders_every_size_ahead_and_the_first_requests_hit(
    project: Project,
) -> None:
    before = project.results()
    saved = project.save_photo("lake.jpg", images.jpeg(2000, 1333))
    assert not saved["rendered_here"], "the saving process imported the image pipeline"
    # The task's own last word, logged once every result is stored: counting
    # files instead could see two results and the next one's temporary file.
    source = re.escape(saved["name"])
    finished = rf"rendered ahead \d+ size\(s\) of {source} |render ahead of {source} .*(fail|skip)"
    wait_for(lambda: bool(re.search(finished, log_text(project))), "end", project.worker_log)
    assert f"rendered ahead 3 size(s) of {saved['name']} " in log_text(project)
    made = project.results() - before
    assert len(made) == 3 and all(path.suffix in (".jpeg", ".webp") for path in made), made
    served = gunicorn(project)
    try:
        for name in ("thumb", "card", "large"):
            src, width, height = image_src(saved["pages"][name])
            answer = request(served.base + src)
            assert answer.status == 200, (name, answer.body[:200])
            image = pyvips.Image.new_from_buffer(answer.body, "")
            assert (image.width, image.height) == (width, height), name
        assert {(n, image_src(saved["pages"][n])[1:]) for n in ("thumb", "card", "large")} == {
            ("thumb", (160, 160)),
            ("card", (400, 300)),
            ("large", (1200, 800)),
        }
        assert renders_counted(served.base) == 0  # every first request was a hit
    finally:
        stop(served)
    assert project.results() - before == made  # and nothing was rendered again


def test_a_broken_upload_is_saved_logged_retried_and_leaves_nothing_cached(
    project: Project,
) -> None:
    before = project.results()
    data = images.jpeg(1600, 1000)
    saved = project.save_photo("broken.jpg", data[: len(data) // 3])
    assert saved["pk"]  # the save succeeded
    name = saved["name"]
    wait_for(
        lambda: re.search(rf"{re.escape(name)} .*attempt 3 of 3.*giving up", log_text(project)),
        "final attempt",
        project.worker_log,
    )
    log = log_text(project)
    for attempt in (1, 2):
        assert re.search(
            rf"{re.escape(name)} .*failed \(attempt {attempt} of 3\): InvalidImage", log
        ), log
    assert project.results() == before  # nothing partial, no temporary file
    query = (
        f"from gallery.models import Photo; print(Photo.objects.filter(pk={saved['pk']}).count())"
    )
    assert project.manage("shell", "-c", query).stdout.split()[-1] == "1"


def log_text(project: Project) -> str:
    return project.worker_log.read_text(errors="replace")


# -- in this process: declarations, the tag, the hooks, the checks ----------------------


@pytest.fixture
def declared_scans(settings: Any, media: Path) -> Path:
    """``testapp.Document.scan`` with declared sizes, and the dummy task backend."""
    settings.TASKS = {"default": {"BACKEND": DUMMY_BACKEND}}
    settings.OXIMG = {
        **settings.OXIMG,
        "PRESETS": {"small": "rs:fit:90:90", "testapp.Document.scan.small": "rs:fit:80:80"},
        "RENDER_AHEAD": {
            "testapp.Document.scan": {"small": "small", "card": "200x150 crop=center quality=70"}
        },
    }
    return media


def enqueued() -> list[Any]:
    from django_oximg.render_ahead.tasks import task_backends

    return list(task_backends["default"].results)


@pytest.fixture
def no_connection_left(django_db_blocker: Any) -> Iterator[None]:
    yield
    with django_db_blocker.unblock():
        connections.close_all()


@pytest.mark.django_db
def test_a_new_file_is_enqueued_after_commit_and_nothing_rendered(
    declared_scans: Path, django_capture_on_commit_callbacks: Any, no_connection_left: None
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        document = Document.objects.create(scan="photos/landscape.jpg")
        assert enqueued() == []  # not before the commit
    assert len(callbacks) == 1
    [result] = enqueued()
    assert result.args == ["testapp.Document", document.pk, "scan", "photos/landscape.jpg", 1]
    assert not (declared_scans / "oximg").exists()


@pytest.mark.django_db
def test_a_replaced_file_is_purged_before_the_new_one_is_enqueued(
    declared_scans: Path, django_capture_on_commit_callbacks: Any, no_connection_left: None
) -> None:
    document = Document.objects.create(scan="photos/landscape.jpg")
    old = get_thumbnail("photos/landscape.jpg", "50")
    runtime.get_thumbnailer().reply("/" + old.url.removeprefix("/img/"), "GET", {})
    old_directory = declared_scans / "oximg" / source_directory("photos/landscape.jpg")
    assert any(old_directory.iterdir())
    order = []
    original_enqueue = tasks.enqueue

    def enqueue(*args: Any) -> None:
        order.append(("enqueue", any(old_directory.iterdir()) if old_directory.exists() else False))
        original_enqueue(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tasks, "enqueue", enqueue)
        with django_capture_on_commit_callbacks(execute=True):
            document.scan.save("other.jpg", ContentFile(images.jpeg(300, 200)))
    assert order == [("enqueue", False)]  # the old results were gone when it was enqueued
    assert enqueued()[-1].args[3] == document.scan.name


@pytest.mark.django_db
def test_a_rolled_back_save_enqueues_nothing(
    declared_scans: Path, django_capture_on_commit_callbacks: Any, no_connection_left: None
) -> None:
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        Document.objects.create(scan="photos/landscape.jpg")
        raise RuntimeError("rolled back")
    assert callbacks == []
    assert enqueued() == []


@pytest.mark.django_db
def test_saves_that_leave_the_file_alone_enqueue_nothing(
    declared_scans: Path, django_capture_on_commit_callbacks: Any, no_connection_left: None
) -> None:
    document = Document.objects.create(scan="photos/landscape.jpg")
    count = len(enqueued())
    with django_capture_on_commit_callbacks(execute=True):
        document.save()
        Document.objects.get(pk=document.pk).save(update_fields=[])
        Document.objects.create()  # no file
    assert len(enqueued()) == count


def test_the_tag_and_get_thumbnail_take_a_declared_size_by_name(declared_scans: Path) -> None:
    document = Document(scan="photos/landscape.jpg")
    card = get_thumbnail(document.scan, "card")
    assert card == get_thumbnail(document.scan, "200x150", crop="center", quality=70)
    assert (card.width, card.height) == (200, 150)
    # The preset is looked up in the field's scope first, as the tag does.
    small = get_thumbnail(document.scan, "small")
    assert (small.width, small.height) == (80, 60)
    # The call's own keywords win over the declared size's.
    assert get_thumbnail(document.scan, "card", quality=50).url != card.url
    page = Template(
        '{% load oximg %}{% thumbnail d.scan "card" as t %}{{ t.width }}{% endthumbnail %}'
    )
    assert page.render(Context({"d": document})) == "200"
    with pytest.raises(TemplateSyntaxError, match="bad geometry"):
        Template('{% load oximg %}{% thumbnail d.scan "cart" as t %}{% endthumbnail %}')


@pytest.mark.django_db
def test_render_ahead_in_the_task_is_what_the_requests_get(
    declared_scans: Path, no_connection_left: None
) -> None:
    """The task body run here: the results land under the requests' keys, then a retry
    renders nothing and the requests are hits."""
    document = Document.objects.create(scan="photos/landscape.jpg")
    assert tasks.run("testapp.Document", document.pk, "scan", document.scan.name, 1) == {
        "rendered": 2,
        "cached": 0,
        "refused": 0,
        "decodes": 2,
    }
    again = tasks.run("testapp.Document", document.pk, "scan", document.scan.name, 2)
    assert again == {"rendered": 0, "cached": 2, "refused": 0, "decodes": 0}
    thumbnailer = runtime.get_thumbnailer()
    renders = thumbnailer.renders
    for name in ("small", "card"):
        thumbnail = get_thumbnail(document.scan, name)
        reply = thumbnailer.reply("/" + thumbnail.url.removeprefix("/img/"), "GET", {})
        assert reply.status == 200
        if reply.file is not None:
            reply.file.close()
    assert thumbnailer.renders == renders


@pytest.mark.django_db
def test_a_row_whose_file_changed_since_is_skipped(
    declared_scans: Path, no_connection_left: None
) -> None:
    document = Document.objects.create(scan="photos/landscape.jpg")
    assert tasks.run("testapp.Document", document.pk, "scan", "photos/old.jpg", 1) == {
        "rendered": 0,
        "cached": 0,
    }
    assert not (declared_scans / "oximg").exists()


@pytest.mark.django_db
def test_a_missing_source_fails_the_task_and_enqueues_a_retry(
    declared_scans: Path, no_connection_left: None, caplog: Any
) -> None:
    document = Document.objects.create(scan="photos/missing.jpg")
    with pytest.raises(tasks.RenderAheadFailed):
        tasks.run("testapp.Document", document.pk, "scan", "photos/missing.jpg", 1)
    [retry] = enqueued()  # the create's own enqueue waits for a commit that never comes
    assert retry.args == ["testapp.Document", document.pk, "scan", "photos/missing.jpg", 2]
    assert retry.task.run_after is not None
    assert "failed (attempt 1 of 4)" in caplog.text
    assert "trying again in 30 s" in caplog.text


def test_the_settings_block_of_the_docs_is_valid() -> None:
    block = docs_block('OXIMG = {\n    "RENDER_AHEAD": {')
    namespace: dict[str, Any] = {}
    exec(block, namespace)
    built = conf.build_settings(namespace["OXIMG"])
    assert set(built.RENDER_AHEAD) == {"gallery.Photo.image", "shop.Product.picture"}


def test_the_searched_best_format_size_of_the_docs_is_what_the_tag_takes() -> None:
    """docs/render-ahead.md's size with ``format=best autoquality=dssim``."""
    namespace: dict[str, Any] = {"OXIMG": {}}
    exec(docs_block('OXIMG["RENDER_AHEAD"] = {'), namespace)
    built = conf.build_settings(namespace["OXIMG"])
    [(name, text)] = built.RENDER_AHEAD["gallery.Photo.image"]
    size = parse_size(text, name)
    options = tag_options(size.geometry, dict(size.keywords))
    assert (name, options.format, options.autoquality.method) == ("card", "best", "dssim")


# -- in this process, the core: within the memory budget, as requests ------------------

BUDGET = 64 * MIB

#: Declared sizes of a 49 MP progressive JPEG: every one holds the whole
#: coefficient buffer (over 150 MiB), so each is over a 64 MiB budget.
LARGE_JPEG_SIZES = [
    "/rs:fill:160:160/g:sm/plain/large.jpg@jpeg",
    "/rs:fill:400:300/g:ce/plain/large.jpg@jpeg",
    "/w:800/plain/large.jpg@jpeg",
    "/w:1200/q:70/plain/large.jpg@webp",
    "/c:3000:3000/w:300/plain/large.jpg@jpeg",
]
#: Animated sizes of 12 frames of 2000 x 2000: each over a 64 MiB budget too.
ANIMATION_SIZES = [
    "/w:200/plain/frames.gif@gif",
    "/w:400/plain/frames.gif@gif",
    "/w:300/plain/frames.gif@webp",
]
#: Sizes of one 1600 x 1200 JPEG whose requests decode it at one DCT scale.
ONE_SCALE_SIZES = [
    "/w:300/plain/photos/photo.jpg@jpeg",
    "/rs:fill:320:240/g:ce/plain/photos/photo.jpg@jpeg",
    "/w:280/q:50/plain/photos/photo.jpg@webp",
]


@pytest.fixture(scope="module")
def large_sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 49 MP progressive JPEG and a 12-frame 2000 x 2000 GIF, made once (about 1 s)."""
    root = tmp_path_factory.mktemp("large-sources")
    (root / "large.jpg").write_bytes(bombs.progressive_jpeg(7000, 7000))
    (root / "frames.gif").write_bytes(bombs.gif_animation(2000, 2000, 12))
    return root


def ahead(thumbnailer: Thumbnailer, paths: list[str]) -> AheadOutcome:
    return render_ahead(thumbnailer, [AheadRequest(SIGNER.signed_path(path)) for path in paths])


def key_of(thumbnailer: Thumbnailer, path: str) -> str:
    return thumbnailer.job_for(SIGNER.signed_path(path), "").key


def stored(cache_dir: Path) -> set[Path]:
    """Every file in the result cache (temporary files included)."""
    return (
        {path for path in cache_dir.rglob("*") if path.is_file()} if cache_dir.exists() else set()
    )


def cached_bytes(thumbnailer: Thumbnailer, path: str) -> bytes | None:
    found = thumbnailer.cache.get(key_of(thumbnailer, path))
    return None if found is None or found.path is None else Path(found.path).read_bytes()


def request_costs(thumbnailer: Thumbnailer, data: bytes, paths: list[str]) -> list[int]:
    """What each path's request reserves from the budget (its staged render's cost)."""
    source = SourceRead(data, pipeline.probe(data))
    costs = []
    for path in paths:
        work = thumbnailer.job_for(SIGNER.signed_path(path), "").work
        assert isinstance(work, RenderWork)
        staged = work.stage(source, thumbnailer.maker.limits, lambda seconds: None)
        assert isinstance(staged, StagedRender)
        costs.append(staged.cost)
    return costs


@pytest.mark.parametrize(
    "paths", [LARGE_JPEG_SIZES, ANIMATION_SIZES], ids=["49mp-progressive-jpeg", "12-frame-gif"]
)
def test_sizes_over_the_memory_budget_are_refused_and_their_requests_still_get_422(
    make: Callable[..., Thumbnailer], large_sources: Path, cache_dir: Path, paths: list[str]
) -> None:
    thumbnailer = make(source=FileSystemSourceStore(large_sources), budget=BUDGET)
    outcome = ahead(thumbnailer, paths)
    assert stored(cache_dir) == set()  # nothing under a final key, no temporary file
    assert thumbnailer.executor.stats().peak_reserved_bytes == 0  # refused before any reservation
    assert (outcome.rendered, outcome.failures) == (0, [])
    assert {key for key, _ in outcome.refused} == {key_of(thumbnailer, path) for path in paths}
    for _, error in outcome.refused:
        assert isinstance(error, SourceTooLarge)
        assert "exceeds the memory budget" in error.detail, error.detail
    for path in paths:
        assert get(thumbnailer, path).status == 422, path  # not 200 from the cache
    assert stored(cache_dir) == set()
    assert thumbnailer.executor.stats().peak_reserved_bytes <= BUDGET


def test_sizes_of_one_decode_reserve_more_than_one_render_and_store_the_requests_bytes(
    make: Callable[..., Thumbnailer], source_dir: Path, tmp_path: Path
) -> None:
    data = images.jpeg(1600, 1200)
    (source_dir / "photos" / "photo.jpg").write_bytes(data)
    thumbnailer = make(budget=BUDGET)
    costs = request_costs(thumbnailer, data, ONE_SCALE_SIZES)
    outcome = ahead(thumbnailer, ONE_SCALE_SIZES)
    # One reservation for the three: above any one size's, within the budget.
    peak = thumbnailer.executor.stats().peak_reserved_bytes
    assert max(costs) < peak <= min(sum(costs), BUDGET)
    assert outcome.stats == BatchStats(shared_decodes=1, shared=3, separate=0)
    assert (outcome.rendered, outcome.refused, outcome.failures) == (3, [], [])
    requests = make(cache=FileSystemCacheStore(tmp_path / "requests"))
    for path in ONE_SCALE_SIZES:
        assert cached_bytes(thumbnailer, path) == get(requests, path).body, path
    assert requests.renders == len(ONE_SCALE_SIZES)


def test_sizes_that_fit_the_budget_alone_but_not_together_get_decodes_of_their_own(
    make: Callable[..., Thumbnailer], source_dir: Path, tmp_path: Path
) -> None:
    data = images.jpeg(1600, 1200)
    (source_dir / "photos" / "photo.jpg").write_bytes(data)
    costs = request_costs(make(), data, ONE_SCALE_SIZES)
    thumbnailer = make(budget=max(costs))  # the costliest alone fits, exactly
    outcome = ahead(thumbnailer, ONE_SCALE_SIZES)
    assert thumbnailer.executor.stats().peak_reserved_bytes == max(costs)
    assert outcome.stats == BatchStats(shared_decodes=3, shared=3, separate=0)
    assert (outcome.rendered, outcome.refused, outcome.failures) == (3, [], [])
    requests = make(cache=FileSystemCacheStore(tmp_path / "requests"))
    for path in ONE_SCALE_SIZES:
        assert cached_bytes(thumbnailer, path) == get(requests, path).body, path


def test_each_result_is_stored_under_its_own_key_when_sizes_before_it_are_refused(
    make: Callable[..., Thumbnailer], source_dir: Path, tmp_path: Path
) -> None:
    """Refused by the budget, then made, then refused by a limit at planning, then made:
    nothing under a refused size's key, each made size's bytes under its own."""
    landscape = "plain/photos/landscape.jpg"
    over_budget, small, over_limit, smaller = (
        f"/w:4000/el:1/{landscape}@jpeg",
        f"/w:200/{landscape}@jpeg",
        f"/msr:0.1/w:150/{landscape}@jpeg",
        f"/w:120/{landscape}@png",
    )
    paths = [over_budget, small, over_limit, smaller]
    data = (source_dir / "photos" / "landscape.jpg").read_bytes()
    costs = request_costs(make(), data, [small, smaller])
    thumbnailer = make(budget=2 * max(costs))
    outcome = ahead(thumbnailer, paths)
    assert outcome.rendered == 2
    assert [key for key, _ in outcome.refused] == [
        key_of(thumbnailer, over_limit),
        key_of(thumbnailer, over_budget),
    ]
    assert cached_bytes(thumbnailer, over_budget) is None
    assert cached_bytes(thumbnailer, over_limit) is None
    requests = make(cache=FileSystemCacheStore(tmp_path / "requests"))
    for path in (small, smaller):
        assert cached_bytes(thumbnailer, path) == get(requests, path).body, path
    for path in (over_budget, over_limit):
        assert get(thumbnailer, path).status == 422, path


@pytest.mark.django_db
def test_the_task_reports_sizes_over_the_budget_as_refused_and_does_not_retry_them(
    declared_scans: Path,
    large_sources: Path,
    settings: Any,
    no_connection_left: None,
    caplog: Any,
) -> None:
    settings.OXIMG = {**settings.OXIMG, "MEMORY_BUDGET": BUDGET}
    name = "photos/large.jpg"
    (declared_scans / name).write_bytes((large_sources / "large.jpg").read_bytes())
    document = Document.objects.create(scan=name)
    counts = tasks.run("testapp.Document", document.pk, "scan", name, 1)
    assert counts == {"rendered": 0, "cached": 0, "refused": 2, "decodes": 0}
    assert enqueued() == []  # no retry (the create's own enqueue waits for a commit)
    assert "refused 2 size(s)" in caplog.text
    assert "exceeds the memory budget" in caplog.text
    assert not (declared_scans / "oximg").exists()
    thumbnailer = runtime.get_thumbnailer()
    for size in ("small", "card"):
        url = get_thumbnail(document.scan, size).url
        reply = thumbnailer.reply("/" + url.removeprefix("/img/"), "GET", {})
        assert reply.status == 422, size
    assert not (declared_scans / "oximg").exists()
