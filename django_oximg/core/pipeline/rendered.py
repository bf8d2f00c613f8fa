"""What a render answers: :class:`Rendered`, the encoded result.

Its own module because both ways of rendering make one: the walk in this
process (:mod:`~django_oximg.core.pipeline.render`) and the walk in a child
process (:mod:`~django_oximg.core.pipeline.isolated`, which unpickles the
child's). Kept apart from both, neither has to import the other for it.
"""

from __future__ import annotations

from typing import NamedTuple

from django_oximg.core.pipeline.encode import CONTENT_TYPES


class Rendered(NamedTuple):
    """An encoded result."""

    data: bytes
    format: str
    width: int
    #: Height of one frame (the whole image for still output).
    height: int
    #: Frames in the output (1 unless an animation was kept).
    frames: int = 1
    #: The quality ``autoquality`` chose (sent as ``X-Oximg-Quality``); 0
    #: when the result was encoded at its fixed quality.
    quality: int = 0
    #: Encodes the ``autoquality`` search made (0 when it did not run):
    #: what the search cost, for the metrics.
    search_encodes: int = 0

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES[self.format]
