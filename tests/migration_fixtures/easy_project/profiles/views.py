from django.http import JsonResponse
from easy_thumbnails.files import get_thumbnailer

from profiles.models import Profile


def profile_json(request, pk):
    profile = Profile.objects.get(pk=pk)
    avatar = get_thumbnailer(profile.photo)["avatar"].url
    thumb = get_thumbnailer(profile.photo).get_thumbnail({"size": (100, 100), "crop": True})
    return JsonResponse({"avatar": avatar, "thumb": thumb.url})
