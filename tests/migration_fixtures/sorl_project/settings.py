INSTALLED_APPS = [
    "django.contrib.staticfiles",
    "sorl.thumbnail",
    "shop",
]

THUMBNAIL_DEBUG = True
THUMBNAIL_KVSTORE = "sorl.thumbnail.kvstores.redis_kvstore.KVStore"
THUMBNAIL_REDIS_URL = "redis://localhost:6379/1"
THUMBNAIL_FORMAT = "WEBP"
THUMBNAIL_QUALITY = 85
THUMBNAIL_UPSCALE = False
THUMBNAIL_DUMMY = True
