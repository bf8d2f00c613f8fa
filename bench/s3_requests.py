"""S3 requests per miss, as the S3 server saw them, with the result cache on S3 and leases in Redis.

    .venv/bin/python bench/s3_requests.py [--runs 3] [--before COMMIT] [--requests 24]

Two gunicorn nodes per contender, each as bench/node_memory.py starts one
(gthread, one worker, 64 threads, ``MEMORY_BUDGET`` 256 MiB, the
executor's defaults), sharing a source bucket and a result-cache bucket on
moto's S3 server (tests/s3_server.py, which logs every request it
receives) and ``COORDINATION_CACHE`` on one redis-server. The contenders:
the work tree, and with ``--before`` the package at that commit; each run
starts fresh nodes and an empty cache bucket for each, contenders
interleaved. The S3 server's log is emptied before each step and read after
it:

- ``one miss``: one request for a new thumbnail on the first node;
- ``its hit, other node``: the same URL on the second node;
- ``N concurrent, one new key``: ``--requests`` concurrent requests for one
  new thumbnail, alternating between the two nodes.

Requests are counted by bucket (source or cache) and method: a GET on the
cache bucket is a lookup (a hit's body comes with it), a HEAD a lookup
without the body, a PUT a stored result, a GET on the source bucket a source
read. Beside them, from the nodes' own counters (``/img/metrics``,
``METRICS`` on), how many requests found the result at their first lookup
and how many missed it: of N concurrent requests, those that arrive after
the result was stored are plain hits, so the lookups beyond each request's
first are what coordination costs. Medians with min-max over runs: a
concurrent step's lookups depend on when each request arrives.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import urllib.request
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import servers  # noqa: E402
from bench.node_memory import (  # noqa: E402
    BOXES,
    burst,
    node_env,
    node_settings,
    photo_url,
    s3_node,
    upload_photos,
)

#: The columns of the report: (bucket, method).
COLUMNS = (("source", "GET"), ("cache", "GET"), ("cache", "HEAD"), ("cache", "PUT"))

BUDGET_MIB = 256
THREADS = 64


def classify(
    requests: Iterable[tuple[str, str]], source_bucket: str, cache_bucket: str
) -> Counter[tuple[str, str]]:
    """Requests counted by (bucket role, method); anything else (a bucket operation) is "other"."""
    roles = {source_bucket: "source", cache_bucket: "cache"}
    counts: Counter[tuple[str, str]] = Counter()
    for method, path in requests:
        bucket, _, key = path.lstrip("/").partition("/")
        role = roles.get(bucket)
        counts[(role, method) if role and key else ("other", method)] += 1
    return counts


def metric_value(text: str, name: str) -> float:
    """The value of the unlabelled counter ``name`` in Prometheus' text format (0 if absent)."""
    for line in text.splitlines():
        metric, _, value = line.partition(" ")
        if metric in (name, f"{name}_total"):
            return float(value)
    return 0.0


def first_lookups(ports: Iterable[int]) -> Counter[str]:
    """Requests that found their result at their first lookup ("hit") or not ("miss"), all nodes."""
    found: Counter[str] = Counter()
    for port in ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/img/metrics", timeout=30) as answer:
            text = answer.read().decode()
        found["hit"] += int(metric_value(text, "oximg_cache_hits"))
        found["miss"] += int(metric_value(text, "oximg_cache_misses"))
    return found


