"""A focal point per image: the value, the model and form fields, the widget, the tags.

The model is tests/photosapp's ``Photo`` (the example of docs/focal-point.md,
checked against the page below); thumbnails are fetched through the real
thumbnail view, and the test image has a red disc where its focal point is,
so a crop that follows the point has the disc in its middle.
"""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import pyvips
from django import forms
from django.core import checks
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import connections, models
from django.template import Context, Template, TemplateSyntaxError
from django.test import Client
from django.test.utils import isolate_apps

from django_oximg import focal
from django_oximg.fields import FocalPointField, FocalPointFormField, FocalPointWidget
from django_oximg.focal import FocalPoint, InvalidFocalPoint, parse_focal_point
from django_oximg.responsive import get_picture, get_srcset
from django_oximg.thumbnails import get_thumbnail
from tests.photosapp.models import Photo

REPO_ROOT = Path(__file__).resolve().parent.parent

#: The drawn source: grey, 640x480, a red disc at a quarter of its width.
SPOT = "photos/spot.jpg"
SPOT_POINT = FocalPoint(0.25, 0.5)

pytestmark = [
    pytest.mark.urls("tests.photosapp.urls"),
    pytest.mark.django_db,
    pytest.mark.usefixtures("connections_closed_afterwards"),
]


@pytest.fixture(autouse=True)
def spot(media: Path) -> Iterator[Path]:
    """``photos/spot.jpg``: a red disc on grey, centred at (160, 240) of 640x480."""
    grey = (pyvips.Image.black(640, 480, bands=3) + 128).cast("uchar")
    image = grey.draw_circle([255, 0, 0], 160, 240, 40, fill=True)
    (media / "photos" / "spot.jpg").write_bytes(image.jpegsave_buffer(Q=95))
    cache.clear()
    yield media
    cache.clear()


def served(client: Client, url: str) -> pyvips.Image:
    """The image the thumbnail view serves for ``url``."""
    response = client.get(url)
    try:
        assert response.status_code == 200, response.content[:200]
        body = b"".join(response.streaming_content) if response.streaming else response.content
    finally:
        response.close()
    return pyvips.Image.new_from_buffer(body, "")


def is_red(image: pyvips.Image, x: int, y: int) -> bool:
    red, green, blue = image(x, y)[:3]
    return bool(red > 200 and green < 80 and blue < 80)


# -- the value ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["0.25,0.5", " 0.25 , 0.5 ", "2.5e-1,0.50", (0.25, 0.5), [0.25, 0.5], SPOT_POINT],
)
def test_a_point_is_read_from_every_spelling(value: Any) -> None:
    assert parse_focal_point(value) == SPOT_POINT


@pytest.mark.parametrize("value", [None, "", False])
def test_nothing_is_no_point(value: Any) -> None:
    assert parse_focal_point(value) is None


@pytest.mark.parametrize(
    "value",
    [
        "1.5,0.5",
        "0.5,-0.1",
        "0.5",
        "0.5,0.5,0.5",
        "left,top",
        "1..2,0",
        "nan,0.5",
        "inf,0",
        (True, 0.5),
        (0.5,),
        ("0.5", "0.5"),
        42,
    ],
)
def test_anything_else_is_refused_saying_why(value: Any) -> None:
    with pytest.raises(InvalidFocalPoint, match="focal point"):
        parse_focal_point(value)


def test_a_point_is_stored_as_short_text_rounded_to_four_places() -> None:
    point = FocalPoint(1 / 3, 0.5)
    assert str(point) == "0.3333,0.5"
    assert parse_focal_point(str(point)) == point
    assert point.crop == "33% 50%"


def test_django_filer_subject_location_maps_through_the_image_size() -> None:
    assert focal.from_filer("160,240", 640, 480) == SPOT_POINT
    assert focal.to_filer(SPOT_POINT, 640, 480) == "160,240"
    assert focal.from_filer("", 640, 480) is None
    with pytest.raises(InvalidFocalPoint, match="outside"):
        focal.from_filer("700,10", 640, 480)
    with pytest.raises(InvalidFocalPoint, match="subject location"):
        focal.from_filer("middle", 640, 480)


