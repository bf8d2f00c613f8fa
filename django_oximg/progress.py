"""A progress indicator for long commands, on stderr.

On a terminal it is one line redrawn in place with ``\r``. When stderr is not
a terminal (logs, cron, CI, a pipe), a ``\r`` would not go back, and every
redraw would become a line of its own: plain lines are written instead, one
each time another tenth of the work is done, so a log gets at most eleven.
``--no-progress`` turns both off. stdout never gets any, so captured output
holds only the command's results and summary.
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

#: Plain lines (not a terminal) are written once per this many tenths done.
PLAIN_STEPS = 10


class Progress:
    """Counts work done and redraws ``label: done/total [####....] pct`` with ``\\r``.

    ``total`` None draws a plain count (for listings of unknown length).
    ``terminal`` False writes plain lines instead (see the module's docstring);
    an unknown total then gets one line, the count, at the end.
    Use as a context manager, so the line is cleared even when the work fails.
    """

    def __init__(
        self,
        label: str,
        total: int | None,
        write: Callable[[str], None],
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
        terminal: bool = True,
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.write = write
        self.enabled = enabled
        self.clock = clock
        self.terminal = terminal
        self._drawn_at: float | None = None
        self._width = 0
        self._step = 0  # tenths already written as plain lines

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
        if not self.terminal:
            self.write_plain_line()
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

    def write_plain_line(self) -> None:
        """A line of its own when another tenth is done (never for an unknown total)."""
        if not self.total:
            return
        step = min(self.done * PLAIN_STEPS // self.total, PLAIN_STEPS)
        if step > self._step:
            self._step = step
            self.write(self.line() + "\n")

    def line(self) -> str:
        if not self.total:
            return f"{self.label}: {self.done}"
        fraction = min(self.done / self.total, 1.0)
        filled = round(fraction * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        return f"{self.label}: {self.done}/{self.total} [{bar}] {fraction:4.0%}"

    def finish(self) -> None:
        """Erase the line, so what the command prints next starts clean.

        Plain lines stay; an unknown total gets its count written once, here.
        """
        if self.enabled and not self.terminal:
            if not self.total and self.done and not self._step:
                self._step = PLAIN_STEPS  # written: a second finish() adds nothing
                self.write(self.line() + "\n")
            return
        if self.enabled and self._width:
            self.write("\r" + " " * self._width + "\r")
            self._width = 0


def add_progress_argument(parser: ArgumentParser) -> None:
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="Never draw the progress bar (redrawn in place on a terminal, else a line "
        "per tenth done).",
    )


def progress_for(
    command: BaseCommand, label: str, total: int | None, options: dict[str, object]
) -> Progress:
    """A :class:`Progress` on the command's stderr: in place on a terminal, else plain lines."""
    stderr = command.stderr

    def write(text: str) -> None:
        stderr.write(text, style_func=lambda plain: plain, ending="")
        stderr.flush()

    enabled = not options.get("no_progress")
    return Progress(label, total, write, enabled=enabled, terminal=stderr.isatty())
