"""SSIMULACRA2 scores for (reference, distorted) PNG pairs; runs in bench/peers/.venv-tools.

    bench/peers/.venv-tools/bin/python bench/peers/score.py PAIRS.json

PAIRS.json is a list of [reference_png, distorted_png]; prints a JSON list of
scores in the same order (100 = identical; higher is better).
"""

from __future__ import annotations

import json
import sys

from ssimulacra2 import compute_ssimulacra2


def main() -> None:
    with open(sys.argv[1]) as handle:
        pairs = json.load(handle)
    print(json.dumps([float(compute_ssimulacra2(ref, dist)) for ref, dist in pairs]))


if __name__ == "__main__":
    main()
