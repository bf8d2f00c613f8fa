#!/usr/bin/env bash
# easy-thumbnails and sorl-thumbnail (both on Pillow) in a venv of their own
# (bench/peers/.venv-django-peers), so their pinned versions never mix with the project's venv.
# gunicorn serves their pages in bench/page_bytes.py, as it serves django-oximg's.
#
#   bash bench/peers/setup_django_peers.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv-django-peers"
python="${PYTHON:-python3.11}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import easy_thumbnails, sorl, gunicorn" 2>/dev/null; then
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet "Django>=5.2,<6" "easy-thumbnails==2.10.1" "sorl-thumbnail==13.4.0" Pillow gunicorn
fi
"$venv/bin/python" -c "import PIL, easy_thumbnails, sorl, django; print('Pillow', PIL.__version__, 'easy-thumbnails', easy_thumbnails.VERSION, 'sorl', sorl.__version__, 'Django', django.__version__)"
