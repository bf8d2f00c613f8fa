"""Wagtail's ``{% image %}`` served by django-oximg: signed URLs, no renditions.

Add ``"django_oximg.contrib.wagtail"`` to ``INSTALLED_APPS`` and load its
tag library, ``{% load oximg_wagtail %}``: its ``image``, ``srcset_image``
and ``picture`` tags take Wagtail's syntax and filter specs and print a
django-oximg URL with the width and height Wagtail's rendition would have
(docs/wagtail.md). :func:`~django_oximg.contrib.wagtail.renditions.get_rendition`
does the same from Python, and a custom image model with
:class:`~django_oximg.contrib.wagtail.images.OximgRenditionsMixin` answers
every ``image.get_rendition()`` so (Wagtail's own tags, StreamField blocks,
the API, the admin). This package is the only part of django-oximg
that imports Wagtail.
"""