def test_versatileimagefield_ppoi_is_the_same_fractions() -> None:
    assert focal.from_ppoi("0.25x0.5") == SPOT_POINT
    assert focal.to_ppoi(SPOT_POINT) == "0.25x0.5"
    for bad in ("0.25,0.5", "2x0.5", "axb"):
        with pytest.raises(InvalidFocalPoint, match="PPOI"):
            focal.from_ppoi(bad)


# -- the model field ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["1.2,0.5", "0.5,-1", "middle", "0.5"])
def test_full_clean_refuses_a_point_outside_the_image(value: str) -> None:
    photo = Photo(title="x", image=SPOT, focal_point=value)
    with pytest.raises(ValidationError) as caught:
        photo.full_clean()
    assert set(caught.value.message_dict) == {"focal_point"}


def test_a_valid_point_is_stored_as_text_and_read_back_as_a_point() -> None:
    photo = Photo(title="x", image=SPOT, focal_point=" 0.25 , 0.5 ")
    photo.full_clean()
    assert photo.focal_point == SPOT_POINT
    photo.save()
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT focal_point FROM photosapp_photo WHERE id = %s", [photo.pk])
        assert cursor.fetchone() == ("0.25,0.5",)
    assert Photo.objects.get(pk=photo.pk).focal_point == SPOT_POINT
    blank = Photo.objects.create(title="no point", image=SPOT)
    blank.full_clean()
    assert Photo.objects.get(pk=blank.pk).focal_point is None


def test_the_field_deconstructs_to_what_it_was_given() -> None:
    field = FocalPointField(image_field="picture")
    _, path, args, kwargs = field.deconstruct()
    assert path == "django_oximg.fields.FocalPointField"
    assert (args, kwargs) == ([], {"image_field": "picture"})


@isolate_apps("tests.photosapp")
def test_an_image_field_that_is_not_a_file_field_is_a_system_check_error() -> None:
    class Misnamed(models.Model):
        title = models.CharField(max_length=10)
        focal_point = FocalPointField(image_field="title")

        class Meta:
            app_label = "photosapp"

    errors = Misnamed._meta.get_field("focal_point").check()
    assert [error.id for error in errors] == ["oximg.E101"]
    assert isinstance(errors[0], checks.Error) and "'title'" in errors[0].msg


def test_a_bad_stored_value_is_logged_and_the_crop_falls_back_to_its_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    photo = Photo.objects.create(title="x", image=SPOT)
    Photo.objects.filter(pk=photo.pk).update(focal_point="9,9")  # around the form
    loaded = Photo.objects.get(pk=photo.pk)
    assert loaded.focal_point == "9,9"
    with caplog.at_level(logging.WARNING, logger="django_oximg"):
        html = Template('{% load oximg %}{% thumbnail p.image "200x300" crop %}').render(
            Context({"p": loaded})
        )
    assert "/g:" not in html and "/rt:fill/" in html
    (record,) = [r for r in caplog.records if r.name == "django_oximg"]
    assert "photosapp.Photo.focal_point" in record.getMessage()
    assert "outside 0..1" in record.getMessage()
    with pytest.raises(ValidationError):
        loaded.full_clean()


# -- thumbnails that follow it ------------------------------------------------------


def spot_photo(point: Any = SPOT_POINT) -> Photo:
    return Photo.objects.create(title="spot", image=SPOT, focal_point=point)


def test_a_crop_that_names_no_place_centres_on_the_point(client: Client) -> None:
    photo = spot_photo()
    html = Template('{% load oximg %}{% thumbnail p.image "200x300" crop %}').render(
        Context({"p": photo})
    )
    assert "/g:fp:0.25:0.5/" in html
    image = served(client, html)
    assert (image.width, image.height) == (200, 300)
    assert is_red(image, 100, 150)  # the disc is in the middle of the crop
    centred = served(client, get_thumbnail(photo.image, "200x300", crop="center").url)
    assert not is_red(centred, 100, 150)  # the middle of the image is grey


