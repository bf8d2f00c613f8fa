"""libvips' JPEG saver alone, from C, on two threads of one process against two processes.

    .venv/bin/python bench/saver_threads.py [--saves 600] [--runs 3] [--json F]

The question: when two renders in one process keep fewer cores busy than
two processes, is it the GIL or libvips? Here Python is out of the way:
each save is one ``ctypes`` call into libvips (``vips_jpegsave_buffer`` of a
500x333 image held in memory, q80, optimised Huffman tables, the pipeline's
quantisation tables, one libvips
thread), and ctypes releases the GIL for the whole call. For contrast the
same pixels are encoded by Pillow with the same settings
(core/pipeline/encoder.py), which keeps the GIL while it encodes into a ``BytesIO``:
its two threads keep one core busy.

Each row: saves/s, CPU ms per save and cores kept busy, for one thread,
two threads of one process and two processes (docs/BENCHMARKS.md,
"The encoder on the render thread").
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import threads_vs_processes  # noqa: E402
from bench.threads_vs_processes import (  # noqa: E402
    collect,
    figures,
    interleaved,
    on_threads,
    row_names,
    summarised,
)

#: One thread, two threads, two processes: bench/threads_vs_processes.py's arrangements.
VARIANTS = threads_vs_processes.VARIANTS
ENCODERS = ("libvips", "pillow")

#: The thumbnail encoded: the medium benchmark photo's size after the fit.
WIDTH, HEIGHT = 500, 333


def libvips_library() -> ctypes.CDLL:
    """The libvips shared library pyvips has loaded (pyvips-binary's or the system's)."""
    import pyvips

    binary = Path(pyvips.__file__).parent.parent / "pyvips_binary.libs"
    candidates = sorted(binary.glob("libvips-*.so.42")) or [Path("libvips.so.42")]
    library = ctypes.CDLL(str(candidates[0]))
    library.vips_image_new_from_memory.restype = ctypes.c_void_p
    library.vips_image_new_from_memory.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
    ]
    library.vips_jpegsave_buffer.restype = ctypes.c_int
    library.g_object_unref.argtypes = [ctypes.c_void_p]
    library.g_free.argtypes = [ctypes.c_void_p]
    return library


def saver(encoder: str) -> Callable[[], int]:
    """One save of the same pixels per call; returns the encoded size."""
    from bench.images import photo
    from django_oximg.core import pipeline
    from django_oximg.core.pipeline import encoder as pillow_encoder

    pipeline.configure(concurrency=1)
    pixels = bytes(photo(WIDTH, HEIGHT).write_to_memory())
    if encoder == "pillow":
        return lambda: len(pillow_encoder.encode(pixels, WIDTH, HEIGHT, 3, "jpeg", 80))
    library = libvips_library()
    held = ctypes.create_string_buffer(pixels, len(pixels))
    uchar = 0  # VIPS_FORMAT_UCHAR

    def save() -> int:
        image = library.vips_image_new_from_memory(
            ctypes.addressof(held), len(pixels), WIDTH, HEIGHT, 3, uchar
        )
        out, size = ctypes.c_void_p(), ctypes.c_size_t()
        status = library.vips_jpegsave_buffer(
            ctypes.c_void_p(image),
            ctypes.byref(out),
            ctypes.byref(size),
            b"Q",
            ctypes.c_int(80),
            b"optimize_coding",
            ctypes.c_int(1),
            b"quant_table",
            ctypes.c_int(pillow_encoder.quant_table(80)),
            b"keep",
            ctypes.c_int(0),
            None,
        )
        library.g_object_unref(image)
        if status != 0:
            raise RuntimeError("vips_jpegsave_buffer failed")
        library.g_free(out)
        return size.value

    return save


def save_loop(encoder: str, saves: int, threads: int) -> dict[str, float]:
    """``saves`` saves on each of ``threads`` threads; wall time and CPU of the process."""
    save = saver(encoder)
    for _ in range(20):  # warm: libvips' thread set, allocator
        save()

    def loop() -> None:
        for _ in range(saves):
            save()

    return on_threads(loop, threads, saves)


def child(encoder: str, saves: int, threads: int) -> subprocess.Popen[str]:
    command = [sys.executable, __file__, "--child", encoder, str(saves), str(threads)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def measure(variant: str, encoder: str, saves: int) -> dict[str, float]:
    if variant == "2 processes":
        return figures(collect([child(encoder, saves, 1), child(encoder, saves, 1)]))
    threads = 2 if variant == "2 threads" else 1
    return figures(collect([child(encoder, saves, threads)]))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=600, help="per thread or process")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = row_names(list(ENCODERS))
    results = interleaved(
        rows, lambda variant, encoder: measure(variant, encoder, args.saves), args.runs, "saves"
    )
    title = f"{WIDTH}x{HEIGHT} JPEG q80 saves, medians (min-max) of {args.runs} runs:"
    summary = summarised(results, title)
    report = {"saves": args.saves, "runs": args.runs, "results": results, "summary": summary}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        _, _, encoder, saves, threads = sys.argv
        print(json.dumps(save_loop(encoder, int(saves), int(threads))))
    else:
        main()
