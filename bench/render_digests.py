"""Output bytes of a fixed, varied set of renders, as sha256 digests.

    .venv/bin/python bench/render_digests.py > digests.txt

Renders about 300 requests in-process with ``core.pipeline.render`` (and a
few ``/info`` summaries): JPEG (baseline, progressive, grey, CMYK, Display
P3, EXIF-rotated with copyright tags), PNG (alpha, 16-bit, palette), GIF and
WebP (still and animated), drawn with pyvips from fixed seeds; every
resizing type, ``crop``, gravities (compass, offsets, ``fp``, ``sm``),
rotate/flip, blur, sharpen, extend, padding, background, dpr, enlarge,
``max_bytes``, each output format, the metadata options, each decoder,
encoder and limit setting and the high-quality mode. Prints one line per
render (its name, the sha256 of its bytes and its size, or the error it
raised) and then one overall digest of all lines.

A change meant to leave output bytes alone (a refactoring) must leave the
overall digest alone: run this before and after and compare. Digests
depend on the libvips, libjpeg-turbo and Pillow builds, so compare runs
on one machine and one environment only.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyvips  # noqa: E402

from bench.images import photo  # noqa: E402
from django_oximg.core import pipeline  # noqa: E402
from django_oximg.core.errors import OximgError  # noqa: E402
from django_oximg.core.options import Crop, Gravity, Options  # noqa: E402

#: Seconds to each render's deadline: the watched path, never a timeout.
DEADLINE = 3600.0


def _jpeg(image: pyvips.Image, **save: object) -> bytes:
    return bytes(image.jpegsave_buffer(Q=90, **save))


def _with_alpha(image: pyvips.Image) -> pyvips.Image:
    width, height = image.width, image.height
    xyz = pyvips.Image.xyz(width, height)
    distance = ((xyz[0] - width / 2) ** 2 + (xyz[1] - height / 2) ** 2) ** 0.5
    alpha = (255 - distance * (255 / (min(width, height) / 2))).cast("uchar")
    return image.bandjoin(alpha)


def _animation(width: int, height: int, frames: int) -> pyvips.Image:
    base = photo(width, height)
    pages = []
    for index in range(frames):
        left = int((width - 40) * index / (frames - 1))
        pages.append(base.draw_circle([250, 240, 40], left + 20, height // 2, 20, fill=True))
    image = pyvips.Image.arrayjoin(pages, across=1).copy()
    image.set_type(pyvips.GValue.gint_type, "page-height", height)
    image.set_type(pyvips.GValue.array_int_type, "delay", [10, *([80] * (frames - 1))])
    image.set_type(pyvips.GValue.gint_type, "loop", 3)
    return image


def sources() -> dict[str, bytes]:
    """The source files, the same bytes on every run (fixed noise seed)."""
    still = photo(1200, 800)
    small = photo(320, 240)
    tagged = photo(600, 400).copy()
    for name, value in [
        ("exif-ifd0-Copyright", "ACME"),
        ("exif-ifd0-Artist", "Jane"),
        ("exif-ifd0-Make", "Camera Maker"),
        ("exif-ifd2-UserComment", "secret place"),
    ]:
        tagged.set_type(pyvips.GValue.gstr_type, name, value)
    tagged.set_type(pyvips.GValue.gint_type, "orientation", 6)
    grey = still.colourspace("b-w")
    cmyk = small.copy(interpretation="srgb").icc_transform("cmyk", input_profile="srgb")
    p3 = small.copy(interpretation="srgb").icc_transform("p3", input_profile="srgb")
    deep = (small.cast("ushort") * 257).copy(interpretation="rgb16")
    animation = _animation(160, 120, 6)
    return {
        "photo.jpg": _jpeg(still),
        "progressive.jpg": _jpeg(still, interlace=True),
        "tagged6.jpg": _jpeg(tagged, keep=pyvips.enums.ForeignKeep.ALL),
        "grey.jpg": _jpeg(grey),
        "cmyk.jpg": _jpeg(cmyk, keep=pyvips.enums.ForeignKeep.ICC),
        "p3.jpg": _jpeg(p3, keep=pyvips.enums.ForeignKeep.ICC),
        "alpha.png": bytes(_with_alpha(photo(640, 480)).pngsave_buffer()),
        "deep.png": bytes(deep.pngsave_buffer()),
        "palette.png": bytes(small.pngsave_buffer(palette=True)),
        "still.webp": bytes(_with_alpha(small).webpsave_buffer(Q=90)),
        "anim.gif": bytes(animation.gifsave_buffer()),
        "anim.webp": bytes(animation.webpsave_buffer(Q=90)),
    }


DEFAULT = pipeline.RenderSettings()

#: Settings variants: decoders, encoders, the JPEG margin and the limits.
SETTINGS = {
    "default": DEFAULT,
    "libvips-decoder": replace(DEFAULT, jpeg_decoder="libvips"),
    "libvips-encoder": replace(DEFAULT, encoder="libvips"),
    "margin2": replace(DEFAULT, jpeg_shrink_margin=2.0),
    "margin1.5-libvips": replace(DEFAULT, jpeg_shrink_margin=1.5, jpeg_decoder="libvips"),
    "max-dim-300": replace(DEFAULT, max_result_dimension=300),
    "frames-3": replace(DEFAULT, max_animation_frames=3),
    "quality": replace(DEFAULT, quality={**DEFAULT.quality, "jpeg": 60, "webp": 50}),
    "high-quality": replace(DEFAULT, quality_mode="high"),
}

FIT = Options(width=300, height=300)

#: Option sets by name, each rendered from the JPEG photo to JPEG (and more below).
OPTION_SETS: dict[str, Options] = {
    "plain": Options(),
    "fit": FIT,
    "fit-w": Options(width=250),
    "fill": Options(resizing_type="fill", width=200, height=200),
    "fill-down": Options(resizing_type="fill-down", width=2000, height=500),
    "force": Options(resizing_type="force", width=300, height=100),
    "auto": Options(resizing_type="auto", width=150, height=300),
    "enlarge": Options(width=2000, enlarge=True),
    "dpr2": Options(width=200, height=200, dpr=2.0),
    "dpr3-fill": Options(resizing_type="fill", width=200, height=100, dpr=3.0),
    "min-sizes": Options(width=300, height=300, min_width=280, min_height=280),
    "crop": Options(crop=Crop(400, 300), width=200),
    "crop-fraction-gravity": Options(crop=Crop(0.5, 0.25, Gravity("soea", 10, 5)), width=200),
    # A region shrunk enough to be decoded at a DCT scale (Wagtail's fill-).
    "crop-shrunk": Options(
        crop=Crop(800, 600, Gravity("nowe", 150, 90)), resizing_type="force", width=160, height=120
    ),
    "crop-fp-shrunk": Options(crop=Crop(0.75, 0.75), gravity=Gravity("fp", 0.3, 0.6), width=100),
    "gravity-no": Options(resizing_type="fill", width=200, height=60, gravity=Gravity("no")),
    "gravity-we-offset": Options(
        resizing_type="fill", width=60, height=200, gravity=Gravity("we", 12, 0)
    ),
    "gravity-fp": Options(
        resizing_type="fill", width=150, height=150, gravity=Gravity("fp", 0.8, 0.3)
    ),
    "gravity-sm": Options(resizing_type="fill", width=180, height=120, gravity=Gravity("sm")),
    "rotate90": Options(width=200, rotate=90),
    "rotate270-fill": Options(resizing_type="fill", width=200, height=100, rotate=270),
    "flip-h": Options(width=200, flip_horizontal=True),
    "flip-v-rotate180": Options(width=200, flip_vertical=True, rotate=180),
    "blur": Options(width=200, blur=2.5),
    "sharpen": Options(width=200, sharpen=1.2),
    "extend": Options(width=400, height=400, extend=True),
    "extend-gravity": Options(
        width=400, height=400, extend=True, extend_gravity=Gravity("sowe", 5, 5)
    ),
    "extend-background": Options(width=400, height=400, extend=True, background=(200, 30, 60)),
    "padding": Options(width=200, padding=(10, 20, 30, 40)),
    "padding-dpr": Options(width=200, padding=(5, 5, 5, 5), dpr=2.0, background=(0, 128, 0)),
    "everything": Options(
        resizing_type="fill",
        width=150,
        height=120,
        crop=Crop(900, 700),
        rotate=90,
        flip_horizontal=True,
        blur=0.8,
        sharpen=0.8,
        extend=True,
        padding=(4, 4, 4, 4),
        background=(10, 20, 30),
    ),
    "quality-30": Options(width=300, quality=30),
    "format-quality": Options(width=300, format_quality=(("jpeg", 45), ("webp", 40))),
    "max-bytes": Options(width=600, max_bytes=12_000),
    "no-auto-rotate": Options(width=200, auto_rotate=False),
}

FORMATS = ("jpeg", "png", "webp", "avif", "gif")


def cases() -> Iterator[tuple[str, str, Options, str, str]]:
    """(name, source, options, format, settings) for every render."""
    for name, options in OPTION_SETS.items():
        yield f"photo/{name}/jpeg", "photo.jpg", options, "jpeg", "default"
    for fmt in FORMATS:
        if fmt != "jpeg":  # photo/fit/jpeg is above
            yield f"photo/fit/{fmt}", "photo.jpg", FIT, fmt, "default"
        yield f"alpha/fit/{fmt}", "alpha.png", FIT, fmt, "default"
        yield f"anim-gif/fit/{fmt}", "anim.gif", FIT, fmt, "default"
    for name in ("fill", "crop", "gravity-sm", "rotate90", "blur", "extend", "padding"):
        yield f"alpha/{name}/png", "alpha.png", OPTION_SETS[name], "png", "default"
        yield f"alpha/{name}/webp", "alpha.png", OPTION_SETS[name], "webp", "default"
    yield (
        "alpha/background/png",
        "alpha.png",
        Options(width=200, background=(0, 0, 255)),
        "png",
        "default",
    )
    anim = {
        "plain": Options(),
        "fit-w": Options(width=80),
        "background": Options(width=80, background=(0, 0, 255)),
        "keep-profile": Options(width=80, strip_color_profile=False),
        "fill": Options(resizing_type="fill", width=60, height=60),
        "fill-sm": Options(resizing_type="fill", width=60, height=60, gravity=Gravity("sm")),
        "extend": Options(width=80, height=80, extend=True),
        "padding": Options(width=80, padding=(2, 2, 2, 2)),
        "blur": Options(width=80, blur=1.0),
        "sharpen": Options(width=80, sharpen=1.0),
        "flip": Options(width=80, flip_horizontal=True),
        "rotate": Options(width=80, rotate=90),
        "crop": Options(width=80, crop=Crop(100, 80)),
        "max-bytes": Options(width=120, max_bytes=20_000),
    }
    for name, options in anim.items():
        yield f"anim-gif/{name}/gif", "anim.gif", options, "gif", "default"
        yield f"anim-gif/{name}/webp", "anim.gif", options, "webp", "default"
    for name in ("plain", "fit-w", "fill", "rotate"):
        yield f"anim-webp/{name}/webp", "anim.webp", anim[name], "webp", "default"
        yield f"anim-webp/{name}/gif", "anim.webp", anim[name], "gif", "default"
    yield "anim-gif/frames-3/gif", "anim.gif", anim["fit-w"], "gif", "frames-3"
    yield "anim-webp/fit/png", "anim.webp", FIT, "png", "default"
    others = {
        "progressive.jpg": ("fit", "fill", "crop", "crop-shrunk"),
        "tagged6.jpg": ("fit", "fill", "rotate90", "no-auto-rotate", "crop", "crop-shrunk"),
        "grey.jpg": ("fit", "extend-background", "padding"),
        "cmyk.jpg": ("plain", "fit"),
        "p3.jpg": ("plain", "fit"),
        "deep.png": ("plain", "fit"),
        "palette.png": ("fit", "fill"),
        "still.webp": ("fit", "fill", "extend"),
    }
    for source, names in others.items():
        for name in names:
            stem = source.split(".")[0]
            yield f"{stem}/{name}/jpeg", source, OPTION_SETS[name], "jpeg", "default"
            yield f"{stem}/{name}/webp", source, OPTION_SETS[name], "webp", "default"
    metadata = {
        "strip": Options(width=200),
        "no-copyright": Options(width=200, keep_copyright=False),
        "keep-all": Options(width=200, strip_metadata=False),
        "keep-profile": Options(width=200, strip_color_profile=False),
    }
    for name, options in metadata.items():
        for source in ("tagged6.jpg", "p3.jpg"):
            stem = source.split(".")[0]
            yield f"{stem}/{name}/jpeg", source, options, "jpeg", "default"
            yield f"{stem}/{name}/webp", source, options, "webp", "default"
            yield f"{stem}/{name}/png", source, options, "png", "default"
    for settings in SETTINGS:
        for name in ("fit", "fill", "enlarge", "padding-dpr", "max-bytes"):
            for fmt in ("jpeg", "webp"):
                yield (
                    f"photo/{name}/{fmt}/{settings}",
                    "photo.jpg",
                    OPTION_SETS[name],
                    fmt,
                    settings,
                )
        yield f"tagged6/fit/jpeg/{settings}", "tagged6.jpg", FIT, "jpeg", settings
        yield f"grey/fit/jpeg/{settings}", "grey.jpg", FIT, "jpeg", settings
        yield f"progressive/fit/webp/{settings}", "progressive.jpg", FIT, "webp", settings
    for source in ("alpha.png", "deep.png", "still.webp", "cmyk.jpg", "tagged6.jpg"):
        stem = source.split(".")[0]
        yield f"{stem}/fit/webp/high-quality", source, FIT, "webp", "high-quality"
    for source in ("photo.jpg", "alpha.png", "anim.gif"):
        yield (
            f"{source}/png-max-bytes",
            source,
            Options(width=300, max_bytes=1000),
            "png",
            "default",
        )


def outcome(render: Callable[[], bytes]) -> str:
    """The sha256 and size of what ``render`` returns, or the project error it raises."""
    try:
        data = render()
    except OximgError as error:
        return f"error {type(error).__name__}"
    return f"{hashlib.sha256(data).hexdigest()} {len(data)}"


def lines() -> Iterator[str]:
    data = sources()
    for name, blob in data.items():
        yield f"source {name} {hashlib.sha256(blob).hexdigest()}"
    for name, source, options, fmt, settings in cases():
        if not pipeline.saver_available(fmt):
            yield f"{name} skipped: no saver"
            continue

        def render(
            source: str = source,
            options: Options = options,
            fmt: str = fmt,
            settings: str = settings,
        ) -> bytes:
            result = pipeline.render(
                data[source], options, fmt, SETTINGS[settings], deadline=time.monotonic() + DEADLINE
            )
            return result.data + f"{result.width}x{result.height}x{result.frames}".encode()

        yield f"{name} {outcome(render)}"
    for source in ("photo.jpg", "alpha.png", "tagged6.jpg", "anim.gif", "cmyk.jpg"):

        def summary(source: str = source) -> bytes:
            found = pipeline.summarise(data[source], (4, 3), True)
            return f"{found.blurhash} {found.dominant_color}".encode()

        yield f"summary/{source} {outcome(summary)}"


def main() -> None:
    pipeline.configure(concurrency=1)
    overall = hashlib.sha256()
    count = 0
    for line in lines():
        print(line, flush=True)
        overall.update(line.encode() + b"\n")
        count += not line.startswith("source ")
    print(f"overall {overall.hexdigest()} ({count} renders)")


if __name__ == "__main__":
    main()
