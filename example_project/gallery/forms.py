"""The upload form: a plain ModelForm.

Its ``image`` is Django's ``forms.ImageField`` (the model field's form
field), which opens the upload with Pillow and refuses what it cannot read
with the form's own error, before anything is saved or thumbnailed; the
model field's ``validate_servable_image`` then refuses what the image
server would (over 50 megapixels, say), naming the limit.
"""

from __future__ import annotations

from django import forms

from gallery.models import Photo


class PhotoForm(forms.ModelForm):
    class Meta:
        model = Photo
        fields = ("title", "image")
