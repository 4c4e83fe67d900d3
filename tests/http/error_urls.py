"""The runtime's routes and error handlers, plus two routes that fail: for the 500 pages' tests."""

from django.urls import path

from factory_site.urls import handler400, handler403, handler404, handler500  # noqa: F401
from factory_site.urls import urlpatterns as site_patterns


def boom(request):
    raise RuntimeError("boom")


urlpatterns = [path("boom/", boom), path("api/boom", boom), *site_patterns]
