"""The Imports pages of the dashboard (admins)."""

from django.urls import path

from integrations.trace_imports import views as imports

urlpatterns = [
    path("imports/", imports.import_list, name="import-list"),
    path("imports/new/", imports.import_upload, name="import-upload"),
    path("imports/agents/", imports.import_agents_view, name="import-agents"),
    path("imports/<str:id>/", imports.import_detail, name="import-detail"),
    path("imports/<str:id>/cancel/", imports.import_cancel_view, name="import-cancel"),
]
