"""The app that makes the ``oximg_wagtail`` tag library available.

``"django_oximg.contrib.wagtail"`` in ``INSTALLED_APPS`` installs the
library; ``"django_oximg.contrib.wagtail.apps.OximgImageTagsConfig"`` in its
place also makes Wagtail's own ``wagtailimages_tags`` serve django-oximg URLs
(docs/wagtail.md).
"""

from __future__ import annotations

from django.apps import AppConfig


class OximgWagtailConfig(AppConfig):
    name = "django_oximg.contrib.wagtail"
    label = "oximg_wagtail"
    verbose_name = "django-oximg for Wagtail"
    default = True


class OximgImageTagsConfig(OximgWagtailConfig):
    """The app, with ``{% load wagtailimages_tags %}`` giving django-oximg's tags.

    For sites that keep Wagtail's own image model: every template's
    ``image``, ``srcset_image``, ``picture`` and ``image_url`` become the
    ``oximg_wagtail`` library's, without a ``TEMPLATES`` override (which
    Django reports as ``templates.W003``) and without editing a template.
    """

    default = False

    def ready(self) -> None:
        from django_oximg.contrib.wagtail.templatetags.oximg_wagtail import (
            serve_wagtails_image_tags,
        )

        serve_wagtails_image_tags()
