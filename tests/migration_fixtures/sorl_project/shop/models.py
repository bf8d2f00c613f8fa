from django.db import models
from sorl.thumbnail import ImageField


class Product(models.Model):
    name = models.CharField(max_length=200)
    image = ImageField(upload_to="products")
