"""Oscar's shop at the root, Django's language switch, and django-oximg's view under /img/."""

from __future__ import annotations

from django.apps import apps
from django.urls import include, path

urlpatterns = [
    path("img/", include("django_oximg.urls")),
    path("i18n/", include("django.conf.urls.i18n")),  # Oscar's language form
    path("", include(apps.get_app_config("oscar").urls[0])),
]
