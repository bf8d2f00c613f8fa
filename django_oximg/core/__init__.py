"""The Django-free core of django-oximg.

Nothing under this package imports Django (``tests/test_core_isolation.py`` proves
it), so the same handler serves the Django view, the WSGI middleware and any other
WSGI application.
"""

from __future__ import annotations
