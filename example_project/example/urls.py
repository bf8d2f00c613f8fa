"""URLs: the gallery and its upload form, the admin, and django_oximg's view under /img/."""

from __future__ import annotations

from django.conf import settings
from django.conf.urls.static import static
from django.contrib import admin
from django.urls import include, path
from gallery import views

urlpatterns = [
    path("", views.index, name="gallery"),
    path("upload/", views.upload, name="upload"),
    path("admin/", admin.site.urls),
    path("img/", include("django_oximg.urls")),
    # The originals, for the admin's "Currently:" link; with DEBUG only, as
    # runserver serves them (a real site's web server or storage does).
    *static(settings.MEDIA_URL, document_root=settings.MEDIA_ROOT),
]
