from django.http import JsonResponse
from sorl.thumbnail import delete, get_thumbnail

from shop.models import Product


def product_json(request, pk):
    product = Product.objects.get(pk=pk)
    small = get_thumbnail(product.image, "100x100", crop="center", quality=90)
    large = get_thumbnail(product.image, "1000", progressive=False, upscale=False)
    return JsonResponse({"small": small.url, "large": large.url})


def forget_image(product):
    delete(product.image)
