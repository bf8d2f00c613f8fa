"""Run the test suite several times in a row while a second copy of it runs beside it.

``make stress`` runs this. A test that passes alone but depends on an idle
machine (a sleep, a short bound, thread scheduling order) fails here, where
two suites share the CPUs. The *measured* copy runs the suite ``--runs``
times in a row (3 by default); the *load* copy starts the suite again each
time it ends, for as long as the measured runs last, and its run still going
when they end is stopped and not counted. Every run that finished counts,
the load copy's too: the command exits 1 if any of them failed.

Each run has a directory of its own for pytest's temporary files
(``--basetemp``), for ``TMPDIR`` and for Hypothesis's example database, and
no pytest cache is written, so nothing is shared with the other copy or with
``make test``; the tests bind their ports to 0. Logs are kept, and their
directory printed, when a run fails.

Usage: ``python tests/stress.py [--runs N] [--timeout S] [-- pytest arguments]``,
from the repository root; pytest arguments (say ``tests/test_executor.py``, or
``-k coordination``) make the suite smaller.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

#: A run that takes longer than this has hung: it is stopped and counted as failed.
DEFAULT_RUN_TIMEOUT = 3600.0

#: How long a stopped run gets to end on SIGTERM before it is killed.
STOP_GRACE = 30.0

#: pytest's last line: "12 passed, 1 skipped in 3.41s", "1 deselected in 0.30s (0:00:00)".
CLOSING_LINE = re.compile(r"\d+ \w+.* in [\d.]+s( \([\d:]+\))?( =+)?$")


@dataclass
class Outcome:
    """One finished run of the suite."""

    copy: str
    number: int
    returncode: int
    seconds: float
    log: Path

    @property
    def passed(self) -> bool:
        return self.returncode == 0

    def summary(self) -> str:
        """pytest's closing line, e.g. ``1650 passed, 40 skipped in 612.3s``."""
        lines = self.log.read_text(errors="replace").splitlines()
        closing = [line.strip("= ") for line in lines if CLOSING_LINE.search(line)]
        return closing[-1] if closing else f"no closing line (exit status {self.returncode})"

    def failures(self) -> list[str]:
        """The ``FAILED``/``ERROR`` lines of pytest's short summary."""
        return [
            line
            for line in self.log.read_text(errors="replace").splitlines()
            if line.startswith(("FAILED ", "ERROR "))
        ]


class Copy:
    """One copy of the suite: runs of pytest, one after another, each in its own directories."""

    def __init__(self, name: str, work: Path, pytest_args: list[str], timeout: float) -> None:
        self.name = name
        self.work = work
        self.pytest_args = pytest_args
        self.timeout = timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def run(self, number: int) -> Outcome | None:
        """Run the suite once; None when :meth:`stop` ended it before it finished."""
        run_dir = self.work / f"{self.name}-{number}"
        for sub in ("tmp", "hypothesis"):
            (run_dir / sub).mkdir(parents=True)
        log = run_dir / "pytest.log"
        env = {
            **os.environ,
            "TMPDIR": str(run_dir / "tmp"),
            "HYPOTHESIS_STORAGE_DIRECTORY": str(run_dir / "hypothesis"),
        }
        command = [
            sys.executable,
            *("-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE"),
            f"--basetemp={run_dir / 'basetemp'}",
            *self.pytest_args,
        ]
        started = time.monotonic()
        with self.lock:
            if self.stopping.is_set():
                return None
            with log.open("wb") as out:
                # A session of its own: stop() ends the servers the tests started too.
                self.process = subprocess.Popen(
                    command,
                    cwd=REPO_ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        try:
            returncode = self.process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            with log.open("a") as out:
                out.write(f"\nFAILED (stress) the run took longer than {self.timeout:g} s\n")
            self.end(self.process)
            returncode = -1
        if self.stopping.is_set():
            return None
        return Outcome(self.name, number, returncode, time.monotonic() - started, log)

    def stop(self) -> None:
        """End the run going on, if any, and start no other."""
        with self.lock:
            self.stopping.set()
            process = self.process
        if process is not None and process.poll() is None:
            self.end(process)

    @staticmethod
    def end(process: subprocess.Popen[bytes]) -> None:
        """SIGTERM to the run's process group, then SIGKILL if it lingers."""
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass


def stress(runs: int, timeout: float, pytest_args: list[str], work: Path) -> list[Outcome]:
    """The measured copy's ``runs`` runs and the load copy's finished ones."""
    measured = Copy("measured", work, pytest_args, timeout)
    load = Copy("load", work, pytest_args, timeout)
    outcomes: list[Outcome] = []

    def keep_loading() -> None:
        number = 1
        while not load.stopping.is_set():
            outcome = load.run(number)
            if outcome is not None:
                report(outcome)
                outcomes.append(outcome)
            number += 1

    loader = threading.Thread(target=keep_loading, name="load-copy")
    loader.start()
    try:
        for number in range(1, runs + 1):
            outcome = measured.run(number)
            assert outcome is not None
            report(outcome)
            outcomes.append(outcome)
    finally:  # also on Ctrl-C or SIGTERM: the runs are in sessions of their own
        load.stop()
        measured.stop()
        loader.join()
    return outcomes


def report(outcome: Outcome) -> None:
    verdict = "passed" if outcome.passed else "FAILED"
    print(
        f"{outcome.copy} run {outcome.number}: {verdict} in {outcome.seconds:.0f} s "
        f"({outcome.summary()})",
        flush=True,
    )
    for line in outcome.failures():
        print(f"    {line}", flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="measured runs in a row (3)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_RUN_TIMEOUT,
        help=f"seconds after which a run counts as hung and failed ({DEFAULT_RUN_TIMEOUT:g})",
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to each pytest run")
    options = parser.parse_args(argv)
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the runs on the way out
    work = Path(tempfile.mkdtemp(prefix="oximg-stress-"))
    started = time.monotonic()
    print(
        f"stress: {options.runs} run(s) of the suite beside a second copy of it; logs in {work}",
        flush=True,
    )
    outcomes = stress(options.runs, options.timeout, options.pytest_args, work)
    failed = [outcome for outcome in outcomes if not outcome.passed]
    minutes = (time.monotonic() - started) / 60
    print(
        f"stress: {len(outcomes) - len(failed)} passed, {len(failed)} failed "
        f"(runs of the suite, both copies) in {minutes:.1f} min",
        flush=True,
    )
    if failed:
        print(f"stress: the logs are kept in {work}", flush=True)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
