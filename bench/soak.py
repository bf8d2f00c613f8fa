"""Soak: minutes of mixed good and bad traffic through gunicorn; does anything leak?

    .venv/bin/python bench/soak.py                  # 30 minutes, 20 requests/s
    .venv/bin/python bench/soak.py --minutes 10 --rate 20

Not run in CI. One gunicorn (gthread, tests/servers.py's helper, 127.0.0.1)
serves drawn sources and the bombs and broken files of tests/bombs.py. A
fixed-rate schedule (``--rate`` per second, at most ``--concurrency`` in
flight; arrivals that find every client busy are skipped and counted) sends:

* 70 % valid requests: one of a few sources at one of ~300 sizes and three
  formats, so the run mixes misses (renders, cache writes) with hits;
* 30 % bad ones: tampered signatures, bad options, missing and escaping
  source names, pixel floods, truncated, random and HTML bytes, SVG.

Every ``--sample`` seconds it records each worker's RSS and open file
descriptors (``/proc/<pid>/status`` VmRSS, ``/proc/<pid>/fd``), the number of
``tmp-oximg-*`` files and results in the cache, and the statuses so far. At
the end it prints the RSS slope after the warm-up (least-squares line through
the samples, MB per minute) and the fd minimum and maximum, and writes
everything as JSON to ``bench/results/soak-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from django_oximg.core.stores.protocols import TEMP_PREFIX  # noqa: E402
from tests import bombs, images  # noqa: E402
from tests.servers import Server, gunicorn, imgproxy_signature, imgproxy_url, request  # noqa: E402

RESULTS = ROOT / "bench" / "results"
MB = 1024 * 1024

#: Share of valid requests in the mix.
VALID_SHARE = 0.7

GOOD_SOURCES = ("photos/landscape.jpg", "photos/alpha.png", "photos/anim.gif")

#: Bad sources, by file name, with the bytes written for them.
BAD_FILES: dict[str, bytes] = {}


@dataclass
class Sample:
    """One observation of the server."""

    seconds: float
    workers: dict[int, dict[str, int]]
    temp_files: int
    results: int
    statuses: dict[str, int]
    skipped: int


@dataclass
class Tally:
    """Answers so far, thread-safe."""

    statuses: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, status: str) -> None:
        with self.lock:
            self.statuses[status] += 1

    def snapshot(self) -> tuple[dict[str, int], int]:
        with self.lock:
            return dict(self.statuses), self.skipped


def draw_sources(media: Path) -> None:
    photos = media / "photos"
    photos.mkdir(parents=True)
    (photos / "landscape.jpg").write_bytes(images.jpeg(1600, 1067))
    (photos / "alpha.png").write_bytes(images.png_with_alpha(800, 600))
    (photos / "anim.gif").write_bytes(images.animated_gif(240, 180, frames=8))
    jpeg = images.jpeg(640, 480)
    BAD_FILES.update(
        {
            "bad/flood.png": bombs.png_claiming(65535, 65535),
            "bad/lottapixel.jpg": bombs.lottapixel_jpeg(),
            "bad/jpeg-20k.jpg": bombs.flat_grey_jpeg(20000, 20000),
            "bad/uber.gif": bombs.gif_animation(64, 64, 20000),
            "bad/truncated.jpg": bombs.truncated(jpeg, 0.5),
            "bad/random.jpg": bombs.random_bytes(),
            "bad/empty.jpg": b"",
            "bad/page.jpg": bombs.HTML_PAGE,
            "bad/drawing.svg": b'<svg xmlns="http://www.w3.org/2000/svg"><rect/></svg>',
        }
    )
    for name, data in BAD_FILES.items():
        (media / name).parent.mkdir(parents=True, exist_ok=True)
        (media / name).write_bytes(data)


def valid_url(base: str, rng: random.Random) -> str:
    source = rng.choice(GOOD_SOURCES)
    size = rng.randrange(100, 400)
    fmt = rng.choice(("jpeg", "webp", "png" if source.endswith(".png") else "gif"))
    return imgproxy_url(base, f"/rs:fit:{size}:{size}/plain/{source}@{fmt}")


def bad_url(base: str, rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:  # a valid signature for another path
        path = "/rs:fit:100:100/plain/photos/landscape.jpg@jpeg"
        return (
            f"{base}/img/{imgproxy_signature(path)}/rs:fit:101:100/plain/photos/landscape.jpg@jpeg"
        )
    if kind == 1:
        return imgproxy_url(base, "/rs:sideways:10:10/plain/photos/landscape.jpg@jpeg")
    if kind == 2:
        return imgproxy_url(base, f"/w:100/plain/photos/missing-{rng.randrange(1000)}.jpg@jpeg")
    if kind == 3:
        return imgproxy_url(base, "/w:100/plain/%2e%2e/%2e%2e/etc/passwd@jpeg")
    name = rng.choice(sorted(BAD_FILES))
    return imgproxy_url(base, f"/rs:fit:{rng.randrange(50, 200)}:100/plain/{name}@jpeg")


def one_request(url: str, tally: Tally) -> None:
    try:
        tally.add(str(request(url, timeout=60).status))
    except Exception as error:
        tally.add(type(error).__name__)


def proc_numbers(pid: int) -> dict[str, int]:
    """RSS (bytes) and open descriptors of ``pid``; empty if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except (FileNotFoundError, ProcessLookupError):
        return {}
    rss = next(
        int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS")
    )
    return {"rss": rss, "fds": fds}


