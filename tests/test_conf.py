"""OXIMG settings: defaults, validation, the derived key, rebuilds, the reference."""

from __future__ import annotations

import base64
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_oximg import conf, runtime, storage
from django_oximg.conf import OximgSettings, build_settings, get_settings
from django_oximg.core.keys import output_fingerprint
from django_oximg.core.serving.client_hints import ClientHints
from django_oximg.settings_reference import field_docs, settings_reference
from tests import images
from tests.constants import KEY, SALT

REPO_ROOT = Path(__file__).resolve().parent.parent
SETTINGS_DOC = REPO_ROOT / "docs" / "settings.md"

OTHER_KEY = "aa" * 32
OTHER_SALT = "bb" * 16


def with_key(**raw: Any) -> dict[str, Any]:
    return {"KEY": KEY, "SALT": SALT, **raw}


# -- defaults -------------------------------------------------------------------


def test_defaults_are_the_documented_ones() -> None:
    built = build_settings(with_key())
    assert built.KEY == (KEY,)
    assert built.SALT == (SALT,)
    assert built.SIGNATURE_SIZE == 32
    assert built.ALLOW_UNSIGNED is False
    assert built.URL_PREFIX == "/img/"
    assert built.SOURCE_STORAGE == "default"
    assert dict(built.SOURCES) == {}
    assert built.CACHE_STORAGE == ""
    assert built.CACHE_FSYNC is True
    assert built.QUEUE_TIMEOUT == 5.0
    assert built.RENDER_TIMEOUT == 10.0
    assert built.MAX_SRC_RESOLUTION == 50_000_000
    assert built.MAX_SRC_FILE_SIZE == 50 * 1024 * 1024
    assert built.MAX_ANIMATION_FRAMES == 100
    assert built.MAX_RESULT_DIMENSION == 8192
    assert dict(built.QUALITY) == {"jpeg": 80, "webp": 75, "avif": 65}
    assert built.AUTO_FORMAT is True
    assert dict(built.PRESETS) == {}
    assert built.CACHE_CONTROL == "public, max-age=31536000, immutable"
    assert dict(built.TAG_DEFAULTS) == {}
    assert built.RAISE_TEMPLATE_ERRORS is False


def test_tag_defaults_are_kept_read_only() -> None:
    built = build_settings(with_key(TAG_DEFAULTS={"upscale": True, "sizing": "sorl"}))
    assert dict(built.TAG_DEFAULTS) == {"upscale": True, "sizing": "sorl"}
    with pytest.raises(TypeError):
        built.TAG_DEFAULTS["upscale"] = False  # type: ignore[index]


def test_every_default_passes_validation() -> None:
    """The dataclass defaults themselves (plus a key) are a valid configuration."""
    defaults = OximgSettings(KEY=(KEY,), SALT=(SALT,))
    conf._validate(defaults)


def test_the_settings_object_is_frozen() -> None:
    built = build_settings(with_key(PRESETS={"card": "q:70"}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.WORKERS = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        built.PRESETS["card"] = "q:10"  # type: ignore[index]


def test_the_test_settings_are_read(settings: Any) -> None:
    settings.OXIMG = with_key(WORKERS=3)
    assert get_settings().WORKERS == 3
    assert get_settings().KEY == (KEY,)


# -- KEY and SALT ---------------------------------------------------------------


def test_key_and_salt_as_strings_become_one_pair() -> None:
    built = build_settings({"KEY": KEY, "SALT": SALT})
    assert (built.KEY, built.SALT) == ((KEY,), (SALT,))


def test_key_and_salt_as_lists_keep_their_order_for_rotation() -> None:
    built = build_settings({"KEY": [OTHER_KEY, KEY], "SALT": [OTHER_SALT, SALT]})
    assert built.KEY == (OTHER_KEY, KEY)
    assert built.SALT == (OTHER_SALT, SALT)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"KEY": [KEY, OTHER_KEY], "SALT": [SALT]}, "number of keys"),
        ({"KEY": KEY}, "number of keys"),
        ({"KEY": "not-hex", "SALT": SALT}, "not valid hex"),
        ({"KEY": KEY, "SALT": "abc"}, "not valid hex"),
        ({"KEY": KEY, "SALT": ""}, "empty"),
        ({"KEY": 12345, "SALT": SALT}, "KEY must be"),
        ({"KEY": [KEY, 1], "SALT": [SALT, SALT]}, "KEY must be"),
    ],
)
def test_bad_keys_are_refused(raw: dict[str, Any], words: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=words):
        build_settings(raw)


