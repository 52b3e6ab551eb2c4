"""API rate limits (docs/api.md, "Codes"): per API key and per person, 429 rate_limited with
Retry-After; another key is unaffected; 0 turns the limit off."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from tests import factories
from threads.services.workspaces import api_key_create

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_counts() -> Any:
    cache.clear()
    yield
    cache.clear()


def _agent(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_the_request_over_the_rate_is_429_with_retry_after(settings, workspace, api_key):
    settings.CTXADMIN_API_RATE = "3/min"
    agent = _agent(api_key)
    other = _agent(api_key_create(workspace=workspace, name="second"))
    for _ in range(3):
        assert agent.get("/api/v1/threads/").status_code == 200
    refused = agent.get("/api/v1/threads/")
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    assert refused.json()["error"]["fields"] == {}
    assert 1 <= int(refused["Retry-After"]) <= 60
    # The limit is the key's: another key of the same workspace still gets through.
    assert other.get("/api/v1/threads/").status_code == 200


def test_people_are_limited_per_person(settings, workspace):
    settings.CTXADMIN_API_RATE = "2/min"
    people = []
    for name in ("ann", "bob"):
        client = APIClient()
        client.force_login(factories.make_person(workspace, name, "operator"))
        people.append(client)
    ann, bob = people
    assert [ann.get("/api/v1/threads/").status_code for _ in range(3)] == [200, 200, 429]
    assert bob.get("/api/v1/threads/").status_code == 200


@pytest.mark.parametrize("rate", ["0", ""])
def test_zero_or_empty_turns_the_limit_off(settings, api_key, rate):
    settings.CTXADMIN_API_RATE = rate
    agent = _agent(api_key)
    assert all(agent.get("/api/v1/threads/").status_code == 200 for _ in range(30))
