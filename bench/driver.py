"""Closed-loop HTTP load: wrk when installed, else an asyncio raw-socket client.

Django-free and pyvips-free, so it can drive any server (django-oximg, thumbor,
whitenoise) and be unit-tested without either.

Each connection gets its own list of URLs and walks through it, so with
"diverse" URLs no two requests in a run ask for the same thing (neither a
result cache nor single-flight can help), and with "same-URL" lists every
request asks for one thing. Keep-alive is the default; ``close=True`` sends
``Connection: close`` and opens a connection per request, as a browser behind
a proxy that does not pool would.

Figures per run: completed requests and statuses, req/s, latency percentiles
(nearest rank), bytes per response. Server-side figures (CPU per request,
RSS) come from :class:`ProcessSample` over the server's process tree, and
what other processes took meanwhile from :class:`OtherLoad`.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

#: A request taking longer than this is counted as a client failure (status 0).
REQUEST_TIMEOUT = 60.0

#: Bytes read per socket call; a 500 px thumbnail fits in one or two.
READ_SIZE = 256 * 1024


# --- statistics ---------------------------------------------------------------


def percentile(sorted_values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile of already sorted values (nan when empty)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(share * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


@dataclass
class RunStats:
    """One measured run of one contender at one point."""

    requests: int
    seconds: float
    statuses: dict[int, int]
    p50_ms: float
    p95_ms: float
    p99_ms: float
    bytes_per_response: float
    driver: str
    #: Server CPU ms per completed request (nan when the server is not a process we see).
    cpu_ms_per_request: float = math.nan
    #: Server CPU seconds over wall seconds: how many cores it kept busy.
    cores_used: float = math.nan
    peak_rss_mib: float = math.nan
    #: Minor page faults of the server's processes per completed request:
    #: memory handed back to the kernel and touched afresh (MALLOC_THRESHOLD).
    page_faults_per_request: float = math.nan
    #: Context switches of the server's threads per completed request (threads
    #: alive at both ends of the run): work and the GIL handed between threads.
    switches_per_request: float = math.nan
    #: Connections that reached the end of their distinct paths and started
    #: over: their later requests may have been cache hits, not misses.
    wrapped: int = 0

    @property
    def ok(self) -> int:
        return sum(count for status, count in self.statuses.items() if 200 <= status < 300)

    @property
    def rps(self) -> float:
        """Successful requests per second."""
        return self.ok / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["statuses"] = {str(k): v for k, v in self.statuses.items()}
        data["rps"] = self.rps
        return data


def stats_from_samples(
    latencies: Iterable[float],
    statuses: Iterable[int],
    sizes: Iterable[int],
    seconds: float,
    wrapped: int = 0,
) -> RunStats:
    """Summarise one run of the Python driver (latencies in seconds)."""
    ordered = sorted(latencies)
    status_counts = Counter(statuses)
    size_list = list(sizes)
    return RunStats(
        requests=len(ordered),
        seconds=seconds,
        statuses=dict(status_counts),
        p50_ms=1000 * percentile(ordered, 0.50),
        p95_ms=1000 * percentile(ordered, 0.95),
        p99_ms=1000 * percentile(ordered, 0.99),
        bytes_per_response=statistics.fmean(size_list) if size_list else math.nan,
        driver="python",
        wrapped=wrapped,
    )


@dataclass
class Spread:
    """Median with min and max over repeated runs."""

    median: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def spread(values: Iterable[float]) -> Spread:
    """Median and range of the finite values (all nan when there are none)."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return Spread(math.nan, math.nan, math.nan)
    return Spread(statistics.median(finite), min(finite), max(finite))


# --- URL lists ----------------------------------------------------------------


#: Widths used by "diverse" URLs: the reference benchmarks' 485-500.
DIVERSE_WIDTHS = range(485, 501)


def diverse_widths(count: int, offset: int = 0) -> list[int]:
    """``count`` widths cycling through 485..500, starting ``offset`` places in."""
    span = len(DIVERSE_WIDTHS)
    return [DIVERSE_WIDTHS.start + (offset + i) % span for i in range(count)]


