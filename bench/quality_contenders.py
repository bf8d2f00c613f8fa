"""The contenders bench/quality.py scores: who makes each thumbnail, and how.

Every contender makes the same thumbnail of a photo (a :class:`Case`) at a
given quality, or losslessly (PNG) so that its resizing can be judged
without its encoder. In this process:

- django-oximg's ``pipeline.render`` with its defaults, and variants that
  change one setting or option each (the JPEG decode margin, keep_copyright,
  the ``crop`` option, the high-quality mode);
- bare libvips: ``thumbnail_buffer`` and a saver with the pipeline's encoder
  options;
- encoders on django-oximg's own pixels (libjpeg-turbo through Pillow,
  mozjpeg through libvips, libwebp settings), so only the encoder differs;
- resizing alternatives written with pyvips: crop before resize against
  resize then crop at the same decode, and a linear-light Lanczos3 resize
  from a decode at least twice the target (a possible high-quality mode).

Out of this process: thumbor 7.8 over HTTP on 127.0.0.1 (its own venv), and
sorl-thumbnail and easy-thumbnails through their public calls (their own venv).
"""

from __future__ import annotations

import functools
import io
import subprocess
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyvips
from PIL import Image as PILImage
from PIL import ImageFile

from bench import servers
from django_oximg.core import defaults, pipeline
from django_oximg.core.options import Crop, Options
from django_oximg.core.pipeline import encoder
from django_oximg.core.pipeline.load import jpeg_shrink

ROOT = Path(__file__).resolve().parent.parent

KEEP_NONE = int(pyvips.enums.ForeignKeep.NONE)


@dataclass(frozen=True)
class Case:
    """One thumbnail of every photo: a box, a resizing type and an output format."""

    name: str
    #: "fit" (inside the box) or "fill" (the box exactly, centred crop).
    mode: str
    width: int
    height: int
    format: str
    #: django-oximg's default quality for the format; its bytes there are the target.
    default_quality: int


CASES = {
    case.name: case
    for case in (
        Case("fit-jpeg", "fit", 500, 500, "jpeg", 80),
        Case("fill-webp", "fill", 320, 320, "webp", 75),
    )
}


@dataclass
class Photo:
    """A source photo and what is computed from it once."""

    name: str
    data: bytes
    #: Pixels computed once per case (django-oximg's, before encoding).
    pixels: dict[str, Any] = field(default_factory=dict)
    _info: pipeline.SourceInfo | None = None

    def info(self) -> pipeline.SourceInfo:
        """The header, read once."""
        if self._info is None:
            self._info = pipeline.probe(self.data)
        return self._info


#: make(photo, case, quality, fmt) -> encoded bytes; fmt is the case's or "png".
Maker = Callable[[Photo, Case, int, str], bytes]


@dataclass(frozen=True)
class Contender:
    """A way to make the thumbnail, run in this process."""

    key: str
    label: str
    make: Maker
    #: Cases it takes part in (all when empty).
    cases: tuple[str, ...] = ()
    #: Whether its lossless output shows anything its encoder-free pixels
    #: do not already show for another contender (False for encoder variants).
    lossless: bool = True
    #: How it maps a fit onto whole pixels (see :func:`reference`).
    grid: str = "stretch"


# --- django-oximg ----------------------------------------------------------------


def oximg(
    margin: float = defaults.JPEG_SHRINK_MARGIN,
    keep_copyright: bool = True,
    crop_first: bool = False,
    quality_mode: str = "",
) -> Maker:
    """``pipeline.render`` with the defaults but for the given settings and options."""
    settings = pipeline.RenderSettings(jpeg_shrink_margin=margin)

    def make(photo: Photo, case: Case, quality: int, fmt: str) -> bytes:
        options = Options(
            resizing_type=case.mode,
            width=case.width,
            height=case.height,
            quality=quality,
            keep_copyright=keep_copyright,
            crop=source_crop(photo, case) if crop_first else None,
            quality_mode=quality_mode,
        )
        return pipeline.render(photo.data, options, fmt, settings).data

    return make


