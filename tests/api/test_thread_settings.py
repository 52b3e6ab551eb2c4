"""`PATCH /api/v1/threads/{id}/` (docs/api.md, "Settings — `PATCH /api/v1/threads/{id}/`"): an admin
changes a thread's summariser and fold settings, held to the rules of a creation against the
thread's other settings; anything else is refused in the contract's shape and changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests import factories as f
from tests.api.test_checkpoints_api import person
from threads.models import AuditEntry, Thread

pytestmark = pytest.mark.django_db

SETTINGS = (
    "summarizer",
    "context_window",
    "reserved_output",
    "reasoning_reserve",
    "safety_margin",
    "fixed_tokens",
    "high_watermark",
    "low_watermark",
    "encoding",
)


def patch(client: APIClient, thread: Thread, body: Any) -> Any:
    return client.patch(
        f"/api/v1/threads/{thread.pk}/", data=json.dumps(body), content_type="application/json"
    )


def settings_of(thread: Thread) -> dict[str, Any]:
    thread.refresh_from_db()
    return {name: getattr(thread, name) for name in SETTINGS}


def test_an_admin_changes_the_budget_and_the_context_follows(
    workspace: Any, agent: APIClient, thread: Thread
) -> None:
    f.append(thread, f.user("hello " * 200), f.assistant("hi"))
    before = agent.get(f"/api/v1/threads/{thread.pk}/context/").json()["budget"]
    admin = person(workspace, "admin", "ada")
    answer = patch(admin, thread, {"context_window": 32000, "high_watermark": 0.9})
    assert answer.status_code == 200, answer.content
    assert (answer.json()["context_window"], answer.json()["high_watermark"]) == (32000, 0.9)
    after = agent.get(f"/api/v1/threads/{thread.pk}/context/").json()["budget"]
    assert after["window"] == 32000 and after["available"] == before["available"] + 16000
    entry = AuditEntry.objects.get(thread=thread, action="thread.settings")
    assert entry.actor_label == "ada"
    assert entry.before == {"context_window": 16000, "high_watermark": 0.8}
    assert entry.after == {"context_window": 32000, "high_watermark": 0.9}


def test_a_change_that_changes_nothing_writes_nothing(workspace: Any, thread: Thread) -> None:
    admin = person(workspace, "admin")
    assert patch(admin, thread, {"summarizer": "structured"}).status_code == 200
    assert patch(admin, thread, {}).status_code == 200
    assert not AuditEntry.objects.filter(thread=thread, action="thread.settings").exists()


@pytest.mark.parametrize(
    "body, field",
    [
        # Checked against the thread's own high watermark (0.95), not the default.
        ({"high_watermark": 0.4}, "low_watermark"),
        ({"low_watermark": 0.96}, "low_watermark"),
        ({"context_window": 2400}, "context_window"),  # 2400 - 2000 - 500 < 1
        ({"reserved_output": 16000}, "context_window"),
        ({"summarizer": "llm"}, "summarizer"),  # no LLM endpoint on this server
        ({"summarizer": "magic"}, "summarizer"),
        ({"context_window": -1}, "context_window"),
        ({"high_watermark": "0.9"}, "high_watermark"),
        ({"encoding": "o200k_base"}, "encoding"),
        ({"external_id": "renamed"}, "external_id"),
    ],
)
def test_bad_settings_are_400_and_change_nothing(
    workspace: Any, body: dict[str, Any], field: str, settings: Any
) -> None:
    settings.CTXADMIN_LLM_BASE_URL = ""
    thread = f.make_thread(workspace, external_id="tuned", high_watermark=0.95)
    before = settings_of(thread)
    answer = patch(person(workspace, "admin"), thread, body)
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == "validation_error" and field in error["fields"], error
    assert settings_of(thread) == before
    assert not AuditEntry.objects.filter(thread=thread, action="thread.settings").exists()


def test_the_llm_summarizer_is_taken_where_an_endpoint_is_configured(
    workspace: Any, thread: Thread, settings: Any
) -> None:
    settings.CTXADMIN_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    answer = patch(person(workspace, "admin"), thread, {"summarizer": "llm"})
    assert answer.status_code == 200 and answer.json()["summarizer"] == "llm"


@pytest.mark.parametrize("role", ["operator", "reviewer"])
def test_only_admins_change_settings(
    workspace: Any, agent: APIClient, thread: Thread, role: str
) -> None:
    before = settings_of(thread)
    for client in (agent, person(workspace, role)):
        answer = patch(client, thread, {"context_window": 32000})
        assert answer.status_code == 403, answer.content
        assert answer.json()["error"]["code"] == "permission_denied"
    assert settings_of(thread) == before


def test_another_workspace_admin_gets_404(thread: Thread) -> None:
    other, _ = f.make_workspace("initech")
    answer = patch(person(other, "admin"), thread, {"context_window": 32000})
    assert answer.status_code == 404
    assert settings_of(thread)["context_window"] == 16000


def test_an_llm_thread_keeps_its_summarizer_when_other_settings_change(
    workspace: Any, settings: Any
) -> None:
    """The form sends every setting back: the thread's own summariser is no change, even where
    the server has lost its LLM endpoint (the way off it is `structured`)."""
    settings.CTXADMIN_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    thread = f.make_thread(workspace, external_id="llm-thread", summarizer="llm")
    settings.CTXADMIN_LLM_BASE_URL = ""
    admin = person(workspace, "admin")
    answer = patch(admin, thread, {"summarizer": "llm", "context_window": 32000})
    assert answer.status_code == 200, answer.content
    assert settings_of(thread)["context_window"] == 32000
    assert patch(admin, thread, {"summarizer": "structured"}).status_code == 200
    assert settings_of(thread)["summarizer"] == "structured"