@pytest.mark.parametrize(
    ("crop", "gravity"),
    [
        (True, "/g:fp:0.25:0.5/"),
        ("true", "/g:fp:0.25:0.5/"),
        ("center", None),
        ("top", "/g:no/"),
        ("smart", "/g:sm/"),
        ("10% 90%", "/g:fp:0.1:0.9/"),
    ],
)
def test_an_explicit_place_wins_over_the_point(crop: Any, gravity: str | None) -> None:
    url = get_thumbnail(spot_photo().image, "200x300", crop=crop).url
    if gravity is None:
        assert "/g:" not in url
    else:
        assert gravity in url


def test_a_fitted_thumbnail_is_the_same_url_with_or_without_a_point() -> None:
    with_point = get_thumbnail(spot_photo().image, "200x200").url
    without = get_thumbnail(spot_photo(None).image, "200x200").url
    assert with_point == without and "/g:" not in with_point


def test_the_call_may_give_its_own_point_or_none() -> None:
    photo = spot_photo()
    given = get_thumbnail(photo.image, "50x50", crop=True, focal_point="0.1,0.2").url
    assert "/g:fp:0.1:0.2/" in given
    off = get_thumbnail(photo.image, "50x50", crop=True, focal_point=None).url
    assert "/g:" not in off


def test_a_preset_that_fills_without_a_gravity_follows_the_point(
    settings: Any, client: Client
) -> None:
    settings.OXIMG = {
        **settings.OXIMG,
        "PRESETS": {"card": "rs:fill:200:300", "face": "rs:fill:200:300/g:sm", "fit": "w:100"},
    }
    photo = spot_photo()
    card = get_thumbnail(photo.image, preset="card")
    assert "/g:fp:0.25:0.5/" in card.url
    assert is_red(served(client, card.url), 100, 150)
    assert "/g:" not in get_thumbnail(photo.image, preset="face").url  # g:sm is the preset's
    assert "/g:" not in get_thumbnail(photo.image, preset="fit").url
    filtered = Template('{% load oximg %}{{ p.image|thumbnail_url:"card" }}').render(
        Context({"p": photo})
    )
    assert filtered == card.url


def test_only_presets_urls_carry_no_point(settings: Any) -> None:
    settings.OXIMG = {
        **settings.OXIMG,
        "PRESETS": {"card": "rs:fill:200:300"},
        "ONLY_PRESETS": True,
    }
    url = get_thumbnail(spot_photo().image, preset="card").url
    assert "/card/plain/photos/spot.jpg" in url and "fp" not in url


def test_srcsets_and_their_placeholder_follow_the_point(client: Client) -> None:
    photo = spot_photo()
    srcset = get_srcset(photo.image, "200x300", widths=[100, 200], crop=True)
    assert [c.width for c in srcset.candidates] == [100, 200]
    assert all("/g:fp:0.25:0.5/" in c.url for c in srcset.candidates)
    small = served(client, srcset.candidates[0].url)
    assert (small.width, small.height) == (100, 150) and is_red(small, 50, 75)
    picture = get_picture(photo.image, "200x300", widths=[200], crop=True, placeholder=True)
    assert picture.placeholder is not None and "/g:fp:0.25:0.5/" in picture.placeholder.url


def test_a_literal_bad_point_in_a_template_fails_when_it_is_compiled() -> None:
    with pytest.raises(TemplateSyntaxError, match=r"outside 0\.\.1"):
        Template('{% load oximg %}{% thumbnail p.image "50x50" crop focal_point="2,2" %}')


def test_tag_defaults_cannot_set_a_point(settings: Any) -> None:
    from django_oximg import conf

    settings.OXIMG = {**settings.OXIMG, "TAG_DEFAULTS": {"focal_point": "0.5,0.5"}}
    with pytest.raises(ImproperlyConfigured, match="focal_point"):
        conf.get_settings()


# -- forms, the widget and the admin -------------------------------------------------


class PhotoForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Photo
        fields: ClassVar = ("title", "image", "focal_point")