def per_connection(urls: Sequence[str], connections: int) -> list[list[str]]:
    """Deal ``urls`` round-robin into one list per connection (no URL in two lists)."""
    if connections < 1:
        raise ValueError("connections must be >= 1")
    return [list(urls[index::connections]) for index in range(connections)]


# --- the Python driver --------------------------------------------------------


@dataclass
class Response:
    status: int
    body_bytes: int
    keep_alive: bool


_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})")


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """Status and lower-cased headers of a response head (without the blank line)."""
    lines = head.split(b"\r\n")
    match = _STATUS_LINE.match(lines[0])
    if not match:
        raise ValueError(f"not an HTTP response: {lines[0][:60]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return int(match.group(1)), headers


async def read_response(reader: asyncio.StreamReader) -> Response:
    """Read one response: head, then a Content-Length, chunked or until-close body."""
    head = await reader.readuntil(b"\r\n\r\n")
    status, headers = parse_head(head[:-4])
    keep_alive = headers.get("connection", "").lower() != "close"
    if "content-length" in headers:
        length = int(headers["content-length"])
        await reader.readexactly(length)
        return Response(status, length, keep_alive)
    if "chunked" in headers.get("transfer-encoding", "").lower():
        total = 0
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            total += size
            if size == 0:
                return Response(status, total, keep_alive)
    body = await reader.read(-1)
    return Response(status, len(body), False)


def request_bytes(path: str, close: bool) -> bytes:
    connection = "close" if close else "keep-alive"
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: {connection}\r\n\r\n".encode()


async def _connection_loop(
    port: int, paths: list[str], stop_at: float, close: bool, out: list[tuple[float, int, int]]
) -> bool:
    """One client: send its paths in order, each after the previous answer.

    Returns whether it ran out of paths and started over.
    """
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    index = 0
    try:
        while time.perf_counter() < stop_at:
            path = paths[index % len(paths)]
            index += 1
            start = time.perf_counter()
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                assert reader is not None
                writer.write(request_bytes(path, close))
                response = await asyncio.wait_for(read_response(reader), REQUEST_TIMEOUT)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError):
                out.append((time.perf_counter() - start, 0, 0))
                _closed(writer)
                writer = None
                continue
            out.append((time.perf_counter() - start, response.status, response.body_bytes))
            if close or not response.keep_alive:
                _closed(writer)
                writer = None
    finally:
        _closed(writer)
    return index > len(paths)


def _closed(writer: asyncio.StreamWriter | None) -> None:
    if writer is not None:
        writer.close()


async def _closed_loop(
    port: int, lists: list[list[str]], seconds: float, close: bool
) -> tuple[list[tuple[float, int, int]], float, int]:
    out: list[tuple[float, int, int]] = []
    start = time.perf_counter()
    stop_at = start + seconds
    wrapped = await asyncio.gather(*(_connection_loop(port, p, stop_at, close, out) for p in lists))
    return out, time.perf_counter() - start, sum(wrapped)


def python_closed_loop(
    port: int, lists: list[list[str]], seconds: float, close: bool = False
) -> RunStats:
    """Run ``len(lists)`` clients for ``seconds``; each walks its own path list."""
    out, elapsed, wrapped = asyncio.run(_closed_loop(port, lists, seconds, close))
    return stats_from_samples(
        (s[0] for s in out), (s[1] for s in out), (s[2] for s in out), elapsed, wrapped
    )


# --- wrk ----------------------------------------------------------------------


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def write_path_lists(lists: list[list[str]], directory: Path) -> None:
    """One file per connection (``1``, ``2``, ...), a path per line, for :func:`wrk_script`."""
    for number, paths in enumerate(lists, start=1):
        (directory / str(number)).write_text("".join(path + "\n" for path in paths))


