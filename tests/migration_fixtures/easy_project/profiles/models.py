from django.db import models
from easy_thumbnails.fields import ThumbnailerImageField


class Profile(models.Model):
    photo = ThumbnailerImageField(upload_to="photos", blank=True)
