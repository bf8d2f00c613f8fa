#!/usr/bin/env bash
# thumbor 7.8 in a venv of its own (bench/peers/.venv-thumbor), from PyPI.
#
#   bash bench/peers/setup_thumbor.sh
#
# thumbor needs pycurl, which builds against libcurl and OpenSSL headers:
#   apt-get install -y libcurl4-openssl-dev libssl-dev
# Its own venv keeps Pillow (thumbor's engine) out of the project's venv.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv-thumbor"
python="${PYTHON:-python3.11}"
if [ ! -x "$venv/bin/thumbor" ]; then
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet "thumbor==7.8.0"
fi
"$venv/bin/thumbor" --version 2>/dev/null || "$venv/bin/python" -c "import thumbor; print('thumbor', thumbor.__version__)"