def test_a_model_form_validates_the_point() -> None:
    photo = spot_photo(None)
    form = PhotoForm({"title": "x", "focal_point": "0.25,0.5"}, instance=photo)
    assert form.is_valid(), form.errors
    form.save()
    assert Photo.objects.get(pk=photo.pk).focal_point == SPOT_POINT
    for bad in ("0.25", "1,2", "<script>"):
        form = PhotoForm({"title": "x", "focal_point": bad}, instance=photo)
        assert not form.is_valid()
        assert "between 0 and 1" in form.errors["focal_point"][0]


def test_the_widget_shows_the_image_a_marker_and_the_text_input() -> None:
    form = PhotoForm(instance=spot_photo())
    assert isinstance(form.fields["focal_point"], FocalPointFormField)
    html = str(form["focal_point"])
    (src,) = re.findall(r'<img class="oximg-focal-image" src="([^"]+)"', html)
    assert "/g:" not in src  # the whole image, fitted: the editor clicks on it
    assert 'width="400" height="300"' in html
    assert 'class="oximg-focal-marker" hidden' in html
    assert re.search(r'<input type="text" name="focal_point" value="0.25,0.5"[^>]*>', html)
    assert "django_oximg/focal_point.js" in str(form.media)


def test_the_text_input_has_a_visible_label_and_a_description() -> None:
    html = str(PhotoForm(instance=spot_photo())["focal_point"])
    label = re.search(r'<label class="oximg-focal-label" for="([^"]+)">([^<]+)</label>', html)
    assert label is not None and label[2] == "Focal point (x,y)"
    (described,) = re.findall(r'<input [^>]*id="id_focal_point"[^>]*>', html)
    assert label[1] == "id_focal_point"
    (help_id,) = re.findall(r'aria-describedby="([^"]+)"', described)
    assert re.search(rf'<p class="oximg-focal-help" id="{help_id}">Click the image', html)


def test_without_an_image_the_widget_is_the_labelled_text_input_alone() -> None:
    html = str(PhotoForm(instance=Photo(title="new"))["focal_point"])
    assert "<img" not in html and 'name="focal_point"' in html
    assert '<label class="oximg-focal-label" for="id_focal_point">' in html
    standalone = FocalPointWidget().render("point", SPOT_POINT)
    assert "<img" not in standalone and 'value="0.25,0.5"' in standalone
    assert 'for="id_point"' in standalone and 'id="id_point"' in standalone


#: A size's preview in the widget: its size, the image and its caption.
CROP_PREVIEW = re.compile(
    r'<figure class="oximg-focal-size" data-width="(\d+)" data-height="(\d+)">'
    r'<div class="oximg-focal-crop"><img src="([^"]+)" alt=""></div>'
    r"<figcaption>([^<]+) <span>"
)


def crop_previews_of(html: str) -> list[tuple[str, int, int]]:
    """The widget's previews of the sizes that follow the point: caption, width, height.

    Each shows the widget's own fitted image, which the script cuts.
    """
    (image,) = re.findall(r'<img class="oximg-focal-image" src="([^"]+)"', html)
    found = CROP_PREVIEW.findall(html)
    assert all(src == image for _w, _h, src, _caption in found)
    return [(caption, int(width), int(height)) for width, height, _src, caption in found]


def test_the_widget_previews_the_declared_sizes_that_follow_the_point(settings: Any) -> None:
    """Declared sizes that crop without saying where, a preset that fills without a
    gravity included; not those that fit, or name a place or a point of their own."""
    settings.OXIMG = {
        **settings.OXIMG,
        "PRESETS": {"banner": "rs:fill:300:100", "attention": "rs:fill:100:100/g:sm"},
        "RENDER_AHEAD": {
            "photosapp.Photo.image": {
                "card": "200x300 crop",
                "banner": "banner",
                "top": "200x300 crop=top",
                "smart": "attention",
                "fitted": "200x200",
                "pinned": "200x300 crop focal_point=0.5,0.5",
            }
        },
    }
    html = str(PhotoForm(instance=spot_photo())["focal_point"])
    assert crop_previews_of(html) == [("card", 200, 300), ("banner", 300, 100)]
    assert '<div class="oximg-focal-sizes" hidden>' in html  # shown by the script, which cuts them


