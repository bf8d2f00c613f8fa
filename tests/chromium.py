"""How the tests and the benchmarks run Debian's chromium headless, in one place.

A light module (no pytest, no Django) so bench/ can import it as it imports
tests/servers.py.
"""

from __future__ import annotations

#: Flags for a quiet, reproducible headless run as root in CI: no sandbox
#: (root), no GPU, no background traffic to Google's services.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: A desktop window; the gallery's grid puts three or four figures in a row.
VIEWPORT = {"width": 1280, "height": 900}
