"""gunicorn's application for bench/page_bytes.py's gallery servers."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.page_app.gallery_settings")
application = get_wsgi_application()
