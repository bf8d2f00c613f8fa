"""`manage.py make_samples`: draw the demo's sample images, and a Photo for each."""

from __future__ import annotations

from typing import Any

from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand, CommandParser

from gallery import samples


class Command(BaseCommand):
    help = (
        "Draw the demo's sample images (with pyvips) into the default storage, and add "
        "a Photo for each when there is none (run `migrate` first)."
    )
    # Drawing files and adding rows needs only the storage and the database;
    # skipping the system checks keeps the command usable while the
    # project's URLs or templates are broken.
    requires_system_checks = ()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--force",
            action="store_true",
            help="Redraw samples that already exist.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["force"]:
            for name in samples.SAMPLES:
                default_storage.delete(name)
        drawn = samples.ensure_samples(default_storage)
        for name in samples.SAMPLES:
            state = "drawn" if name in drawn else "exists"
            self.stdout.write(f"{state:>6}  {name}")
        for photo in reversed(samples.add_photos()):
            self.stdout.write(f"{'added':>6}  Photo {photo.title!r} ({photo.image.name})")
