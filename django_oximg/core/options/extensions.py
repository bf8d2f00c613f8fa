"""A site's own processing options, each with the step that makes its pixels.

easy-thumbnails lets a site list its own processors; here a site declares an
:class:`Extension`: one more option of the URL grammar, imgproxy-style
(``sepia:0.8``, long and short names), read strictly and written
canonically as the table's options are (:mod:`.table`), and a plain
function ``(image, value) -> image`` that the pipeline runs at a declared
place among its own steps, and only when a request gives the option. The
site lists them in ``OXIMG["EXTENSIONS"]``; ``conf.py`` loads and checks
them, and hands them to whatever parses (:func:`~.parse.parse_path`) and
renders (:class:`~django_oximg.core.pipeline.RenderSettings`).

Inside :class:`~.model.Options` a site's option is text: its canonical
name and arguments (:attr:`~.model.Options.extensions`), so that options
stay plain data, equal effects compare equal, and the canonical path (the
cache key's input) is written without asking the extension again. Its
segments follow every built-in option's, ordered by name, so the order of
``EXTENSIONS`` never changes a path, and a site without extensions keeps
every path (and key) it had.

No Django and no pyvips here: the image is whatever the pipeline hands the
step (a ``pyvips.Image``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from django_oximg.core.errors import InvalidOptions
from django_oximg.core.options.table import OPTION_NAMES
from django_oximg.core.options.values import INTEGER_TEXT, REAL_TEXT, invalid, number

#: The built-in per-frame steps, in the order they run
#: (``core/pipeline/steps``' ``NAMED_STEPS``).
STEP_NAMES = (
    "rotate",
    "crop",
    "resize",
    "colour",
    "crop_to_box",
    "blur",
    "sharpen",
    "pixelate",
    "extend",
    "extend_aspect_ratio",
    "padding",
    "flatten",
    "watermark",
)

#: The steps a site's step may follow. From ``colour`` on, every frame is
#: 8-bit sRGB (with an alpha band when it has one), so a site's step never
#: meets CMYK, 16 bits or a colour profile.
PLACES = STEP_NAMES[STEP_NAMES.index("colour") :]

#: An option's name: it goes into URLs before a ":" and, for the long name,
#: into templates as a keyword.
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")

#: What a written argument may hold: nothing a path would split or decode.
ARGUMENT = re.compile(r"[A-Za-z0-9._~+-]*")


class ArgumentKind(Protocol):
    """How an option's arguments are read from a URL and written back."""

    def read(self, args: Sequence[str]) -> Any:
        """The value of ``args`` (the texts between the option's ":"s); ValueError if bad."""

    def write(self, value: Any) -> Sequence[str]:
        """The canonical arguments of ``value``, which :meth:`read` turns back into it."""


class Arguments(NamedTuple):
    """A kind made of two of the site's functions (defined at module level: see
    :class:`Extension`)."""

    read: Callable[[Sequence[str]], Any]
    write: Callable[[Any], Sequence[str]]


def one(args: Sequence[str]) -> str:
    if len(args) != 1:
        raise ValueError("takes one argument")
    return args[0]


class Number(NamedTuple):
    """One real number in ``low..high``, written as its shortest text (``0.80`` is ``0.8``)."""

    low: float
    high: float

    def read(self, args: Sequence[str]) -> float:
        text = one(args)
        if REAL_TEXT.fullmatch(text) is None:
            raise ValueError("not a number")
        value = float(text)
        if not self.low <= value <= self.high:
            raise ValueError(f"not in {number(self.low)}..{number(self.high)}")
        return value

    def write(self, value: float) -> Sequence[str]:
        return (number(value),)


class Integer(NamedTuple):
    """One whole number in ``low..high``."""

    low: int
    high: int

    def read(self, args: Sequence[str]) -> int:
        text = one(args)
        if INTEGER_TEXT.fullmatch(text) is None:
            raise ValueError("not an integer")
        value = int(text)
        if not self.low <= value <= self.high:
            raise ValueError(f"not in {self.low}..{self.high}")
        return value

    def write(self, value: int) -> Sequence[str]:
        return (str(value),)


class Choice(NamedTuple):
    """One of ``values``, written as it is."""

    values: tuple[str, ...]

    def read(self, args: Sequence[str]) -> str:
        text = one(args)
        if text not in self.values:
            raise ValueError(f"expected one of {', '.join(self.values)}")
        return text

    def write(self, value: str) -> Sequence[str]:
        return (value,)


class ExtensionError(ValueError):
    """An extension that breaks its promises (a site's bug, not a bad URL)."""


