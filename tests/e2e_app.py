"""The WSGI application gunicorn serves in tests/test_e2e_gunicorn.py.

Django (tests/urls.py) wrapped in ``OximgMiddleware``, as DESIGN.md's
"fastest path" deployment does.
"""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

from django_oximg.wsgi import OximgMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.e2e_settings")

application = OximgMiddleware(get_wsgi_application())
