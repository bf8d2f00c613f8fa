"""What a hand-written libvips program does: ``manage.py oximg_bench``'s ceiling.

Outside ``core/``, this is the one module besides the pipeline that
imports pyvips, on purpose: the benchmark compares the pipeline with bare
libvips, so the bare side must not go through the pipeline's probe, plan
or steps. It shares only the pipeline's saver options, so both sides
encode alike. Nothing here serves requests.
"""

from __future__ import annotations

import pyvips

from django_oximg.core.pipeline.encode import save
from django_oximg.core.pipeline.libvips import ensure_configured
from django_oximg.core.pipeline.plan import plan_encoder
from django_oximg.core.pipeline.steps.canvas import WHITE


def bare_thumbnail(data: bytes, width: int, height: int, fmt: str, quality: int) -> bytes:
    """libvips' thumbnail and saver alone, with the encoder options the pipeline uses.

    No probe, plan, checks or steps: what a hand-written libvips program would
    do for a plain fit.
    """
    ensure_configured()
    image = pyvips.Image.thumbnail_buffer(data, width, height=height)
    if fmt == "jpeg" and image.hasalpha():
        image = image.flatten(background=list(WHITE))
    effort, _seconds, _isolated = plan_encoder(fmt, image.width * image.height, 1)
    return save(image, fmt, quality, 0, effort)


def sample_jpeg(width: int, height: int, quality: int = 90) -> bytes:
    """A photo-like JPEG (gradients plus sensor-like noise) for benchmarks.

    Flat synthetic images decode and compress unrealistically fast; the noise
    keeps the entropy of a real photo (about 2 bits per pixel at q90).
    """
    xyz = pyvips.Image.xyz(width, height)
    x, y = xyz[0], xyz[1]
    red = x * (200.0 / width) + 30
    green = y * (180.0 / height) + 40
    blue = ((x * 0.013).sin() * (y * 0.011).cos() + 1) * 90 + 30
    noise = pyvips.Image.gaussnoise(width, height, sigma=10, mean=0, seed=42)
    image = (red.bandjoin([green, blue]) + noise).cast("uchar").copy(interpretation="srgb")
    return bytes(image.jpegsave_buffer(Q=quality))