class Extension(NamedTuple):
    """A site's own option and its step, as ``OXIMG["EXTENSIONS"]`` lists them.

    Everything in it is defined at module level (no lambdas, no nested
    functions): a render whose encoder the deadline cannot stop runs in a
    child process (:mod:`django_oximg.core.pipeline.isolated`), which gets
    the extension by pickling and imports its module, without Django.
    """

    #: The URL names: the long name first (errors name it, and it is the
    #: tags' keyword), the short one last (canonical paths use it).
    names: tuple[str, ...]
    #: How the arguments are read (strictly: a bad one is a 400 naming the
    #: option) and written (canonically: equal values, equal text).
    arguments: ArgumentKind
    #: The value that changes nothing: never written into a path (``sep:0``
    #: and no ``sep`` share a cache key), and its step is skipped.
    default: Any
    #: ``(image, value) -> image``: the frame (a ``pyvips.Image``, 8-bit
    #: sRGB) with the effect; the same size and bands. It reads nothing but
    #: its arguments (no settings, no storage), so one URL always gives the
    #: same bytes.
    step: Callable[[Any, Any], Any]
    #: The built-in step it runs right after (one of :data:`PLACES`).
    after: str
    #: Part of the output fingerprint (every cache key and tag URL): change
    #: it whenever the step's output for some value changes.
    version: str
    #: Whether each output pixel depends on the input pixel at its place
    #: alone (a colour change): an animation's frames may then run as one
    #: strip.
    per_pixel: bool = False

    @property
    def name(self) -> str:
        return self.names[0]

    @property
    def short(self) -> str:
        return self.names[-1]

    def read(self, args: Sequence[str]) -> Any:
        """The value of a URL's arguments; a bad one is InvalidOptions naming the option."""
        try:
            return self.arguments.read(args)
        except ValueError as error:
            raise invalid(self.name, ":".join(args), str(error) or "invalid value") from error

    def text(self, value: Any) -> str:
        """The canonical arguments of ``value``, checked to read back into it."""
        args = list(self.arguments.write(value))
        if not args or not all(isinstance(a, str) and ARGUMENT.fullmatch(a) for a in args):
            raise ExtensionError(
                f"extension {self.name!r}: writes {value!r} as {args!r}: "
                "use letters, digits and '._~+-' only"
            )
        if self.arguments.read(args) != value:
            raise ExtensionError(
                f"extension {self.name!r}: writes {value!r} as {args!r}, which reads back as "
                "another value"
            )
        return ":".join(args)

    def value(self, text: str) -> Any:
        """The value of the canonical arguments :meth:`text` wrote."""
        return self.arguments.read(text.split(":"))


#: A site's options in :class:`~.model.Options`: (short name, canonical arguments).
Entries = tuple[tuple[str, str], ...]


def entries_with(entries: Entries, extension: Extension, value: Any) -> Entries:
    """``entries`` with ``extension`` set to ``value`` (left out at its default), by name."""
    found = {name: text for name, text in entries if name != extension.short}
    if value != extension.default:
        found[extension.short] = extension.text(value)
    return tuple(sorted(found.items()))


def extension_named(extensions: Sequence[Extension], name: str) -> Extension | None:
    """The extension a URL calls ``name``, if any (a site has a handful)."""
    return next((extension for extension in extensions if name in extension.names), None)


def check_buildable(entries: Entries) -> None:
    """Refuse entries no URL can carry (written by hand, not by :func:`entries_with`)."""
    for name, text in entries:
        if not NAME.fullmatch(name) or not all(map(ARGUMENT.fullmatch, text.split(":"))):
            raise InvalidOptions(detail=f"extension {name!r}: cannot write {text!r} into a path")


def problems(extensions: Sequence[Any]) -> list[str]:
    """What is wrong with ``extensions`` as one site's list, one line per problem.

    The names must be free (not the built-in options', not another
    extension's), the place one of :data:`PLACES`, the default must read
    back from its own text, and the whole must survive pickling (the
    isolated renders' child process gets it that way).
    """
    found: list[str] = []
    taken: set[str] = set(OPTION_NAMES)
    for extension in extensions:
        if not isinstance(extension, Extension):
            found.append(f"{extension!r} is not an Extension")
            continue
        found += extension_problems(extension, taken)
        taken.update(extension.names)
    return found


def extension_problems(extension: Extension, taken: set[str]) -> list[str]:
    """What is wrong with one extension, given the names already taken."""
    names = extension.names
    if not isinstance(names, tuple) or not names or not all(isinstance(n, str) for n in names):
        return [f"extension {names!r}: names must be a tuple of strings, the long name first"]
    label = f"extension {extension.name!r}"
    found = [f"{label}: {name!r} is not a name" for name in names if not NAME.fullmatch(name)]
    found += [f"{label}: {name!r} is already an option's name" for name in names if name in taken]
    if len(set(names)) != len(names):
        found.append(f"{label}: a name is given twice")
    if extension.after not in PLACES:
        found.append(f"{label}: after must be one of {', '.join(PLACES)}")
    if not isinstance(extension.version, str) or not extension.version:
        found.append(f"{label}: version must be a non-empty string")
    if not callable(extension.step):
        found.append(f"{label}: step must be a function (image, value) -> image")
    if found:
        return found
    try:
        extension.text(extension.default)
    except ExtensionError as error:
        return [str(error)]
    except ValueError as error:
        return [f"{label}: its default does not read back: {error}"]
    import pickle  # here: only a site with extensions checks them, once

    try:
        copied = pickle.loads(pickle.dumps(extension))
    except (pickle.PicklingError, TypeError, AttributeError) as error:
        copied = error
    if copied != extension:
        found.append(
            f"{label}: cannot be pickled for an isolated render's child process (define "
            f"its functions and arguments at module level): {copied}"
        )
    return found