def test_no_key_derives_key_and_salt_from_secret_key(settings: Any) -> None:
    first = build_settings({})
    assert len(first.KEY) == len(first.SALT) == 1
    assert first.KEY != first.SALT
    assert len(bytes.fromhex(first.KEY[0])) == 32
    assert build_settings({}) == first  # stable for one SECRET_KEY
    settings.SECRET_KEY = "another-secret"
    second = build_settings({})
    assert second.KEY != first.KEY
    assert second.SALT != first.SALT


def test_no_key_still_signs_urls(settings: Any) -> None:
    settings.OXIMG = {}
    signed = runtime.get_signer().signed_path("/w:100/plain/a.jpg")
    assert not signed.startswith("/insecure")
    runtime.get_signer().verify(signed.split("/")[1], "/w:100/plain/a.jpg")


# -- other values ---------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 8, 32])
def test_signature_size_in_range_is_accepted(size: int) -> None:
    built = build_settings(with_key(SIGNATURE_SIZE=size))
    assert built.SIGNATURE_SIZE == size  # noqa: SIM300 - a field, not a constant


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"SIGNATURE_SIZE": 0}, "SIGNATURE_SIZE"),
        ({"SIGNATURE_SIZE": 33}, "SIGNATURE_SIZE"),
        ({"SIGNATURE_SIZE": "32"}, "SIGNATURE_SIZE must be an integer"),
        ({"WORKERS": -1}, "WORKERS must not be negative"),
        ({"QUEUE_SIZE": -1}, "QUEUE_SIZE"),
        ({"MEMORY_BUDGET": -1}, "MEMORY_BUDGET"),
        ({"MAX_SRC_RESOLUTION": -1}, "MAX_SRC_RESOLUTION"),
        ({"MAX_SRC_FILE_SIZE": -5}, "MAX_SRC_FILE_SIZE"),
        ({"MAX_ANIMATION_FRAMES": -1}, "MAX_ANIMATION_FRAMES"),
        ({"MAX_RESULT_DIMENSION": -1}, "MAX_RESULT_DIMENSION"),
        ({"METADATA_CACHE": ""}, "METADATA_CACHE must name a cache"),
        ({"METADATA_CACHE_TIMEOUT": -1}, "METADATA_CACHE_TIMEOUT"),
        ({"QUEUE_TIMEOUT": 0}, "QUEUE_TIMEOUT must be positive"),
        ({"RENDER_TIMEOUT": -1.5}, "RENDER_TIMEOUT"),
        ({"WORKERS": "4"}, "WORKERS must be an integer"),
        ({"WORKERS": True}, "WORKERS must be an integer"),
        ({"ALLOW_UNSIGNED": "yes"}, "ALLOW_UNSIGNED must be True or False"),
        ({"URL_PREFIX": "img/"}, "URL_PREFIX"),
        ({"URL_PREFIX": "/img"}, "URL_PREFIX"),
        ({"URL_PREFIX": ""}, "URL_PREFIX"),
        ({"URL_PREFIX": "/my img/"}, "URL_PREFIX"),
        ({"URL_PREFIX": "/img?x/"}, "URL_PREFIX"),
        ({"URL_PREFIX": "/img//"}, "URL_PREFIX"),
        ({"QUALITY": {"jpeg": 0}}, "QUALITY"),
        ({"QUALITY": {"jpeg": 101}}, "QUALITY"),
        ({"QUALITY": {"bmp": 80}}, "unknown format"),
        ({"QUALITY": {"jpeg": "80"}}, "QUALITY must be a dict with integer values"),
        ({"QUALITY": [("jpeg", 80)]}, "QUALITY must be a dict"),
        ({"SOURCES": ["archive"]}, "SOURCES must be a dict"),
        ({"SOURCES": {"a:b": "default"}}, "SOURCES alias"),
        ({"SOURCES": {"HTTPS": "default"}}, "is a URL scheme"),
        ({"PRESETS": {"card": "nonsense:1"}}, "PRESETS\\['card'\\]"),
        ({"PRESETS": {"card": "q:500"}}, "PRESETS\\['card'\\]"),
        # An empty name no URL can name, a value without an option: imgproxy refuses both.
        ({"PRESETS": {"": "q:70"}}, "empty preset name"),
        ({"PRESETS": {"  ": "q:70"}}, "empty preset name"),
        ({"PRESETS": {"card": ""}}, "PRESETS\\['card'\\] is empty"),
        ({"PRESETS": {"card": " / "}}, "PRESETS\\['card'\\] is empty"),
        ({"TAG_DEFAULTS": ["upscale"]}, "TAG_DEFAULTS must be a dict"),
        ({"TAG_DEFAULTS": {"upscale": "maybe"}}, "TAG_DEFAULTS: bad upscale 'maybe'"),
        ({"TAG_DEFAULTS": {"sizing": "pillow"}}, "TAG_DEFAULTS: bad sizing 'pillow'"),
        ({"TAG_DEFAULTS": {"progressive": True}}, "TAG_DEFAULTS: unknown thumbnail keyword"),
        ({"TAG_DEFAULTS": {"preset": "card"}}, "TAG_DEFAULTS cannot set preset"),
        ({"TAG_DEFAULTS": {1: True}}, "TAG_DEFAULTS keys must be strings"),
        ({"RAISE_TEMPLATE_ERRORS": "yes"}, "RAISE_TEMPLATE_ERRORS must be True or False"),
    ],
)
def test_bad_values_are_improperly_configured(raw: dict[str, Any], words: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=words):
        build_settings(with_key(**raw))