def wrk_script(directory: Path, close: bool) -> str:
    """A wrk Lua script: thread N (one connection each) walks the paths in file N.

    wrk runs ``request()`` per thread, so the harness starts one thread per
    connection (``-t c -c c``) and each connection owns its list (unless
    all lists are one: :func:`wrk_threads`). Each
    thread reads only its own file: the lists for c=64 would be megabytes,
    and every thread's Lua state would hold all of them if they were in the
    script. A JSON summary at the end counts the threads that ran out of
    paths and started over (``wrapped``).
    """
    header = '\nwrk.headers["Connection"] = "close"' if close else ""
    return f"""-- generated by bench/driver.py
local directory = {json.dumps(str(directory))}
local counter = 0
local threads = {{}}{header}

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

function init(args)
  paths = {{}}
  for line in io.lines(directory .. "/" .. id) do table.insert(paths, line) end
  position = 0
  sizes = 0
  wrapped = 0
end

function request()
  position = position + 1
  if position > #paths then wrapped = 1 end
  local path = paths[((position - 1) % #paths) + 1]
  return wrk.format("GET", path)
end

function response(status, headers, body)
  if body then sizes = sizes + #body end
end

function done(summary, latency, requests)
  local total, wraps = 0, 0
  for _, thread in ipairs(threads) do
    total = total + (thread:get("sizes") or 0)
    wraps = wraps + (thread:get("wrapped") or 0)
  end
  io.write(string.format(
    'WRKJSON {{"requests": %d, "micros": %d, "p50": %d, "p95": %d, "p99": %d, ' ..
    '"non2xx": %d, "connect": %d, "read": %d, "write": %d, "timeout": %d, "bytes": %d, ' ..
    '"wrapped": %d}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(95),
    latency:percentile(99), summary.errors.status, summary.errors.connect,
    summary.errors.read, summary.errors.write, summary.errors.timeout, total, wraps))
end
"""


def parse_wrk_output(text: str) -> RunStats:
    """The :class:`RunStats` from the WRKJSON line our script prints."""
    for line in text.splitlines():
        if line.startswith("WRKJSON "):
            data = json.loads(line[len("WRKJSON ") :])
            break
    else:
        raise ValueError("no WRKJSON line in wrk output:\n" + text[-2000:])
    requests = int(data["requests"])
    failed = sum(int(data[k]) for k in ("connect", "read", "write", "timeout"))
    non2xx = int(data["non2xx"])
    statuses = {200: max(0, requests - non2xx)}
    if non2xx:
        statuses[599] = non2xx  # wrk does not say which status; 599 = "not 2xx/3xx"
    if failed:
        statuses[0] = failed
    ok = statuses[200]
    return RunStats(
        requests=requests,
        seconds=int(data["micros"]) / 1e6,
        statuses=statuses,
        p50_ms=int(data["p50"]) / 1000,
        p95_ms=int(data["p95"]) / 1000,
        p99_ms=int(data["p99"]) / 1000,
        bytes_per_response=int(data["bytes"]) / ok if ok else math.nan,
        driver="wrk",
        wrapped=int(data.get("wrapped", 0)),
    )


def wrk_threads(lists: list[list[str]]) -> int:
    """wrk threads for ``lists``: one per connection, unless every list is the same.

    Each thread walks its own list, so distinct lists need a thread per
    connection. Identical ones (one URL asked again and again: cache hits)
    are served as well by as many threads as there are CPUs, and the load
    generator then takes less of the machine it shares with the server (64
    threads for 64 connections took a third of 2 CPUs in a hit run).
    """
    if all(paths == lists[0] for paths in lists):
        return min(len(lists), os.cpu_count() or 1)
    return len(lists)