def source_crop(photo: Photo, case: Case) -> Crop:
    """The centred region of the source that a fill keeps, as a ``crop`` option."""
    header = photo.info()
    width, height = cover_region(header.width, header.height, case.width, case.height)
    return Crop(float(width), float(height))


def cover_region(width: int, height: int, box_width: int, box_height: int) -> tuple[int, int]:
    """The largest region of ``width`` x ``height`` with the box's aspect ratio."""
    if width * box_height >= height * box_width:
        return round(height * box_width / box_height), height
    return width, round(width * box_height / box_width)


def oximg_pixels(photo: Photo, case: Case) -> Any:
    """django-oximg's default thumbnail before encoding (its lossless output, decoded)."""
    if case.name not in photo.pixels:
        png = oximg()(photo, case, 0, "png")
        photo.pixels[case.name] = pyvips.Image.new_from_buffer(png, "").copy_memory()
    return photo.pixels[case.name]


# --- encoders on django-oximg's pixels ---------------------------------------------


def saved(image: Any, fmt: str, quality: int, **options: Any) -> bytes:
    """``image`` through libvips' saver for ``fmt`` (metadata dropped)."""
    if fmt == "png":
        return bytes(image.pngsave_buffer(compression=6, keep=KEEP_NONE))
    if fmt == "jpeg":
        return bytes(image.jpegsave_buffer(Q=quality, keep=KEEP_NONE, **options))
    return bytes(image.webpsave_buffer(Q=quality, keep=KEEP_NONE, **options))


def libvips_encoder(**options: Any) -> Maker:
    """django-oximg's pixels, encoded by libvips (pyvips-binary: mozjpeg, libwebp)."""

    def make(photo: Photo, case: Case, quality: int, fmt: str) -> bytes:
        return saved(oximg_pixels(photo, case), fmt, quality, **options)

    return make


def pillow_jpeg(
    subsampling: int | None = None,
    progressive: bool = False,
    tables: tuple[int, int] | None = None,
) -> Maker:
    """django-oximg's pixels, encoded by Pillow's libjpeg-turbo with ``optimize``.

    ``subsampling`` None is the pipeline's rule (4:2:0 below q90, 4:4:4 from
    it). ``tables``: the luminance and chrominance quantisation tables, by
    libvips' ``quant_table`` number, at every quality; None is the
    pipeline's rule (:func:`django_oximg.core.pipeline.encoder.quant_table`).
    """

    def make(photo: Photo, case: Case, quality: int, fmt: str) -> bytes:
        luma, chrominance = tables or (encoder.quant_table(quality),) * 2
        qtables = [quant_tables(luma)[0], quant_tables(chrominance)[1]]
        image = oximg_pixels(photo, case)
        mode = encoder.MODES[image.bands]
        pil = PILImage.frombytes(mode, (image.width, image.height), image.write_to_memory())
        chroma = subsampling
        if chroma is None:
            full = quality >= encoder.FULL_CHROMA_QUALITY
            chroma = encoder.SUBSAMPLING_444 if full else encoder.SUBSAMPLING_420
        out = io.BytesIO()
        with roomy_pillow_buffer():
            pil.save(
                out,
                "JPEG",
                quality=quality,
                optimize=True,
                subsampling=chroma,
                progressive=progressive,
                qtables=qtables,
            )
        return out.getvalue()

    return make


@contextmanager
def roomy_pillow_buffer() -> Iterator[None]:
    """Room for any JPEG of the sweep in Pillow's output buffer, for the ``with`` block.

    Pillow writes an optimised JPEG into a buffer of one byte per pixel (two
    from q95), too small for some tables at the top of the sweep; the
    pipeline hands such results to libvips, this benchmark makes room.
    """
    before, ImageFile.MAXBLOCK = ImageFile.MAXBLOCK, 16 << 20
    try:
        yield
    finally:
        ImageFile.MAXBLOCK = before


@functools.cache
def quant_tables(index: int) -> tuple[list[int], list[int]]:
    """libvips' ``quant_table`` ``index`` at a scale of 100 % (luminance, chrominance)."""
    probe = pyvips.Image.black(16, 16, bands=3)
    tables = PILImage.open(
        io.BytesIO(bytes(probe.jpegsave_buffer(Q=50, quant_table=index, keep=KEEP_NONE)))
    ).quantization
    return list(tables[0]), list(tables[1])