@pytest.mark.parametrize("prefix", ["/", "/img/", "/media/thumbs/", "/a-b_c.d~/"])
def test_good_url_prefixes_are_accepted(prefix: str) -> None:
    built = build_settings(with_key(URL_PREFIX=prefix))
    assert built.URL_PREFIX == prefix  # noqa: SIM300 - a field, not a constant


def test_zero_means_automatic_for_counts() -> None:
    built = build_settings(with_key(WORKERS=0, QUEUE_SIZE=0, MEMORY_BUDGET=0))
    assert (built.WORKERS, built.QUEUE_SIZE, built.MEMORY_BUDGET) == (0, 0, 0)


def test_timeouts_accept_ints() -> None:
    assert build_settings(with_key(QUEUE_TIMEOUT=2)).QUEUE_TIMEOUT == 2


def test_quality_merges_over_the_defaults() -> None:
    built = build_settings(with_key(QUALITY={"webp": 50, "png": 90}))
    assert dict(built.QUALITY) == {"jpeg": 80, "webp": 50, "avif": 65, "png": 90}


def test_valid_presets_are_kept() -> None:
    presets = {"card": "rs:fill:400:300/q:70", "hero": "pr:card/w:1200"}
    assert dict(build_settings(with_key(PRESETS=presets)).PRESETS) == presets


def test_unknown_keys_are_skipped_here_and_listed_for_the_check() -> None:
    raw = with_key(WORKRES=3, QUALTY={})
    assert build_settings(raw).WORKERS == 0
    assert conf.unknown_keys(raw) == ["QUALTY", "WORKRES"]


def test_oximg_that_is_not_a_dict_is_refused(settings: Any) -> None:
    settings.OXIMG = ["KEY"]
    with pytest.raises(ImproperlyConfigured, match="OXIMG must be a dict"):
        get_settings()


# -- rebuilt when settings change -----------------------------------------------


def test_a_settings_change_rebuilds_conf_and_runtime(settings: Any) -> None:
    before_conf = get_settings()
    before_thumbnailer = runtime.get_thumbnailer()
    before_signer = runtime.get_signer()
    assert runtime.get_thumbnailer() is before_thumbnailer  # built once

    settings.OXIMG = {"KEY": OTHER_KEY, "SALT": OTHER_SALT, "WORKERS": 1, "QUEUE_SIZE": 3}

    after_conf = get_settings()
    assert after_conf is not before_conf
    assert (after_conf.KEY, after_conf.WORKERS, after_conf.QUEUE_SIZE) == ((OTHER_KEY,), 1, 3)
    assert runtime.get_thumbnailer() is not before_thumbnailer
    after_signer = runtime.get_signer()
    assert after_signer is not before_signer
    path = "/w:10/plain/a.jpg"
    assert after_signer.signed_path(path) != before_signer.signed_path(path)


def test_the_runtime_is_rebuilt_when_storages_change(settings: Any, tmp_path: Path) -> None:
    before = runtime.get_thumbnailer()
    settings.STORAGES = {
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }
    assert runtime.get_thumbnailer() is not before


