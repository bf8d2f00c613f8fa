"""A REST API of photos with thumbnails: docs/drf.md shows this module as it is.

(tests/test_drf.py checks that the page and this file agree.)
"""

from __future__ import annotations

from rest_framework import routers, serializers, viewsets

from django_oximg.drf import ThumbnailField

from .models import Photo


class PhotoSerializer(serializers.ModelSerializer):
    # 200x300, cropped around the photo's focal point (its centre without one).
    thumbnail = ThumbnailField("200x300", source="image", crop=True)
    # WebP at several widths, 16:9, for <img srcset>.
    hero = ThumbnailField(
        "1200x675", source="image", crop=True, format="webp", widths=[400, 800, 1200]
    )

    class Meta:
        model = Photo
        fields = ("id", "title", "thumbnail", "hero")


class PhotoViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Photo.objects.order_by("pk")
    serializer_class = PhotoSerializer


router = routers.DefaultRouter()
router.register("photos", PhotoViewSet)
