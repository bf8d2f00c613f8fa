"""The upload validator refuses what the server would refuse, naming the limit.

Each limit is hit by a file the server really refuses (checked against the
thumbnailer of the same settings), so the form and the server cannot
disagree.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django import forms
from django.core.files import File
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.migrations.writer import MigrationWriter
from PIL import Image

from django_oximg import runtime
from django_oximg.core.errors import OximgError
from django_oximg.validators import ServableImageValidator, validate_servable_image
from tests import bombs, images

pytestmark = pytest.mark.usefixtures("media")


class UploadForm(forms.Form):
    image = forms.ImageField(validators=[validate_servable_image])


def upload(name: str, data: bytes) -> UploadForm:
    form = UploadForm(files={"image": SimpleUploadedFile(name, data)})
    form.is_valid()
    return form


def refusal(name: str, data: bytes) -> tuple[str, str]:
    """The form's one error on the image: (code, message)."""
    form = upload(name, data)
    [error] = form.errors.as_data()["image"]
    return str(error.code), " ".join(error.messages)


def server_refuses(data: bytes) -> bool:
    try:
        runtime.get_thumbnailer().check_servable(data)
    except OximgError:
        return True
    return False


def with_oximg(settings: Any, **values: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, **values}


def test_an_image_the_server_renders_is_accepted() -> None:
    assert upload("photo.jpg", images.jpeg(640, 480)).is_valid()


def test_a_50_megapixel_phone_photo_is_refused_with_its_size_and_the_limit() -> None:
    data = bombs.flat_grey_png(8160, 6144)  # 50.1 MP, a few kilobytes
    code, message = refusal("phone.png", data)
    assert code == "oximg_resolution"
    assert message == (
        "This image is 8160\u00d76144 (50.1 megapixels); the largest accepted is 50 megapixels."
    )
    assert server_refuses(data)


def test_an_animation_is_refused_for_the_frames_it_is_served_with(settings: Any) -> None:
    with_oximg(settings, MAX_SRC_RESOLUTION=50_000)
    data = images.animated_gif(120, 90, frames=6)  # 10 800 px a frame, 64 800 in all
    code, message = refusal("anim.gif", data)
    assert code == "oximg_resolution"
    assert message == (
        "This animation has 6 frames of 120\u00d790 (0.1 megapixels in all); "
        "the largest accepted is 0.1 megapixels."
    )
    # Served as its first frame alone, the same file is within the limit.
    with_oximg(settings, MAX_ANIMATION_FRAMES=1)
    assert upload("anim.gif", data).is_valid()


def test_a_file_over_max_src_file_size_is_refused(settings: Any) -> None:
    data = images.jpeg(640, 480)
    with_oximg(settings, MAX_SRC_FILE_SIZE=100_000)
    size = f"{len(data) / 1024:.1f}"
    assert refusal("photo.jpg", data) == (
        "oximg_file_size",
        f"This file is {size}\xa0KB; the largest accepted is 97.7\xa0KB.",
    )
    assert server_refuses(data)
    # A file a few bytes over is told in bytes, not as two equal sizes.
    with_oximg(settings, MAX_SRC_FILE_SIZE=len(data) - 1)
    _code, message = refusal("photo.jpg", data)
    assert message.endswith(f"the largest accepted is {len(data) - 1:,} bytes.")


def test_a_file_without_a_known_size_is_read_and_measured(settings: Any) -> None:
    data = images.jpeg(640, 480)
    with_oximg(settings, MAX_SRC_FILE_SIZE=len(data) - 1)
    stream = io.BytesIO(data)
    stream.seek(7)
    file = File(stream, name="photo.jpg")
    file.size = None  # type: ignore[assignment]  # as a storage that cannot tell
    with pytest.raises(forms.ValidationError) as refused:
        validate_servable_image(file)
    assert refused.value.code == "oximg_file_size"
    assert stream.tell() == 7  # the position is put back for the next reader


def test_a_new_file_of_a_model_is_checked_and_a_stored_one_is_not_read_again(
    settings: Any, media: Path
) -> None:
    from tests.photosapp.models import Photo

    with_oximg(settings, MAX_SRC_RESOLUTION=640 * 480 - 1)
    stored = Photo(image="photos/landscape.jpg").image
    stored.open = None  # type: ignore[method-assign]  # would fail if it were read
    validate_servable_image(stored)
    photo = Photo()
    photo.image = SimpleUploadedFile("photo.jpg", images.jpeg(640, 480))  # type: ignore[assignment]
    with pytest.raises(forms.ValidationError) as refused:
        validate_servable_image(photo.image)
    assert refused.value.code == "oximg_resolution"


def test_a_closed_file_is_opened_to_be_checked_and_closed_again(settings: Any, media: Path) -> None:
    with_oximg(settings, MAX_SRC_RESOLUTION=640 * 480 - 1)
    path = media / "photos" / "landscape.jpg"
    file = File(path.open("rb"), name=str(path))
    file.close()
    with pytest.raises(forms.ValidationError):
        validate_servable_image(file)
    assert file.closed


def test_an_image_over_the_memory_budget_is_refused(settings: Any) -> None:
    with_oximg(settings, MEMORY_BUDGET=1024 * 1024)
    data = images.jpeg(640, 480)
    code, message = refusal("photo.jpg", data)
    assert code == "oximg_memory"
    assert "to make even a small thumbnail; the server has 1.0\xa0MB." in message
    assert server_refuses(data)


def pillow_image(fmt: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (16, 16), "red").save(out, fmt)
    return out.getvalue()


@pytest.mark.parametrize(
    ("fmt", "code", "message"),
    [
        ("PPM", "oximg_format", "The server does not accept images in this format."),
        ("BMP", "oximg_invalid", "This file is not an image the server can read."),
    ],
)
def test_an_image_pillow_opens_but_the_server_does_not_is_refused(
    fmt: str, code: str, message: str
) -> None:
    data = pillow_image(fmt)
    assert refusal(f"x.{fmt.lower()}", data) == (code, message)
    assert server_refuses(data)


def test_the_validator_goes_into_migrations() -> None:
    text, _imports = MigrationWriter.serialize(validate_servable_image)
    assert text == "django_oximg.validators.ServableImageValidator()"
    assert ServableImageValidator() == validate_servable_image