@pytest.mark.parametrize("fsync", [True, False])
def test_cache_fsync_reaches_the_local_cache_store(
    settings: Any, tmp_path: Path, fsync: bool
) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    settings.OXIMG = {**settings.OXIMG, "CACHE_FSYNC": fsync}
    store = runtime.get_thumbnailer().cache
    assert isinstance(store, storage.FileSystemCacheStore)
    assert store.fsync is fsync


def test_the_core_defaults_are_the_settings_defaults() -> None:
    """One set of defaults: a core built by hand behaves as a site that sets nothing."""
    from django_oximg.core.pipeline import RenderSettings
    from django_oximg.core.serving.handler import ThumbnailerConfig
    from django_oximg.core.serving.staging import Limits
    from django_oximg.core.stores.http import HttpSourceConfig

    built = build_settings(with_key())
    configured = runtime.thumbnailer_config(built)
    by_hand = ThumbnailerConfig(fingerprint=configured.fingerprint)
    assert runtime.limits(built).render == RenderSettings() == Limits().render
    assert runtime.limits(built) == Limits()
    assert configured == by_hand
    assert runtime.http_source_config(
        build_settings(with_key(HTTP_SOURCES=["https://a.example/"]))
    ) == HttpSourceConfig(prefixes=("https://a.example/",))


def test_settings_are_built_once_until_changed() -> None:
    assert get_settings() is get_settings()


# -- the settings reference -----------------------------------------------------


def test_the_reference_documents_every_field_with_its_docstring() -> None:
    reference = settings_reference()
    docs = field_docs()
    for spec in dataclasses.fields(OximgSettings):
        assert f"## `{spec.name}`" in reference
        assert docs[spec.name], f"{spec.name} has no docstring"
        assert docs[spec.name] in reference
    assert list(docs) == [spec.name for spec in dataclasses.fields(OximgSettings)]


def test_the_reference_shows_defaults() -> None:
    reference = settings_reference()
    assert "## `SIGNATURE_SIZE`\n\nDefault: `32`" in reference
    assert "## `QUALITY`\n\nDefault: `{'jpeg': 80, 'webp': 75, 'avif': 65}`" in reference


def test_docs_settings_md_is_the_generated_reference() -> None:
    committed = SETTINGS_DOC.read_text(encoding="utf-8") if SETTINGS_DOC.exists() else ""
    assert committed == settings_reference(), (
        "docs/settings.md is out of date with django_oximg/conf.py; regenerate it with "
        "`python -m django_oximg.settings_reference > docs/settings.md`"
    )