def measure_contender(
    contender: str,
    run: int,
    args: argparse.Namespace,
    s3: Any,
    source_bucket: str,
    work: Path,
    redis_env: Mapping[str, str],
    before: Path | None,
) -> dict[str, dict[str, Any]]:
    """The steps of the module docstring on two fresh nodes: counts and statuses per step."""
    tag = f"{contender}{run}"
    cache_bucket = s3.new_bucket()
    env = node_env(s3, source_bucket, cache_bucket, redis_env)
    found: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        nodes = [
            stack.enter_context(
                s3_node(
                    work=work,
                    name=f"{contender}-{run}-{letter}",
                    first_path=photo_url(0, BOXES.smallest + index, f"{tag}warm{letter}"),
                    settings={**node_settings(BUDGET_MIB, coordinated=True), "METRICS": True},
                    env=env,
                    threads=THREADS,
                    package_root=before if contender == "oximg-before" else None,
                )
            )
            for index, letter in enumerate("ab")
        ]

        ports = [node.port for node in nodes]

        def step(name: str, requests: list[tuple[int, str]]) -> None:
            lookups = first_lookups(ports)
            s3.reset_requests()
            statuses = burst(requests)
            counts = classify(s3.requests, source_bucket, cache_bucket)
            found[name] = {
                "counts": counts,
                "statuses": dict(statuses),
                "first_lookups": first_lookups(ports) - lookups,
            }

        single = photo_url(1, BOXES.width, tag)
        step("one miss", [(nodes[0].port, single)])
        step("its hit, other node", [(nodes[1].port, single)])
        hot = photo_url(2, BOXES.width, tag)
        step(
            f"{args.requests} concurrent, one new key",
            [(nodes[index % 2].port, hot) for index in range(args.requests)],
        )
    return found


def table(results: Mapping[str, list[dict[str, dict[str, Any]]]]) -> list[str]:
    """One row per step and contender: requests by bucket and method, medians (min-max)."""
    lines = [
        "| step | contender | source GET | cache GET | cache HEAD | cache PUT | other "
        "| first lookup hit / miss | statuses |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    steps = list(next(iter(results.values()))[0])
    for step in steps:
        for contender, runs in results.items():
            counts = [run[step]["counts"] for run in runs]

            def cell(values: list[int]) -> str:
                median = statistics.median(values)
                text = f"{median:g}"
                return (
                    text if min(values) == max(values) else f"{text} ({min(values)}-{max(values)})"
                )

            cells = [cell([count[column] for count in counts]) for column in COLUMNS]
            other = cell(
                [sum(n for (role, _), n in count.items() if role == "other") for count in counts]
            )
            hit = cell([run[step]["first_lookups"]["hit"] for run in runs])
            miss = cell([run[step]["first_lookups"]["miss"] for run in runs])
            statuses = "; ".join(
                ", ".join(f"{s} x {n}" for s, n in sorted(run[step]["statuses"].items()))
                for run in runs
            )
            lines.append(
                f"| {step} | {contender} | {' | '.join(cells)} | {other} | {hit} / {miss} "
                f"| {statuses} |"
            )
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--before", metavar="COMMIT", help="add oximg-before: the package at COMMIT"
    )
    parser.add_argument("--requests", type=int, default=24, help="concurrent requests for one key")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from bench.load import checkout
    from tests.s3_server import s3_server_process

    work = Path(tempfile.mkdtemp(prefix="oximg-s3-requests-"))
    contenders = ["oximg", "oximg-before"] if args.before else ["oximg"]
    before = checkout(args.before, work) if args.before else None
    results: dict[str, list[dict[str, dict[str, Any]]]] = {name: [] for name in contenders}
    print(f"load average at start: {' '.join(f'{n:.2f}' for n in os.getloadavg())}", flush=True)
    with contextlib.ExitStack() as stack:
        s3 = stack.enter_context(s3_server_process())
        redis_env = stack.enter_context(servers.redis(work))
        source_bucket = s3.new_bucket()
        upload_photos(s3, source_bucket)
        for run in range(args.runs):
            order = contenders if run % 2 == 0 else contenders[::-1]
            for contender in order:
                found = measure_contender(
                    contender, run, args, s3, source_bucket, work, redis_env, before
                )
                results[contender].append(found)
                for step, figures in found.items():
                    counts = ", ".join(
                        f"{role} {method} {n}"
                        for (role, method), n in sorted(figures["counts"].items())
                    )
                    print(
                        f"  run {run + 1} {contender:<13} {step}: {counts}; "
                        f"first lookups {dict(figures['first_lookups'])}; {figures['statuses']}",
                        flush=True,
                    )
    print(f"load average at end: {' '.join(f'{n:.2f}' for n in os.getloadavg())}")
    print(
        f"\nS3 requests, sources and result cache on S3, COORDINATION_CACHE on redis-server, "
        f"two nodes of gunicorn gthread 1 x {THREADS} threads; {args.runs} runs, "
        "medians (min-max)"
    )
    for line in table(results):
        print(line)


if __name__ == "__main__":
    main()
