"""WSGI entry point for the demo, e.g. for gunicorn.

From the repository root::

    gunicorn --chdir example_project example.wsgi --worker-class gthread --threads 4
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Like manage.py: make django_oximg importable from the repository without
# installing it, whichever directory the server was started from.
_PROJECT_DIR = Path(__file__).resolve().parent.parent
for _path in (str(_PROJECT_DIR), str(_PROJECT_DIR.parent)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402 (needs sys.path above)

application = get_wsgi_application()
