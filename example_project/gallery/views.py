"""The demo's pages: the gallery, and the upload form that adds to it."""

from __future__ import annotations

from django.core.files.storage import default_storage
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from gallery import samples
from gallery.forms import PhotoForm
from gallery.models import Photo

#: A source that is not in the storage, for the tile that shows ``{% empty %}``.
MISSING = "samples/deleted.jpg"


def index(request: HttpRequest) -> HttpResponse:
    """The photos, then one tile per feature of the tags.

    The samples and their Photo rows are also made by `manage.py
    make_samples`; making them here too means `migrate` + `runserver` is all
    a fresh clone needs.
    """
    if samples.samples_are_missing(default_storage):
        samples.ensure_samples(default_storage)
    samples.add_photos()
    context = {
        "photos": Photo.objects.all(),
        "landscape": samples.LANDSCAPE,
        "face": samples.FACE,
        "text": samples.TEXT,
        "portrait": samples.PORTRAIT,
        "logo": samples.LOGO,
        "bounce": samples.BOUNCE,
        "missing": MISSING,
    }
    return render(request, "gallery/index.html", context)


def upload(request: HttpRequest) -> HttpResponse:
    """Upload a photo; on success, back to the gallery, at the new photo."""
    if request.method == "POST":
        form = PhotoForm(request.POST, request.FILES)
        if form.is_valid():
            photo = form.save()
            return redirect(f"{reverse('gallery')}#photo-{photo.pk}")
    else:
        form = PhotoForm()
    return render(request, "gallery/upload.html", {"form": form})