def observe(server: Server, started: float, tally: Tally) -> Sample:
    cache = server.media / "oximg"
    files = [p for p in cache.rglob("*") if p.is_file()] if cache.exists() else []
    temp = sum(p.name.startswith(TEMP_PREFIX) for p in files)
    statuses, skipped = tally.snapshot()
    return Sample(
        seconds=round(time.monotonic() - started, 1),
        workers={pid: proc_numbers(pid) for pid in sorted(server.worker_pids())},
        temp_files=temp,
        results=len(files) - temp,
        statuses=statuses,
        skipped=skipped,
    )


def slope_mb_per_minute(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, bytes) points, in MB per minute."""
    if len(points) < 2:
        return None
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    return slope * 60 / MB


def drive(server: Server, args: argparse.Namespace, tally: Tally) -> list[Sample]:
    """Send the mix at the fixed rate for the whole run, sampling as it goes."""
    rng = random.Random(args.seed)
    started = time.monotonic()
    end = started + args.minutes * 60
    samples = [observe(server, started, tally)]
    next_sample = started + args.sample
    in_flight = threading.BoundedSemaphore(args.concurrency)
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        arrival = started
        while arrival < end:
            arrival += 1 / args.rate
            pause = arrival - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            if time.monotonic() >= next_sample:
                samples.append(observe(server, started, tally))
                next_sample += args.sample
                print_sample(samples[-1])
            if not in_flight.acquire(blocking=False):
                with tally.lock:
                    tally.skipped += 1
                continue
            url = (
                valid_url(server.base, rng)
                if rng.random() < VALID_SHARE
                else bad_url(server.base, rng)
            )

            def run(url: str = url) -> None:
                try:
                    one_request(url, tally)
                finally:
                    in_flight.release()

            pool.submit(run)
    samples.append(observe(server, started, tally))
    return samples


def print_sample(sample: Sample) -> None:
    workers = ", ".join(
        f"{pid}: {numbers.get('rss', 0) / MB:.1f} MB {numbers.get('fds', 0)} fds"
        for pid, numbers in sample.workers.items()
    )
    total = sum(sample.statuses.values())
    print(
        f"{sample.seconds:7.0f} s  {total:6d} req  [{workers}]  tmp={sample.temp_files}", flush=True
    )


def summarise(samples: list[Sample], warmup_seconds: float) -> dict[str, Any]:
    pids = sorted({pid for sample in samples for pid in sample.workers})
    after = [s for s in samples if s.seconds >= warmup_seconds]
    per_worker = {}
    for pid in pids:
        points = [(s.seconds, float(s.workers[pid]["rss"])) for s in after if s.workers.get(pid)]
        fds = [s.workers[pid]["fds"] for s in samples if s.workers.get(pid)]
        rss = [s.workers[pid]["rss"] for s in samples if s.workers.get(pid)]
        per_worker[str(pid)] = {
            "rss_slope_mb_per_min": slope_mb_per_minute(points),
            "rss_first_mb": rss[0] / MB if rss else None,
            "rss_last_mb": rss[-1] / MB if rss else None,
            "rss_max_mb": max(rss) / MB if rss else None,
            "fd_min": min(fds) if fds else None,
            "fd_max": max(fds) if fds else None,
        }
    last = samples[-1]
    return {
        "workers": per_worker,
        "worker_pids_seen": pids,
        "requests": sum(last.statuses.values()),
        "statuses": last.statuses,
        "server_errors": sum(n for status, n in last.statuses.items() if status.startswith("5")),
        "skipped_arrivals": last.skipped,
        "temp_files_max": max(s.temp_files for s in samples),
        "temp_files_last": last.temp_files,
        "results_last": last.results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at most")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument(
        "--warmup", type=float, default=None, help="minutes left out of the slope (default: 1/5)"
    )
    parser.add_argument("--workers", type=int, default=1, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=16, help="gunicorn threads per worker")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    warmup = args.warmup if args.warmup is not None else min(5.0, args.minutes / 5)
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="oximg-soak-") as scratch:
        media = Path(scratch) / "media"
        draw_sources(media)
        with gunicorn(media, workers=args.workers, threads=args.threads) as server:
            samples = drive(server, args, tally)
    summary = summarise(samples, warmup * 60)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"soak-{stamp}.json"
    settings = {key: value for key, value in vars(args).items()} | {"warmup_minutes": warmup}
    out.write_text(
        json.dumps(
            {"settings": settings, "summary": summary, "samples": [asdict(s) for s in samples]},
            indent=1,
        )
    )
    print(json.dumps(summary, indent=1))
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
