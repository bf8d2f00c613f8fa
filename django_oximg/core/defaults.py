"""The default of every setting the core uses, stated once.

``django_oximg.conf.OximgSettings`` (the settings reference users read) and
the core's own configuration objects (``RenderSettings``,
``ThumbnailerConfig``, ``HttpSourceConfig``) take their defaults from here,
so a plain-WSGI user who builds the core by hand gets the same behaviour as
a Django site that sets nothing. The values are explained where users look
for them: the docstrings of ``conf.OximgSettings``.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Literal

MIB = 1024 * 1024

#: Who decodes JPEG pixels (``JPEG_DECODER``).
JpegDecoder = Literal["libjpeg-turbo", "libvips"]

#: Who encodes results whose pixels are in memory (``ENCODER``).
Encoder = Literal["pillow", "libvips"]

#: How results are resized (``QUALITY_MODE``; the ``quality_mode`` option).
QualityMode = Literal["standard", "high"]

QUALITY: Mapping[str, int] = types.MappingProxyType({"jpeg": 80, "webp": 75, "avif": 65})
MAX_RESULT_DIMENSION = 8192
MAX_ANIMATION_FRAMES = 100
MAX_SRC_RESOLUTION = 50_000_000
MAX_SRC_FILE_SIZE = 50 * MIB
JPEG_SHRINK_MARGIN = 1.5
JPEG_PROGRESSIVE = False
JPEG_DECODER: JpegDecoder = "libjpeg-turbo"
ENCODER: Encoder = "pillow"
QUALITY_MODE: QualityMode = "standard"
AUTO_FORMAT = True
FORMAT_BEST_BY_DEFAULT = False
#: Per cent of a thumbnail's pixels on an edge below which ``best`` tries lossless too.
FORMAT_BEST_COMPLEXITY_THRESHOLD = 25.0
#: Megapixels of a result above which ``best`` encodes one format it picks (0: no limit).
FORMAT_BEST_MAX_RESOLUTION = 0.0
#: Whether ``best`` keeps ``skip_processing`` (imgproxy's ``BEST_FORMAT_ALLOW_SKIPS``).
FORMAT_BEST_ALLOW_SKIPS = False
ALLOW_UNSIGNED = False
QUEUE_TIMEOUT = 5.0
RENDER_TIMEOUT = 10.0
CACHE_CONTROL = "public, max-age=31536000, immutable"
METRICS = False
HIT_CACHE_BYTES = 32 * MIB
HTTP_TIMEOUT = 5.0
SOURCE_TIMEOUT = 10.0
CACHE_STORAGE_TIMEOUT = 3.0
COORDINATION_TIMEOUT = 0.5
HTTP_MAX_REDIRECTS = 5
HTTP_ALLOW_PRIVATE_NETWORKS = False
WATERMARK_OPACITY = 1.0
