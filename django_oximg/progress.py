"""A one-line progress indicator for long commands, redrawn in place on stderr.

Only drawn for a person watching: off when stderr is not a terminal (logs,
cron, CI, tests) or with ``--no-progress``, so captured output holds only the
command's results and summary.
"""

from __future__ import annotations

import time
from argparse import ArgumentParser
from collections.abc import Callable
from types import TracebackType

from django.core.management.base import BaseCommand

#: Seconds between redraws: often enough to look alive, rarely enough to cost nothing.
REDRAW_INTERVAL = 0.1

#: Characters in the bar.
BAR_WIDTH = 30


class Progress:
    """Counts work done and redraws ``label: done/total [####....] pct`` with ``\\r``.

    ``total`` None draws a plain count (for listings of unknown length).
    Use as a context manager, so the line is cleared even when the work fails.
    """

    def __init__(
        self,
        label: str,
        total: int | None,
        write: Callable[[str], None],
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.write = write
        self.enabled = enabled
        self.clock = clock
        self._drawn_at: float | None = None
        self._width = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.finish()

    def advance(self, count: int = 1) -> None:
        self.done += count
        if not self.enabled:
            return
        now = self.clock()
        finished = self.total is not None and self.done >= self.total
        if finished or self._drawn_at is None or now - self._drawn_at >= REDRAW_INTERVAL:
            self._drawn_at = now
            self.draw()

    def draw(self) -> None:
        line = self.line()
        # Pad with spaces so a shorter line fully covers the previous one.
        self.write("\r" + line.ljust(self._width))
        self._width = len(line)

    def line(self) -> str:
        if not self.total:
            return f"{self.label}: {self.done}"
        fraction = min(self.done / self.total, 1.0)
        filled = round(fraction * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        return f"{self.label}: {self.done}/{self.total} [{bar}] {fraction:4.0%}"

    def finish(self) -> None:
        """Erase the line, so what the command prints next starts clean."""
        if self.enabled and self._width:
            self.write("\r" + " " * self._width + "\r")
            self._width = 0


def add_progress_argument(parser: ArgumentParser) -> None:
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="Never draw the progress bar (it is drawn only when stderr is a terminal).",
    )


def progress_for(
    command: BaseCommand, label: str, total: int | None, options: dict[str, object]
) -> Progress:
    """A :class:`Progress` on the command's stderr, on only for a terminal."""
    stderr = command.stderr

    def write(text: str) -> None:
        stderr.write(text, style_func=lambda plain: plain, ending="")
        stderr.flush()

    enabled = not options.get("no_progress") and stderr.isatty()
    return Progress(label, total, write, enabled=enabled)
