"""``manage.py oximg_url SOURCE [OPTIONS]``: print a signed thumbnail URL."""

from __future__ import annotations

import base64
from argparse import ArgumentParser
from typing import Any
from urllib.parse import quote

from django.core.management.base import BaseCommand, CommandError

from django_oximg import conf, runtime
from django_oximg.core.errors import InvalidOptions
from django_oximg.core.options import parse_path
from django_oximg.thumbnails import ThumbnailError, encoding_for, output_format, url_prefix

#: Characters kept as they are in an option segment ("/" separates segments).
OPTION_SAFE = ":,"


class Command(BaseCommand):
    help = (
        "Print a signed URL for SOURCE processed with OPTIONS, written in imgproxy's form "
        '(e.g. "rs:fill:300:200/q:70"), checked the way the server will parse it. The URL '
        "has no version token (cachebuster) unless OPTIONS gives one (cb:...), so it names "
        "the source's current content only until the source changes."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "source",
            help="Storage name (photos/x.jpg), alias:name for a source in OXIMG['SOURCES'], "
            "or an http(s) URL allowed by HTTP_SOURCES.",
        )
        parser.add_argument(
            "options",
            nargs="?",
            default="",
            help='Processing options separated by "/", e.g. "rs:fill:300:200/q:70" or "pr:card".',
        )
        parser.add_argument(
            "--format",
            default="",
            help="Output format: jpeg, png, webp, avif, gif, or auto (the default: negotiated "
            "from the Accept header, or the source's format when AUTO_FORMAT is off).",
        )
        parser.add_argument(
            "--base-url",
            default="",
            help="Put this in front of the path, e.g. https://cdn.example.com.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            fmt = output_format(options["format"]) if options["format"] else ""
        except ThumbnailError as exc:
            raise CommandError(str(exc)) from exc
        path = unsigned_path(options["source"], options["options"], fmt)
        try:
            settings = conf.get_settings()
            parse_path(path, settings.PRESETS, extensions=settings.EXTENSIONS)
        except InvalidOptions as exc:
            raise CommandError(f"invalid URL: {exc.detail or exc}") from exc
        signed = runtime.get_signer().signed_path(path)
        self.stdout.write(options["base_url"].rstrip("/") + url_prefix() + signed[1:])


def unsigned_path(source: str, options: str, fmt: str) -> str:
    """The path to sign: the options as given, then the source, as the tag encodes it.

    The source goes in ``plain/`` when it is made of URL-safe characters, else
    base64, as the template tag does, so no server can alter it by decoding.
    """
    segments = [segment for segment in options.strip("/").split("/") if segment]
    for segment in segments:
        if ":" not in segment:
            raise CommandError(f"{segment!r} is not an option: options look like name:value")
    if not source:
        raise CommandError("the source is empty")
    option_path = "".join("/" + quote(segment, safe=OPTION_SAFE) for segment in segments)
    if encoding_for(source) == "plain":
        return f"{option_path}/plain/{source}" + (f"@{fmt}" if fmt else "")
    encoded = base64.urlsafe_b64encode(source.encode()).decode("ascii").rstrip("=")
    return f"{option_path}/{encoded}" + (f".{fmt}" if fmt else "")
