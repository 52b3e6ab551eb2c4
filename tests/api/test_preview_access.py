"""A rollback preview is the first step of a rollback, an admin's action: the API and the
dashboard answer it by one rule (docs/api.md, "Roles")."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests import factories as f
from tests.services.test_checkpoints import two_versions
from threads.models import Thread

pytestmark = pytest.mark.django_db


@pytest.fixture
def preview_paths(thread: Thread) -> tuple[str, str]:
    cp1, _ = two_versions(thread)
    return (
        f"/api/v1/threads/{thread.pk}/checkpoints/{cp1.pk}/preview/",
        f"/threads/{thread.pk}/checkpoints/{cp1.pk}/rollback-preview/",
    )


@pytest.mark.parametrize(
    ("role", "allowed"), [("operator", False), ("reviewer", False), ("admin", True)]
)
def test_api_and_dashboard_answer_the_preview_by_one_rule(
    workspace: Any, preview_paths: tuple[str, str], role: str, allowed: bool
) -> None:
    api_path, page_path = preview_paths
    person = f.make_person(workspace, f"{role}-p", role)
    api = APIClient()
    api.force_login(person)
    page = Client()
    page.force_login(person)

    answer = api.get(api_path)
    assert answer.status_code == (200 if allowed else 403)
    if not allowed:
        error = answer.json()["error"]
        assert error["code"] == "permission_denied" and "admin" in error["message"]
    assert page.get(page_path).status_code == (200 if allowed else 403)


def test_an_agent_key_may_not_preview(agent: APIClient, preview_paths: tuple[str, str]) -> None:
    answer = agent.get(preview_paths[0])
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "permission_denied"
