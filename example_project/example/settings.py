"""Settings for the django-oximg demo.

Everything the demo writes (SQLite database, sample images, uploads, cached
thumbnails, collected static files) lives under one directory: ``example_project/var/`` by
default, or ``$OXIMG_DEMO_VAR`` (the tests point it at a temporary directory).
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("OXIMG_DEMO_VAR", PROJECT_DIR / "var"))
# SQLite cannot create the database's directory itself, so a fresh clone
# would fail at `migrate` without this.
VAR_DIR.mkdir(parents=True, exist_ok=True)

# A demo: debug pages on unless OXIMG_DEMO_DEBUG=0.
DEBUG = os.environ.get("OXIMG_DEMO_DEBUG", "1") != "0"
# Demo only. A real site keeps its secret key out of the source tree.
SECRET_KEY = "django-insecure-oximg-demo-4c7e2a9f1b6d8e3a5c0f"
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]

INSTALLED_APPS = [
    # Let WhiteNoise, not runserver, serve static files, so development
    # behaves like production.
    "whitenoise.runserver_nostatic",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_oximg",
    "gallery",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example.urls"
WSGI_APPLICATION = "example.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            # The tags need no context processor: they never read the request.
            # A format="auto" URL names no format, and the server picks AVIF,
            # WebP or the source's format per request, from the browser's Accept.
            # These are the admin's.
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.static",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": VAR_DIR / "db.sqlite3",
    }
}

MEDIA_ROOT = VAR_DIR / "media"
MEDIA_URL = "/media/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_URL = "/static/"
# Serve straight from the apps' static/ dirs even with DEBUG off, so the demo
# needs no collectstatic step.
WHITENOISE_USE_FINDERS = True

STORAGES = {
    # Source images for thumbnails: django_oximg reads STORAGES["default"].
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

OXIMG = {
    # Demo keys, published in this file: anyone can sign URLs with them.
    # A real site must set its own, e.g. from `python -c "import secrets;
    # print(secrets.token_hex(32))"`, and keep them out of the source tree.
    "KEY": "6f78696d672d64656d6f2d6b65792d6e6f742d666f722d70726f64756374696f6e",
    "SALT": "6f78696d672d64656d6f2d73616c742d6e6f742d736563726574",
    # The demo's own option and step: {% thumbnail ... sepia=0.8 %} (gallery/extensions.py).
    "EXTENSIONS": ["gallery.extensions.SEPIA"],
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
