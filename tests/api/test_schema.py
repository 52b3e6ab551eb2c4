"""The OpenAPI schema of the threads, events and tasks routes, and the offline Swagger UI."""

from __future__ import annotations

import pytest
from django.urls import path
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator

from threads.api import events, tasks
from threads.api import threads as threads_api

pytestmark = pytest.mark.django_db

ROUTES = [
    path("api/v1/threads/", threads_api.ThreadListCreateApi.as_view()),
    path("api/v1/threads/<str:id>/", threads_api.ThreadDetailApi.as_view()),
    path("api/v1/threads/<str:id>/events/", events.ThreadEventsApi.as_view()),
    path("api/v1/tasks/<str:task_id>/", tasks.TaskDetailApi.as_view()),
]


def test_schema_of_these_routes_generates_without_warnings():
    GENERATOR_STATS.reset()
    schema = SchemaGenerator(patterns=ROUTES).get_schema(request=None, public=True)
    assert not GENERATOR_STATS._warn_cache, dict(GENERATOR_STATS._warn_cache)
    assert not GENERATOR_STATS._error_cache, dict(GENERATOR_STATS._error_cache)
    paths = schema["paths"]
    assert set(paths["/api/v1/threads/"]) == {"get", "post"}
    append = paths["/api/v1/threads/{id}/events/"]["post"]
    assert {"200", "201", "400", "409", "413", "415", "422"} <= set(append["responses"])
    listed = {p["name"] for p in paths["/api/v1/threads/"]["get"]["parameters"]}
    assert {
        "q",
        "status",
        "has_unknown_side_effects",
        "verification",
        "pending_approvals",
        "limit",
        "offset",
    } <= listed
    paged = {p["name"] for p in paths["/api/v1/threads/{id}/events/"]["get"]["parameters"]}
    assert {"after", "limit"} <= paged
    task = schema["components"]["schemas"]["TaskStatus"]["properties"]
    assert {"task_id", "state", "progress", "result"} <= set(task)
    assert "apiKeyAuth" in schema["components"]["securitySchemes"]


def test_schema_and_docs_are_served_offline(agent, client):
    schema = agent.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/api/v1/threads/{id}/events/" in schema.json()["paths"]
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    page = docs.content.decode()
    assert "swagger-ui" in page
    assert "cdn" not in page.lower() and "//unpkg" not in page
    assert "drf_spectacular_sidecar" in page
