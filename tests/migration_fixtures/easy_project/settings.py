INSTALLED_APPS = [
    "django.contrib.staticfiles",
    "easy_thumbnails",
    "profiles",
]

THUMBNAIL_ALIASES = {
    "": {
        "avatar": {"size": (50, 50), "crop": True},
        "card": {"size": (400, 300), "crop": "smart", "quality": 70},
        "wide": {"size": (1200, 0), "upscale": True},
        "grey": {"size": (100, 100), "bw": True},
    },
    "profiles.Profile.banner": {
        "hero": {"size": (1600, 400), "crop": ",0", "sharpen": True},
    },
}
THUMBNAIL_QUALITY = 90
THUMBNAIL_HIGH_RESOLUTION = True