def wrk_closed_loop(
    port: int, lists: list[list[str]], seconds: float, close: bool = False
) -> RunStats:
    """Run wrk over ``lists`` (one connection each) for ``seconds``."""
    with tempfile.TemporaryDirectory(prefix="oximg-wrk-") as work:
        directory = Path(work)
        write_path_lists(lists, directory)
        script = directory / "script.lua"
        script.write_text(wrk_script(directory, close))
        connections = len(lists)
        command = [
            "wrk",
            f"-t{wrk_threads(lists)}",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            f"--timeout={int(REQUEST_TIMEOUT)}s",
            "-s",
            str(script),
            f"http://127.0.0.1:{port}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        return parse_wrk_output(done.stdout + done.stderr)


def closed_loop(
    port: int, lists: list[list[str]], seconds: float, close: bool = False, use_wrk: bool = True
) -> RunStats:
    """wrk when asked and installed, else the Python driver."""
    if use_wrk and wrk_available():
        return wrk_closed_loop(port, lists, seconds, close)
    return python_closed_loop(port, lists, seconds, close)


# --- server processes ---------------------------------------------------------


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants (Linux /proc children lists)."""
    found = [root]
    index = 0
    while index < len(found):
        pid = found[index]
        index += 1
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                found.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                continue
    return list(dict.fromkeys(found))


def cpu_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime of ``pid`` (0 when it is gone)."""
    return cpu_and_faults(pid)[0]


def cpu_and_faults(pid: int) -> tuple[float, int]:
    """(CPU seconds as :func:`cpu_seconds`, minflt + cminflt) of ``pid``, from one read.

    (0, 0) when it is gone.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0, 0
    fields = text.rsplit(")", 1)[1].split()
    # After the ")": state is field 3, so minflt (10) is index 7, utime (14) index 11.
    return sum(int(v) for v in fields[11:15]) / CLOCK_TICKS, int(fields[7]) + int(fields[8])


def tree_cpu_and_faults(pids: list[int]) -> tuple[float, int]:
    """:func:`cpu_and_faults` summed over ``pids``."""
    counters = [cpu_and_faults(pid) for pid in pids]
    return sum(cpu for cpu, _ in counters), sum(faults for _, faults in counters)


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds ``root`` and its descendants (a server's master and workers) have used."""
    return tree_cpu_and_faults(process_tree(root))[0]


def thread_switches(pids: list[int]) -> dict[str, int]:
    """Voluntary and involuntary context switches per thread ("pid/tid") of ``pids``."""
    counts = {}
    for pid in pids:
        for status in Path(f"/proc/{pid}/task").glob("*/status"):
            try:
                text = status.read_text()
            except OSError:
                continue
            counts[f"{pid}/{status.parent.name}"] = sum(
                int(line.split()[1]) for line in text.splitlines() if "ctxt_switches" in line
            )
    return counts


def rss_mib(pid: int, field_name: str = "VmRSS") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class ProcessSample:
    """CPU of a server's process tree between :meth:`start` and :meth:`stop`."""

    root: int
    pids: list[int] = field(default_factory=list)
    cpu: float = 0.0
    faults: int = 0
    switches: dict[str, int] = field(default_factory=dict)
    wall: float = 0.0

    def start(self) -> None:
        self.pids = process_tree(self.root)
        self.cpu, self.faults = tree_cpu_and_faults(self.pids)
        self.switches = thread_switches(self.pids)
        self.wall = time.perf_counter()

    def stop(self, stats: RunStats) -> RunStats:
        """Fill in the server-side figures of ``stats``."""
        wall = time.perf_counter() - self.wall
        pids = process_tree(self.root)
        cpu, faults = tree_cpu_and_faults(pids)
        cpu, faults = cpu - self.cpu, faults - self.faults
        stats.cpu_ms_per_request = 1000 * cpu / stats.ok if stats.ok else math.nan
        stats.cores_used = cpu / wall if wall > 0 else math.nan
        stats.page_faults_per_request = faults / stats.ok if stats.ok else math.nan
        after = thread_switches(pids)
        switched = sum(
            count - self.switches[task] for task, count in after.items() if task in self.switches
        )
        stats.switches_per_request = switched / stats.ok if stats.ok else math.nan
        # Peak RSS: the largest VmHWM of any process of the tree (workers, not the sum).
        stats.peak_rss_mib = max((rss_mib(p, "VmHWM") for p in pids), default=math.nan)
        return stats


T = TypeVar("T")


def under_perf(
    root: int, data: Path, run: Callable[[], T], frequency: int = 999, stacks: bool = False
) -> tuple[T, dict[str, float]]:
    """``run()`` while Linux ``perf record`` samples every process of ``root``'s tree.

    Returns what ``run`` returned and perf's share of the samples (0..1) per
    shared object (``perf report --sort dso``); the samples go to ``data``.
    ``stacks`` records each sample's call stack too (DWARF unwinding: the
    interpreter and libc keep no frame pointers), for :func:`perf_stacks`.
    """
    pids = ",".join(str(pid) for pid in process_tree(root))
    graph = ["--call-graph", "dwarf,16384"] if stacks else []
    recorder = subprocess.Popen(
        ["perf", "record", "-q", "-F", str(frequency), *graph, "-p", pids, "-o", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        result = run()
    finally:
        recorder.send_signal(signal.SIGINT)  # perf writes its file and exits
        recorder.wait(timeout=60)
    report = subprocess.run(
        # --no-children: each sample counted once, in its own function's object,
        # also when call stacks were recorded.
        [
            "perf",
            "report",
            "-i",
            str(data),
            "--sort",
            "dso",
            "--stdio",
            "-g",
            "none",
            "--no-children",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return result, perf_shares(report)


def perf_shares(report: str) -> dict[str, float]:
    """Share of samples (0..1) per shared object from ``perf report --sort dso`` text."""
    shares: dict[str, float] = {}
    for line in report.splitlines():
        match = re.match(r"\s*([\d.]+)%\s+(\S+)", line)  # "#" comment lines never match
        if match:
            shares[match.group(2)] = shares.get(match.group(2), 0.0) + float(match.group(1)) / 100
    return shares


def perf_stacks(data: Path) -> list[list[str]]:
    """Every sample's call stack in ``data`` (recorded with stacks), innermost function first."""
    script = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "ip,sym"],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    samples: list[list[str]] = []
    stack: list[str] = []
    for line in script.splitlines():
        parts = line.split()
        if len(parts) >= 2:  # "address symbol+offset"
            stack.append(parts[1].split("+0x")[0])
        elif stack:  # a blank line ends a sample
            samples.append(stack)
            stack = []
    if stack:
        samples.append(stack)
    return samples


def wait_until_idle(
    root: int, interval: float = 0.2, busy: float = 0.05, limit: float = 30.0
) -> float:
    """Wait until the process tree of ``root`` uses under ``busy`` CPUs; return the seconds waited.

    A server still rendering requests the driver stopped waiting for (thumbor
    keeps working through its queue after wrk exits: 0.35 CPUs of a slow
    fill case spilled into the next contender's run) would otherwise take
    the CPU of whatever is measured next. Gives up after ``limit`` seconds.
    """
    started = time.monotonic()
    before = sum(cpu_seconds(pid) for pid in process_tree(root))
    while time.monotonic() - started < limit:
        time.sleep(interval)
        after = sum(cpu_seconds(pid) for pid in process_tree(root))
        if after - before < busy * interval:
            break
        before = after
    return time.monotonic() - started


# --- the machine ---------------------------------------------------------------


def machine_busy_seconds() -> float:
    """All CPUs' non-idle time since boot (Linux /proc/stat, first line)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / CLOCK_TICKS


def own_cpu_seconds() -> float:
    """CPU time of this process plus its waited-for descendants."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


class OtherLoad:
    """CPU used by processes other than this one and its children, as a number of CPUs.

    Start it, run the work (children must have been waited for), then call
    :meth:`cpus`: the machine's busy time from /proc/stat, less our own and our
    children's CPU time (and ``also_ours``: a server's, measured apart), over
    the wall time. On a shared machine that, not the contender, can decide
    a result, so every harness reports it.
    """

    def __init__(self) -> None:
        self.busy = machine_busy_seconds()
        self.ours = own_cpu_seconds()
        self.wall = time.perf_counter()

    def cpus(self, also_ours: float = 0.0) -> float:
        wall = time.perf_counter() - self.wall
        if wall <= 0:
            return math.nan
        busy = machine_busy_seconds() - self.busy
        ours = own_cpu_seconds() - self.ours + also_ours
        return max(0.0, (busy - ours) / wall)