def test_the_widget_previews_the_sizes_it_is_given_after_the_declared_ones(settings: Any) -> None:
    settings.OXIMG = {
        **settings.OXIMG,
        "RENDER_AHEAD": {"photosapp.Photo.image": {"card": "200x300 crop"}},
    }

    class GivenForm(PhotoForm):
        class Meta(PhotoForm.Meta):
            widgets: ClassVar = {
                "focal_point": FocalPointWidget(
                    sizes={
                        "card": "200x300 crop",
                        "tile": "320x240 crop=yes",
                        "left": "80 crop=left",
                    }
                )
            }

    html = str(GivenForm(instance=spot_photo())["focal_point"])
    # "card" once; "left" names its place: no point moves it.
    assert crop_previews_of(html) == [("card", 200, 300), ("tile", 320, 240)]
    assert crop_previews_of(str(GivenForm(instance=spot_photo(None))["focal_point"])) == [
        ("card", 200, 300),
        ("tile", 320, 240),
    ]  # the same without a stored point: the script centres them


def test_no_size_follows_the_point_no_previews_and_a_bad_size_fails_when_given() -> None:
    html = str(PhotoForm(instance=spot_photo())["focal_point"])
    assert "oximg-focal-sizes" not in html
    with pytest.raises(ValueError, match="No closing quotation"):
        FocalPointWidget(sizes=["320x240 crop= '"])


def test_the_static_files_ship_in_the_package() -> None:
    static = REPO_ROOT / "django_oximg" / "static" / "django_oximg"
    script = (static / "focal_point.js").read_text()
    assert "data-oximg-focal" in script and "import " not in script  # no build step
    assert (static / "focal_point.css").is_file()


@pytest.mark.usefixtures("admin_site_settings")
def test_the_admin_change_form_sets_and_refuses_points(admin_client: Client) -> None:
    photo = spot_photo(None)
    url = f"/admin/photosapp/photo/{photo.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert "data-oximg-focal" in page and "django_oximg/focal_point.js" in page
    response = admin_client.post(url, {"title": "spot", "focal_point": "0.25,0.5"})
    assert response.status_code == 302
    assert Photo.objects.get(pk=photo.pk).focal_point == SPOT_POINT
    response = admin_client.post(url, {"title": "spot", "focal_point": "0.25,7"})
    assert response.status_code == 200
    assert "between 0 and 1" in response.content.decode()
    assert Photo.objects.get(pk=photo.pk).focal_point == SPOT_POINT
    listing = admin_client.get("/admin/photosapp/photo/").content.decode()
    assert "/g:fp:0.25:0.5/" in listing  # the change list's crop follows the point


# -- the page ------------------------------------------------------------------------


def module_body(path: Path) -> str:
    """A module's text after its docstring: what a documentation page shows of it."""
    text = path.read_text()
    docstring = ast.parse(text).body[0]
    assert isinstance(docstring, ast.Expr)
    lines = text.splitlines(keepends=True)[docstring.end_lineno :]
    return "".join(lines).strip() + "\n"


@pytest.mark.parametrize("module", ["models.py", "admin.py"])
def test_the_page_shows_the_example_app_as_it_is(module: str) -> None:
    page = (REPO_ROOT / "docs" / "focal-point.md").read_text()
    body = module_body(REPO_ROOT / "tests" / "photosapp" / module)
    assert f"```python\n# {module}\n{body}```" in page


def test_a_plain_model_admin_gets_the_widget_too() -> None:
    from django.contrib import admin
    from django.test import RequestFactory

    plain = admin.ModelAdmin(Photo, admin.AdminSite(name="plain"))
    field = plain.formfield_for_dbfield(
        Photo._meta.get_field("focal_point"), RequestFactory().get("/")
    )
    assert isinstance(field, FocalPointFormField)
    assert isinstance(field.widget, FocalPointWidget)
