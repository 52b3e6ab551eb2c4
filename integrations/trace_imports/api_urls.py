"""The imports API (docs/api.md, "Imports — `/api/v1/imports/`"), under /api/v1/."""

from django.urls import path

from integrations.trace_imports import api as imports

urlpatterns = [
    path("imports/", imports.ImportCreateApi.as_view(), name="imports"),
    path("imports/<str:id>/", imports.ImportDetailApi.as_view(), name="import-detail"),
    path("imports/<str:id>/cancel/", imports.ImportCancelApi.as_view(), name="import-cancel"),
]
