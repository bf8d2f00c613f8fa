"""Sizes declared for a model's file field (declared_sizes.py): parsed as the tag takes them.

What the tag, the checks and the render ahead make of the declarations is in
tests/test_render_ahead.py and tests/test_checks.py.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_oximg import declared_sizes as declared
from tests.testapp.models import Document


def test_sizes_are_parsed_as_the_tag_takes_them() -> None:
    parse = declared.parse_size
    assert parse("thumb") == declared.DeclaredSize("thumb", "thumb", "", (("preset", "thumb"),))
    assert parse("400x300 crop=center").kwargs == {"crop": "center"}
    assert parse("400x300 crop=center").geometry == "400x300"
    assert parse("200 crop='top left' upscale").kwargs == {"crop": "top left", "upscale": True}
    assert parse("card quality=70").kwargs == {"preset": "card", "quality": "70"}
    assert parse("card quality=70").name == ""
    with pytest.raises(ValueError, match="keyword=value"):
        parse("400x300 center")


def test_a_model_declaration_of_the_wrong_shape_is_improperly_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Document, declared.MODEL_ATTRIBUTE, ["100"], raising=False)
    with pytest.raises(ImproperlyConfigured, match=r"testapp\.Document\.oximg_render_ahead"):
        declared.model_declarations(Document)
    monkeypatch.setattr(Document, declared.MODEL_ATTRIBUTE, {"scan": "100"})
    with pytest.raises(ImproperlyConfigured, match="a list of sizes"):
        declared.model_declarations(Document)
    monkeypatch.setattr(Document, declared.MODEL_ATTRIBUTE, {"scan": {"card": "100 crop"}})
    assert declared.model_declarations(Document) == {"scan": (("card", "100 crop"),)}
