from csp.decorators import csp_update
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from threads.api.errors import api_not_found
from threads.views import metrics

urlpatterns = [
    path("api/v1/", include("threads.api.urls")),
    # The integrations' APIs (apps of their own, docs/api.md, "LangGraph checkpointer" and
    # "Imports — `/api/v1/imports/`").
    path("api/v1/", include("integrations.langgraph_checkpointer.urls")),
    path("api/v1/", include("integrations.trace_imports.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI with its set-up script served as a file (the split view), so the page runs
    # under the site's script-src; only its one inline <style> needs style-src-elem relaxed.
    path(
        "api/docs/",
        csp_update({"style-src-elem": ["'unsafe-inline'"]})(
            SpectacularSwaggerSplitView.as_view(url_name="schema")
        ),
        name="api-docs",
    ),
    # Anything else under /api/ is a JSON 404, never the HTML page, whatever DEBUG says.
    re_path(r"^api/", api_not_found),
    # A person already signed in goes on to where they were going (`next`) or the dashboard.
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(redirect_authenticated_user=True),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("metrics", metrics.metrics, name="metrics"),
    path("metrics/", metrics.metrics),
    path("", include("threads.urls")),
    path("", include("integrations.trace_imports.urls")),
]

# JSON for /api/ paths, the product's pages elsewhere.
handler400 = "threads.api.errors.handler400"
handler404 = "threads.api.errors.handler404"
handler500 = "threads.api.errors.handler500"
