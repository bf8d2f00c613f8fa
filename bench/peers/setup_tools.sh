#!/usr/bin/env bash
# The quality metric and the chart tools in a venv of their own
# (bench/peers/.venv-tools): ssimulacra2 (PyPI, 0.3.0) and matplotlib both pull
# in Pillow, which the project's venv must not have (sorl/easy-thumbnails
# comparisons would otherwise be tempted to share it, and the package must
# never depend on it by accident).
#
#   bash bench/peers/setup_tools.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv-tools"
python="${PYTHON:-python3.11}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import ssimulacra2, matplotlib" 2>/dev/null; then
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet "ssimulacra2==0.3.0" "matplotlib>=3.8"
fi
"$venv/bin/python" -c "import ssimulacra2, matplotlib; print('ssimulacra2', ssimulacra2.__version__, 'matplotlib', matplotlib.__version__)"
