#!/usr/bin/env python
"""Django's command-line utility for the django-oximg demo project.

Runs from anywhere, e.g. from the repository root::

    python example_project/manage.py migrate
    python example_project/manage.py runserver 127.0.0.1:8000
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent
# The repository root holds django_oximg, so the demo runs from a fresh clone
# without installing the package; the project dir holds `example` and `gallery`.
REPO_ROOT = PROJECT_DIR.parent


def main() -> None:
    """Put the project and the repository on sys.path, then hand over to Django."""
    for path in (str(PROJECT_DIR), str(REPO_ROOT)):
        if path not in sys.path:
            sys.path.insert(0, path)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
