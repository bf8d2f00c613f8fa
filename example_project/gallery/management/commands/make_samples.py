"""`manage.py make_samples`: draw the demo's sample images into the default storage."""

from __future__ import annotations

from typing import Any

from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand, CommandParser

from gallery import samples


class Command(BaseCommand):
    help = "Draw the demo's sample images (with pyvips) into the default storage."
    # Drawing files needs only the storage; skipping the system checks keeps the
    # command usable while the project's URLs or templates are broken.
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