# --- bare libvips and resizing alternatives -----------------------------------------------


def libvips_thumbnail(photo: Photo, case: Case, quality: int, fmt: str) -> bytes:
    """libvips' ``thumbnail`` (its own 2x shrink-on-load rule) and a saver."""
    crop = "centre" if case.mode == "fill" else "none"
    image = pyvips.Image.thumbnail_buffer(photo.data, case.width, height=case.height, crop=crop)
    return saved(image, fmt, quality, **pipeline_encoder_options(fmt))


def pipeline_encoder_options(fmt: str) -> dict[str, Any]:
    """The saver options ``pipeline.encode`` gives libvips, but its quantisation tables.

    Bare libvips keeps libjpeg's own (Annex K): that is the baseline the
    quality tables read against (docs/quality.md).
    """
    return {"jpeg": {"optimize_coding": True}, "webp": {"effort": 4}}.get(fmt, {})


def target_size(photo: Photo, case: Case) -> tuple[float, float, int, int]:
    """Scale from the source to the resized image, and the thumbnail's size (fit or fill)."""
    header = photo.info()
    width, height = header.width, header.height
    if case.mode == "fill":
        scale = max(case.width / width, case.height / height)
        return scale, scale, case.width, case.height
    scale = min(case.width / width, case.height / height)
    out_w, out_h = max(1, round(width * scale)), max(1, round(height * scale))
    return out_w / width, out_h / height, out_w, out_h


def decoded(photo: Photo, shrink: int) -> Any:
    """The photo decoded by libvips at 1/``shrink``, as 8-bit sRGB (grey made RGB)."""
    image = pyvips.Image.jpegload_buffer(photo.data, shrink=shrink)
    if image.interpretation != "srgb":
        image = image.colourspace("srgb")
    return image


def decode_shrink(photo: Photo, case: Case, margin: float) -> int:
    """The DCT scale django-oximg's rule picks for ``margin`` (1, 2, 4 or 8)."""
    header = photo.info()
    x_scale, y_scale, _, _ = target_size(photo, case)
    width, height = round(header.width * x_scale), round(header.height * y_scale)
    return jpeg_shrink(header.width, header.height, width, height, margin)


def ordered_fill(crop_first: bool, margin: float = defaults.JPEG_SHRINK_MARGIN) -> Maker:
    """A centred fill at django-oximg's decode scale: crop then resize, or resize then crop."""

    def make(photo: Photo, case: Case, quality: int, fmt: str) -> bytes:
        image = decoded(photo, decode_shrink(photo, case, margin))
        if crop_first:
            width, height = cover_region(image.width, image.height, case.width, case.height)
            image = image.crop(
                (image.width - width) // 2, (image.height - height) // 2, width, height
            )
            image = image.resize(case.width / width, vscale=case.height / height)
        else:
            scale = max(case.width / image.width, case.height / image.height)
            image = image.resize(scale)
            image = image.crop(
                (image.width - case.width) // 2,
                (image.height - case.height) // 2,
                case.width,
                case.height,
            )
        return saved(image, fmt, quality, **pipeline_encoder_options(fmt))

    return make


def resized(image: Any, x_scale: float, y_scale: float, gap: float, linear: bool = True) -> Any:
    """Lanczos3 to the scales; ``linear``: in linear light (sRGB -> scRGB floats and back)."""
    if not linear:
        return image.resize(x_scale, vscale=y_scale, kernel="lanczos3", gap=gap)
    image = image.colourspace("scrgb").resize(x_scale, vscale=y_scale, kernel="lanczos3", gap=gap)
    return image.colourspace("srgb").cast("uchar")


