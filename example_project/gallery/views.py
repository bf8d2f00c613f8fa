"""The gallery page: the sample images through {% thumbnail %} and {% picture %}."""

from __future__ import annotations

from django.core.files.storage import default_storage
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from gallery import samples


def index(request: HttpRequest) -> HttpResponse:
    """Show every demo, drawing the samples first on a fresh checkout.

    The samples are also made by `manage.py make_samples`; drawing them here
    too means `migrate` + `runserver` is all a fresh clone needs.
    """
    if samples.samples_are_missing(default_storage):
        samples.ensure_samples(default_storage)
    context = {
        "landscape": samples.LANDSCAPE,
        "portrait": samples.PORTRAIT,
        "badge": samples.BADGE,
        "bounce": samples.BOUNCE,
    }
    return render(request, "gallery/index.html", context)
