"""API keys from the dashboard (admins): list, create with the secret shown once, revoke and
expire, each audited; a revoked or expired key is refused at once; operators get 403."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tests.views.conftest import login
from threads.models import ApiKey, AuditEntry

pytestmark = pytest.mark.django_db


def _agent(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def _create(admin: Client, workspace: Any, name: str = "ci", expires: str = "") -> str:
    response = admin.post(
        "/keys/new/", {"workspace": workspace.pk, "name": name, "expires": expires}
    )
    assert response.status_code == 201, response.content
    assert response["Cache-Control"] == "no-store"
    found = re.search(
        r'<pre class="mono" id="new-secret">(ctx_[^<]+)</pre>', response.content.decode()
    )
    assert found
    return found.group(1)


def test_the_list_shows_keys_without_secrets(admin: Client, workspace: Any) -> None:
    page = admin.get("/keys/")
    assert page.status_code == 200
    default = ApiKey.objects.get(workspace=workspace, name="default")
    assert default.prefix in page.content.decode()
    assert default.key_hash not in page.content.decode()


def test_create_shows_the_secret_once(admin: Client, workspace: Any) -> None:
    secret = _create(admin, workspace)
    key = ApiKey.objects.get(workspace=workspace, name="ci")
    assert secret.startswith(key.prefix) and secret not in key.key_hash
    assert secret not in admin.get("/keys/").content.decode()
    assert _agent(secret).get("/api/v1/threads/").status_code == 200
    entry = AuditEntry.objects.get(action="api_key.create")
    assert entry.target_id == str(key.pk) and entry.actor_label == "admin-person"
    assert secret not in str(entry.after) and key.key_hash not in str(entry.after)


def test_a_revoked_key_is_refused_at_once(admin: Client, workspace: Any) -> None:
    secret = _create(admin, workspace)
    agent = _agent(secret)
    assert agent.get("/api/v1/threads/").status_code == 200
    key = ApiKey.objects.get(name="ci")
    assert admin.post(f"/keys/{key.pk}/revoke/").status_code == 302
    refused = agent.get("/api/v1/threads/")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "authentication_failed"
    entry = AuditEntry.objects.get(action="api_key.revoke")
    assert entry.before is not None and entry.after is not None
    assert entry.before["revoked_at"] is None and entry.after["revoked_at"]
    # Revoking again records nothing more.
    admin.post(f"/keys/{key.pk}/revoke/")
    assert AuditEntry.objects.filter(action="api_key.revoke").count() == 1


def test_an_expired_key_is_refused(admin: Client, workspace: Any) -> None:
    tomorrow = (timezone.now() + timedelta(days=1)).date().isoformat()
    secret = _create(admin, workspace, expires=tomorrow)
    agent = _agent(secret)
    assert agent.get("/api/v1/threads/").status_code == 200
    key = ApiKey.objects.get(name="ci")
    assert key.expires_at is not None
    yesterday = (timezone.now() - timedelta(days=1)).date().isoformat()
    assert admin.post(f"/keys/{key.pk}/expiry/", {"expires": yesterday}).status_code == 302
    assert agent.get("/api/v1/threads/").status_code == 401
    assert "expired" in admin.get("/keys/").content.decode()
    entry = AuditEntry.objects.get(action="api_key.expire")
    assert entry.before is not None and entry.after is not None
    assert entry.before["expires_at"] != entry.after["expires_at"]
    # Clearing the expiry lets it work again.
    admin.post(f"/keys/{key.pk}/expiry/", {"expires": ""})
    assert agent.get("/api/v1/threads/").status_code == 200


def test_an_expiry_in_the_past_is_refused_on_create(admin: Client, workspace: Any) -> None:
    response = admin.post(
        "/keys/new/", {"workspace": workspace.pk, "name": "old", "expires": "2000-01-01"}
    )
    assert response.status_code == 400
    assert not ApiKey.objects.filter(name="old").exists()


@pytest.mark.parametrize("role", ["operator", "reviewer"])
def test_other_roles_get_403(workspace: Any, role: str) -> None:
    person = login(workspace, role)
    key = ApiKey.objects.get(workspace=workspace, name="default")
    assert person.get("/keys/").status_code == 403
    assert person.post("/keys/new/", {"workspace": workspace.pk, "name": "x"}).status_code == 403
    assert person.post(f"/keys/{key.pk}/revoke/").status_code == 403
    assert person.post(f"/keys/{key.pk}/expiry/", {"expires": ""}).status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None
    assert not AuditEntry.objects.filter(action__startswith="api_key.").exists()


def test_another_workspaces_key_is_404(outsider: Client, workspace: Any) -> None:
    key = ApiKey.objects.get(workspace=workspace, name="default")
    assert outsider.post(f"/keys/{key.pk}/revoke/").status_code == 404
    assert outsider.post(f"/keys/{key.pk}/expiry/", {"expires": ""}).status_code == 404
    assert outsider.post("/keys/new/", {"workspace": workspace.pk, "name": "x"}).status_code == 404
    assert key.prefix not in outsider.get("/keys/").content.decode()
    key.refresh_from_db()
    assert key.revoked_at is None


def _form_token(admin: Client) -> str:
    found = re.search(r'name="form_token" value="([^"]+)"', admin.get("/keys/").content.decode())
    assert found
    return found.group(1)


def test_a_form_sent_twice_issues_one_key(admin: Client, workspace: Any) -> None:
    """A reload of the answer (the browser sends the form again) issues no second key."""
    token = _form_token(admin)
    body = {"workspace": workspace.pk, "name": "ci-agent", "form_token": token}
    assert admin.post("/keys/new/", body).status_code == 201
    again = admin.post("/keys/new/", body)
    assert again.status_code == 409
    assert "created its key already" in again.content.decode()
    assert "ctx_" not in again.content.decode()
    assert ApiKey.objects.filter(workspace=workspace, name="ci-agent").count() == 1
    # A new rendering of the form is a new form.
    body["form_token"] = _form_token(admin)
    assert admin.post("/keys/new/", body).status_code == 201
    assert ApiKey.objects.filter(workspace=workspace, name="ci-agent").count() == 2


@pytest.mark.parametrize("path", ["/keys/new/", "/workspace/"])
def test_opening_a_forms_target_is_a_page_not_a_blank(admin: Client, path: str) -> None:
    answer = admin.get(path)
    assert answer.status_code == 405
    assert answer["Allow"] == "POST"
    assert "only takes a form" in answer.content.decode()