def fitted(image: Any, case: Case, out_w: int, out_h: int, gap: float, linear: bool = True) -> Any:
    """``image`` resized to the thumbnail (fill: to cover, then a centred crop)."""
    if case.mode == "fill":
        scale = max(case.width / image.width, case.height / image.height)
        image = resized(image, scale, scale, gap, linear)
        return image.crop((image.width - out_w) // 2, (image.height - out_h) // 2, out_w, out_h)
    return resized(image, out_w / image.width, out_h / image.height, gap, linear)


def high_quality(margin: float) -> Maker:
    """Decode at >= ``margin`` x the target, linear-light Lanczos3 to it, libvips' saver."""

    def make(photo: Photo, case: Case, quality: int, fmt: str) -> bytes:
        _, _, out_w, out_h = target_size(photo, case)
        image = decoded(photo, decode_shrink(photo, case, margin))
        image = fitted(image, case, out_w, out_h, gap=0.0)
        return saved(image, fmt, quality, **pipeline_encoder_options(fmt))

    return make


def reference(
    photo: Photo, case: Case, width: int, height: int, linear: bool = True, grid: str = "stretch"
) -> Any:
    """What every contender is scored against: the full decode, linear-light Lanczos3.

    Exactly ``width`` x ``height`` (each contender's own output size), no
    reducing gap (every source pixel weighs in through the kernel), kept
    lossless by the caller. ``linear`` False resizes the sRGB values instead,
    as every contender but the high-quality mode does: a second opinion on
    lossless outputs, since a linear-light reference favours linear-light
    resizing by construction.

    A fit of 2560x1600 into 500x500 is 500x312.5 pixels. django-oximg,
    thumbor and Pillow scale each axis to its rounded size ("stretch": the
    rows by 313/1600); libvips' ``thumbnail`` scales both by 500/2560
    ("uniform") and its last row covers half a source row. On hard edges the
    two grids disagree by up to half a pixel, which SSIMULACRA2 punishes
    (up to 10 points on the black-and-white photo), so each contender is
    scored against a reference on its own grid.
    """
    image = decoded(photo, 1)
    if grid == "stretch" or case.mode == "fill":
        return fitted(image, case, width, height, gap=0.0, linear=linear)
    scale = min(case.width / image.width, case.height / image.height)
    image = resized(image, scale, scale, 0.0, linear)
    return image.embed(0, 0, width, height, extend="copy")


# --- the list ----------------------------------------------------------------------

JPEG, WEBP = ("fit-jpeg",), ("fill-webp",)

#: Everything this process makes; the first one is the baseline every other is read against.
CONTENDERS = (
    Contender("oximg", "django-oximg (defaults)", oximg()),
    Contender("libvips", "libvips thumbnail + saver", libvips_thumbnail, grid="uniform"),
    Contender("oximg-hq", "django-oximg, quality_mode high", oximg(quality_mode="high")),
    Contender("oximg-kcr0", "django-oximg, keep_copyright off", oximg(keep_copyright=False)),
    Contender("oximg-m1", "django-oximg, margin 1", oximg(margin=1.0)),
    Contender("oximg-m2", "django-oximg, margin 2", oximg(margin=2.0)),
    Contender(
        "oximg-crop",
        "django-oximg, crop option (crop, then resize; full decode)",
        oximg(keep_copyright=False, crop_first=True),
        WEBP,
    ),
    Contender("resize-crop", "pyvips decode, resize then crop", ordered_fill(False), WEBP),
    Contender("crop-resize", "pyvips decode, crop then resize", ordered_fill(True), WEBP),
    Contender(
        "enc-turbo-420",
        "libjpeg-turbo 4:2:0 (Pillow)",
        pillow_jpeg(subsampling=encoder.SUBSAMPLING_420),
        JPEG,
        False,
    ),
    Contender(
        "enc-turbo-444",
        "libjpeg-turbo 4:4:4 (Pillow)",
        pillow_jpeg(subsampling=encoder.SUBSAMPLING_444),
        JPEG,
        False,
    ),
    Contender(
        "enc-turbo-prog",
        "libjpeg-turbo progressive (Pillow)",
        pillow_jpeg(progressive=True),
        JPEG,
        False,
    ),
    Contender(
        "enc-mozjpeg",
        "mozjpeg, optimize_coding, Annex K tables (libvips)",
        libvips_encoder(optimize_coding=True),
        JPEG,
        False,
    ),
    Contender(
        "enc-annex-k",
        "libjpeg-turbo, Annex K tables at every quality (Pillow)",
        pillow_jpeg(tables=(encoder.ANNEX_K_QUANT_TABLE, encoder.ANNEX_K_QUANT_TABLE)),
        JPEG,
        False,
    ),
    *(
        Contender(
            f"enc-table-{index}",
            f"mozjpeg, quant_table {index} at every quality (libvips)",
            libvips_encoder(optimize_coding=True, quant_table=index),
            JPEG,
            False,
        )
        for index in range(1, 9)
    ),
    Contender(
        "enc-luma2-chroma0",
        "libjpeg-turbo, luminance table 2, Annex K chrominance (Pillow)",
        pillow_jpeg(tables=(encoder.TUNED_QUANT_TABLE, encoder.ANNEX_K_QUANT_TABLE)),
        JPEG,
        False,
    ),
    Contender(
        "enc-mozjpeg-trellis",
        "mozjpeg, trellis + deringing + optimize_scans + quant_table 3 (libvips)",
        libvips_encoder(
            optimize_coding=True,
            trellis_quant=True,
            overshoot_deringing=True,
            optimize_scans=True,
            quant_table=3,
        ),
        JPEG,
        False,
    ),
    Contender(
        "enc-webp-smart",
        "libwebp effort 4, smart_subsample",
        libvips_encoder(effort=4, smart_subsample=True),
        WEBP,
        False,
    ),
    Contender("enc-webp-e2", "libwebp effort 2", libvips_encoder(effort=2), WEBP, False),
    Contender(
        "enc-webp-e4", "libwebp effort 4 (the pipeline's)", libvips_encoder(effort=4), WEBP, False
    ),
    Contender("enc-webp-e6", "libwebp effort 6", libvips_encoder(effort=6), WEBP, False),
    Contender("hq-2x", "linear-light Lanczos3, decode >= 2x", high_quality(2.0)),
    Contender("hq-4x", "linear-light Lanczos3, decode >= 4x", high_quality(4.0)),
)


# --- out of process -----------------------------------------------------------------


def thumbor_path(name: str, case: Case, quality: int, fmt: str) -> str:
    """thumbor's unsafe URL for the case (``fit-in`` for fit; a centred crop for fill)."""
    fit = "fit-in/" if case.mode == "fit" else ""
    filters = f"filters:format({fmt})" + (f":quality({quality})" if fmt != "png" else "")
    return f"/unsafe/{fit}{case.width}x{case.height}/{filters}/{name}"


@contextmanager
def thumbor(photos: Path, first: str, logs: Path) -> Iterator[Callable[[str], bytes]]:
    """thumbor serving ``photos`` on 127.0.0.1: yields ``get(path) -> bytes``."""
    with servers.thumbor(photos, first, processes=1, log_dir=logs) as running:

        def get(path: str) -> bytes:
            with urllib.request.urlopen(f"http://127.0.0.1:{running.port}{path}") as answer:
                return bytes(answer.read())

        yield get


def peer_outputs(
    contender: str, source: Path, case: Case, qualities: list[int], fmt: str
) -> dict[int, bytes]:
    """sorl-thumbnail's or easy-thumbnails' thumbnail of ``source`` at each quality."""
    with tempfile.TemporaryDirectory(prefix=f"{contender}-emit-") as out:
        command = [
            str(servers.PEERS_PYTHON),
            str(ROOT / "bench" / "peers" / "django_peers.py"),
            "--contender",
            contender,
            "--source",
            str(source),
            "--box",
            f"{case.width}x{case.height}",
            "--mode",
            case.mode,
            "--format",
            fmt,
            "--emit",
            out,
            "--qualities",
            ",".join(map(str, qualities)),
        ]
        subprocess.run(command, check=True, capture_output=True)
        return {
            q: (Path(out) / f"{contender}-{source.stem}-q{q}.{fmt}").read_bytes() for q in qualities
        }


def photo_paths(directory: Path, only: str = "") -> list[Path]:
    """The JPEG photos in ``directory`` (``only``: comma-separated names); exits if none."""
    paths = sorted(directory.glob("*.jpg"))
    if only:
        paths = [path for path in paths if path.name in only.split(",")]
    if not paths:
        raise SystemExit(f"no photos in {directory}: bash bench/fetch_photos.sh")
    return paths


def peers_available() -> bool:
    return servers.PEERS_PYTHON.exists()