def test_the_reference_is_printed_without_django_settings() -> None:
    """``python -m django_oximg.settings_reference`` runs with no DJANGO_SETTINGS_MODULE at all."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)}
    printed = subprocess.run(
        [sys.executable, "-m", "django_oximg.settings_reference"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert printed == settings_reference()


# -- settings that change output bytes -----------------------------------------------------

#: Every setting that changes some answer's bytes: a value other than the
#: default (or than BASE's) and a request whose cache key must change with it.
OUTPUT_CHANGES: dict[str, tuple[Any, str, str]] = {
    "QUALITY": ({"jpeg": 60}, "/w:50/plain/a.jpg@jpeg", ""),
    "MAX_RESULT_DIMENSION": (100, "/w:500/el:1/plain/a.jpg@jpeg", ""),
    "MAX_ANIMATION_FRAMES": (5, "/w:50/plain/a.gif@gif", ""),
    "JPEG_SHRINK_MARGIN": (2.0, "/w:50/plain/a.jpg@jpeg", ""),
    "JPEG_PROGRESSIVE": (True, "/w:50/plain/a.jpg@jpeg", ""),
    "QUALITY_MODE": ("high", "/w:50/plain/a.jpg@jpeg", ""),
    "AUTO_FORMAT": (False, "/w:50/plain/a.jpg", "image/webp,*/*"),
    "FORMAT_BEST_BY_DEFAULT": (True, "/w:50/plain/a.jpg", "image/webp,*/*"),
    "FORMAT_BEST_COMPLEXITY_THRESHOLD": (10.0, "/w:50/plain/a.jpg@best", "image/webp,*/*"),
    "FORMAT_BEST_MAX_RESOLUTION": (0.5, "/w:50/plain/a.jpg@best", "image/webp,*/*"),
    "FORMAT_BEST_ALLOW_SKIPS": (True, "/w:50/skp:jpg/plain/a.jpg@best", "image/webp,*/*"),
    "WATERMARK": ("mark.png", "/w:50/plain/a.jpg@jpeg", ""),
    "WATERMARK_OPACITY": (0.5, "/w:50/plain/a.jpg@jpeg", ""),
    "EXTENSIONS": (["tests.site_extensions.SEPIA"], "/w:50/plain/a.jpg@jpeg", ""),
    "AUTOQUALITY": ({"METHOD": "dssim"}, "/w:50/plain/a.jpg@jpeg", ""),
    # Through the options they expand to, not the fingerprint.
    "PRESETS": ({"p": "w:60"}, "/pr:p/plain/a.jpg@jpeg", ""),
    "CLIENT_HINTS": (True, "/plain/a.jpg@jpeg", ""),
}

#: Output settings that change keys through the options of the request
#: (presets expanded, hints filled in), not through the fingerprint.
KEYED_BY_OPTIONS = {"PRESETS", "CLIENT_HINTS"}

#: Settings that matter only beside another one.
OUTPUT_BASES: dict[str, dict[str, Any]] = {"WATERMARK_OPACITY": {"WATERMARK": "mark.png"}}

#: Every other setting, and why it leaves every answer's bytes as they are.
SAME_BYTES = {
    "KEY": "signing only",
    "SALT": "signing only",
    "SIGNATURE_SIZE": "signing only",
    "ALLOW_UNSIGNED": "which URLs are accepted, not what they answer",
    "URL_PREFIX": "where answers are served",
    "SOURCE_STORAGE": "where sources are read; a source's name is in its key",
    "SOURCES": "where sources are read; a source's name is in its key",
    "HTTP_SOURCES": "which URLs may be read (checked before the cache)",
    "HTTP_TIMEOUT": "whether a source is read, not what it gives",
    "HTTP_MAX_REDIRECTS": "whether a source is read, not what it gives",
    "HTTP_ALLOW_PRIVATE_NETWORKS": "whether a source is read, not what it gives",
    "SOURCE_READS": "how many sources are read at once",
    "SOURCE_TIMEOUT": "whether a source is read, not what it gives",
    "CACHE_STORAGE": "where answers are kept",
    "CACHE_FSYNC": "how answers are written",
    "CACHE_REDIRECT": "how hits are sent",
    "HIT_CACHE_BYTES": "how hits are found; each answer is the cache lookup's",
    "WORKERS": "how many renders run at once",
    "QUEUE_SIZE": "load shedding only",
    "QUEUE_TIMEOUT": "load shedding only",
    "RENDER_TIMEOUT": "whether a render finishes, not its bytes",
    "MEMORY_BUDGET": "admission only",
    "MAX_SRC_RESOLUTION": "refuses sources (422, never cached), changes no answer",
    "MAX_SRC_FILE_SIZE": "refuses sources (422, never cached), changes no answer",
    "SRCSET_WIDTHS": "which URLs the tags write; each URL carries its width",
    "CACHE_CONTROL": "a header, set on each answer as it is sent",
    "LIBVIPS_CONCURRENCY": "libvips' threads give the same pixels",
    "MALLOC_THRESHOLD": "where freed memory goes, not what is computed",
    "JPEG_DECODER": "the same pixels either way (tests/test_jpeg.py)",
    "ENCODER": "the same pixels either way (tests/test_encoder.py)",
    "COORDINATION_CACHE": "who renders, not what",
    "COORDINATION_TIMEOUT": "how long a lease is waited for, not what is rendered",
    "CACHE_STORAGE_TIMEOUT": "how long a lookup or write may take, not what is stored",
    "METRICS": "an operational endpoint",
    "METADATA_CACHE": "where the tags keep a source's size",
    "METRICS_TOKEN": "who may read an operational endpoint",
    "METADATA_CACHE_TIMEOUT": "how long the tags keep a source's size",
    "TAG_DEFAULTS": "which URLs the tags write; each URL carries its options",
    "RAISE_TEMPLATE_ERRORS": "whether a failing tag raises, not what any URL answers",
    "ALLOWED_PROCESSING_OPTIONS": "which URLs are accepted; an accepted URL's options are its key",
    "ONLY_PRESETS": "which URLs are accepted; an accepted URL's options are its key",
    "RENDER_AHEAD": "when results are rendered; each is its URL's, under its key",
    "RENDER_AHEAD_BACKEND": "where the render-ahead tasks run",
    "RENDER_AHEAD_QUEUE": "where the render-ahead tasks run",
    "RENDER_AHEAD_RETRIES": "how often a failed render-ahead task is tried",
    "RENDER_AHEAD_RETRY_DELAY": "when a failed render-ahead task is tried again",
    "FALLBACK_IMAGE_PATH": "what a failing source is answered with; never cached",
    "FALLBACK_IMAGE_DATA": "what a failing source is answered with; never cached",
    "FALLBACK_IMAGE_HTTP_CODE": "what a failing source is answered with; never cached",
    "FALLBACK_IMAGE_TTL": "what a failing source is answered with; never cached",
}

BASE = {"PRESETS": {"p": "w:50"}}


def key_under(raw: dict[str, Any], path: str, accept: str) -> str:
    from django_oximg.core.limits.executor import Executor
    from django_oximg.core.serving.handler import Thumbnailer
    from django_oximg.core.stores.disk import FileSystemCacheStore, FileSystemSourceStore

    built = build_settings(with_key(**raw))
    executor = Executor(1, 1, 1.0, 1024)
    try:
        thumbnailer = Thumbnailer(
            runtime.thumbnailer_config(built),
            runtime.signer(built),
            {"": FileSystemSourceStore("/nonexistent")},
            FileSystemCacheStore("/nonexistent"),
            executor,
            limits=runtime.limits(built),
        )
        signed = runtime.signer(built).signed_path(path)
        return thumbnailer.job_for(signed, accept, ClientHints(dpr=2, width=50)).key
    finally:
        executor.shutdown()


def test_every_setting_is_classified_as_changing_output_bytes_or_not() -> None:
    """A new setting fails here until it says whether it changes output bytes.

    If it does, it belongs in ``conf.OUTPUT_SETTINGS`` (and OUTPUT_CHANGES
    above), so that it joins every cache key and every tag URL.
    """
    fields = {field.name for field in dataclasses.fields(OximgSettings)}
    assert set(OUTPUT_CHANGES).isdisjoint(SAME_BYTES)
    assert fields == set(OUTPUT_CHANGES) | set(SAME_BYTES)
    assert set(conf.OUTPUT_SETTINGS) == set(OUTPUT_CHANGES) - KEYED_BY_OPTIONS


@pytest.fixture
def mark(media: Path) -> Path:
    """A watermark image in the default source storage, as ``mark.png``."""
    path = media / "mark.png"
    path.write_bytes(images.png_with_alpha(40, 20))
    return path


@pytest.mark.parametrize("name", sorted(OUTPUT_CHANGES))
def test_an_output_setting_changes_the_cache_key(name: str, mark: Path) -> None:
    value, path, accept = OUTPUT_CHANGES[name]
    base = {**BASE, **OUTPUT_BASES.get(name, {})}
    assert key_under(base, path, accept) != key_under({**base, name: value}, path, accept)


@pytest.mark.parametrize("name", sorted(conf.OUTPUT_SETTINGS))
def test_an_output_setting_changes_the_fingerprint(name: str) -> None:
    value = OUTPUT_CHANGES[name][0]
    base = with_key(**OUTPUT_BASES.get(name, {}))
    assert conf.output_fingerprint(build_settings(base)) != conf.output_fingerprint(
        build_settings({**base, name: value})
    )


def test_a_changed_watermark_image_changes_the_keys(mark: Path) -> None:
    path = "/w:50/wm:0.5/plain/a.jpg@jpeg"
    raw = {**BASE, "WATERMARK": "mark.png"}
    before = key_under(raw, path, "")
    mark.write_bytes(images.png_with_alpha(40, 21))
    assert key_under(raw, path, "") != before


def test_without_a_watermark_the_fingerprint_is_what_it_was() -> None:
    """The watermark settings came later: a site without one keeps its keys and URLs."""
    settings = build_settings(with_key(WATERMARK_OPACITY=0.3))
    earlier = (
        "QUALITY",
        "MAX_RESULT_DIMENSION",
        "MAX_ANIMATION_FRAMES",
        "JPEG_SHRINK_MARGIN",
        "QUALITY_MODE",
    )
    values = {name: getattr(settings, name) for name in (*earlier, "AUTO_FORMAT")}
    assert conf.output_fingerprint(settings) == output_fingerprint(values)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"WATERMARK_OPACITY": 1.5}, "WATERMARK_OPACITY"),
        ({"ALLOWED_PROCESSING_OPTIONS": ["w", "blurr"]}, "blurr"),
        ({"CLIENT_HINTS": "yes"}, "CLIENT_HINTS"),
        ({"FALLBACK_IMAGE_PATH": "a.png", "FALLBACK_IMAGE_DATA": "iVBO"}, "not both"),
        ({"FALLBACK_IMAGE_HTTP_CODE": 700}, "FALLBACK_IMAGE_HTTP_CODE"),
        ({"FALLBACK_IMAGE_HTTP_CODE": 199}, "FALLBACK_IMAGE_HTTP_CODE"),
        ({"FALLBACK_IMAGE_TTL": -1}, "FALLBACK_IMAGE_TTL"),
        ({"FALLBACK_IMAGE_PATH": 3}, "FALLBACK_IMAGE_PATH must be a string"),
    ],
)
def test_bad_new_settings_are_refused(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        build_settings(with_key(**raw))


def test_allowed_options_may_be_one_name() -> None:
    assert build_settings(with_key(ALLOWED_PROCESSING_OPTIONS="w")).ALLOWED_PROCESSING_OPTIONS == (
        "w",
    )


def test_settings_that_keep_the_bytes_keep_the_keys() -> None:
    """So caches stay warm across deploys that change only these."""
    path = "/w:50/plain/a.jpg@jpeg"
    changed = {"WORKERS": 7, "RENDER_TIMEOUT": 3.0, "ENCODER": "libvips", "METRICS": True}
    assert key_under(BASE, path, "") == key_under({**BASE, **changed}, path, "")


def test_the_fingerprint_is_stable_across_processes() -> None:
    code = (
        "from django_oximg import conf; "
        "print(conf.output_fingerprint(conf.OximgSettings(KEY=('00',), SALT=('00',))))"
    )
    printed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    ).stdout.strip()
    assert printed == conf.output_fingerprint(OximgSettings(KEY=("00",), SALT=("00",)))


# -- EXTENSIONS ---------------------------------------------------------------------------

SEPIA = "tests.site_extensions.SEPIA"
TINT = "tests.site_extensions.TINT"


def test_extensions_are_imported_in_their_order() -> None:
    from tests import site_extensions

    built = build_settings(with_key(EXTENSIONS=[TINT, SEPIA]))
    assert built.EXTENSIONS == (site_extensions.TINT, site_extensions.SEPIA)
    assert build_settings(with_key(EXTENSIONS=SEPIA)).EXTENSIONS == (site_extensions.SEPIA,)


@pytest.mark.parametrize(
    ("extensions", "other"),
    [
        ([SEPIA], ["tests.site_extensions.SEPIA_V2"]),
        ([SEPIA, TINT], [TINT, SEPIA]),
        ([SEPIA], ["tests.site_extensions.SEPIA_AFTER_COLOUR"]),
    ],
    ids=["version", "order", "place"],
)
def test_an_extensions_version_order_and_place_change_the_fingerprint(
    extensions: list[str], other: list[str]
) -> None:
    def fingerprint(paths: list[str]) -> str:
        return conf.output_fingerprint(build_settings(with_key(EXTENSIONS=paths)))

    assert fingerprint(extensions) != fingerprint(other)
    assert fingerprint(extensions) == fingerprint(list(extensions))


def test_without_extensions_the_fingerprint_is_what_it_was() -> None:
    assert conf.output_fingerprint(build_settings(with_key(EXTENSIONS=[]))) == (
        conf.output_fingerprint(build_settings(with_key()))
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"sepia": SEPIA}, "must be a list of dotted paths"),
        ([SEPIA, 3], "must be a list of dotted paths"),
        (["tests.site_extensions.NOPE"], "cannot be imported"),
        (["tests.no_such_module.SEPIA"], "cannot be imported"),
        (["tests.site_extensions.TAG_KEYWORD"], "'upscale' is a keyword of the tags"),
        (["tests.site_extensions.TAKEN_NAME"], "'blur' is already an option's name"),
    ],
)
def test_extensions_that_cannot_serve_are_refused(value: Any, message: str) -> None:
    from django_oximg.setting_values import InvalidExtension

    with pytest.raises(InvalidExtension, match=message):
        build_settings(with_key(EXTENSIONS=value))


def test_presets_tag_defaults_and_allowed_options_may_name_an_extensions_option() -> None:
    raw = with_key(
        EXTENSIONS=[SEPIA],
        PRESETS={"old": "sep:0.9"},
        TAG_DEFAULTS={"sepia": 0.2},
        ALLOWED_PROCESSING_OPTIONS=["w", "sep"],
    )
    built = build_settings(raw)
    assert built.TAG_DEFAULTS == {"sepia": 0.2}
    for name, value in (("PRESETS", {"old": "sep:2"}), ("TAG_DEFAULTS", {"sepia": 2})):
        with pytest.raises(ImproperlyConfigured, match="sepia"):
            build_settings({**raw, name: value})
    without = {key: value for key, value in raw.items() if key != "EXTENSIONS"}
    with pytest.raises(ImproperlyConfigured):
        build_settings(without)


@pytest.mark.parametrize(
    "value",
    [["100"], {"gallery.Photo": ["100"]}, {"a.B.c": "100"}, {"a.B.c": [100]}, {"a.B.c": {"n": ""}}],
)
def test_render_ahead_of_the_wrong_shape_is_refused(value: Any) -> None:
    with pytest.raises(ImproperlyConfigured, match="RENDER_AHEAD"):
        build_settings({"RENDER_AHEAD": value})


# -- the encoder and the JPEG decoder (test_encoder.py and test_jpeg.py test them) ---


@pytest.mark.parametrize("value", ["PIL", "", None])
def test_encoder_setting_is_validated(value: object) -> None:

    with pytest.raises(ImproperlyConfigured, match="ENCODER"):
        build_settings({"KEY": "aa" * 32, "SALT": "bb" * 32, "ENCODER": value})


@pytest.mark.parametrize("value", ["pillow", "libvips"])
def test_encoder_setting_reaches_the_pipeline(value: str) -> None:
    settings = build_settings({"KEY": "aa" * 32, "SALT": "bb" * 32, "ENCODER": value})
    assert runtime.limits(settings).render.encoder == value


@pytest.mark.parametrize("value", [True, False])
def test_jpeg_progressive_reaches_the_pipeline(value: bool) -> None:
    settings = build_settings({"KEY": "aa" * 32, "SALT": "bb" * 32, "JPEG_PROGRESSIVE": value})
    assert runtime.limits(settings).render.jpeg_progressive is value


@pytest.mark.parametrize("value", ["turbo", "", 1])
def test_jpeg_decoder_is_validated(value: object) -> None:

    raw = {"KEY": "aa" * 32, "SALT": "bb" * 32, "JPEG_DECODER": value}
    with pytest.raises(ImproperlyConfigured, match="JPEG_DECODER"):
        build_settings(raw)


@pytest.mark.parametrize("value", ["libjpeg-turbo", "libvips"])
def test_jpeg_decoder_reaches_the_pipeline(value: str) -> None:
    settings = build_settings({"KEY": "aa" * 32, "SALT": "bb" * 32, "JPEG_DECODER": value})
    assert runtime.limits(settings).render.jpeg_decoder == value


def test_the_fallback_image_path_may_be_a_path(tmp_path: Path) -> None:
    path = tmp_path / "fallback.png"
    given = build_settings(with_key(FALLBACK_IMAGE_PATH=path)).FALLBACK_IMAGE_PATH
    assert given == str(path)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"FALLBACK_IMAGE_PATH": "/nonexistent/fallback.png"}, "FALLBACK_IMAGE_PATH cannot be"),
        ({"FALLBACK_IMAGE_DATA": "not base64!"}, "FALLBACK_IMAGE_DATA cannot be"),
        ({"FALLBACK_IMAGE_DATA": "aGVsbG8gd29ybGQ="}, "FALLBACK_IMAGE_DATA cannot be"),
    ],
)
def test_a_fallback_image_the_server_cannot_send_stops_it_starting(
    raw: dict[str, Any], message: str
) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        runtime.read_fallback(build_settings(with_key(**raw)))


def test_a_tiff_fallback_image_is_refused_as_no_browser_shows_it() -> None:
    import pyvips

    tiff = pyvips.Image.black(4, 4).write_to_buffer(".tif")
    raw = with_key(FALLBACK_IMAGE_DATA=base64.b64encode(tiff).decode())
    with pytest.raises(ImproperlyConfigured, match="must be a JPEG, PNG, WebP, GIF or AVIF"):
        runtime.read_fallback(build_settings(raw))
