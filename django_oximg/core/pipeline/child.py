"""The child process of an isolated render: ``python -m django_oximg.core.pipeline.child``.

Reads from standard input an 8-byte length, that many bytes of a pickled
``(plan, settings, libvips threads)`` and then the source to the end;
renders in this process (:func:`~django_oximg.core.pipeline.render.render_here`,
with no deadline of its own: the parent kills this process at its
deadline); writes to standard output the pickled
:class:`~django_oximg.core.pipeline.rendered.Rendered`, or the project error
that stopped it. Anything else (a bug) is a traceback on standard error and
a non-zero exit status. Only :mod:`django_oximg.core.pipeline.isolated`
starts it, and it trusts nothing but its parent's pipe.
"""

from __future__ import annotations

import pickle
import sys

from django_oximg.core.errors import OximgError
from django_oximg.core.pipeline.libvips import configure
from django_oximg.core.pipeline.render import render_here


def main() -> None:
    source = sys.stdin.buffer
    length = int.from_bytes(source.read(8), "big")
    plan, settings, concurrency = pickle.loads(source.read(length))
    data = source.read()
    configure(concurrency=concurrency)
    try:
        answer: object = render_here(data, plan, settings, None)
    except OximgError as error:
        answer = error
    sys.stdout.buffer.write(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
