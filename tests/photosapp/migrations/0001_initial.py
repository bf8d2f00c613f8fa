"""The photos app's table."""

from __future__ import annotations

from typing import ClassVar

from django.db import migrations, models
from django.db.migrations.operations.base import Operation

import django_oximg.fields


class Migration(migrations.Migration):
    initial = True

    dependencies: ClassVar[list[tuple[str, str]]] = []

    operations: ClassVar[list[Operation]] = [
        migrations.CreateModel(
            name="Photo",
            fields=[
                (
                    "id",
                    models.AutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("title", models.CharField(blank=True, max_length=100)),
                ("image", models.ImageField(blank=True, upload_to="photos/")),
                ("focal_point", django_oximg.fields.FocalPointField(image_field="image")),
            ],
        ),
    ]
