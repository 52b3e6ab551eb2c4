"""A person in two workspaces that both hold external id "order-1": the external id resolves
in the workspace the person chose, never in whichever row sorts first (docs/access.md,
"People and access")."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests import factories as f
from threads.models import Checkpoint, Membership, Role, Thread

pytestmark = pytest.mark.django_db


# The other workspace's thread sorts first by primary key, as a lookup that takes "the first
# row" would pick it: the rule under test must not depend on the order of UUIDs.
THREAD_IDS = {
    "acme": uuid.UUID("ffffffff-ffff-4fff-bfff-ffffffffffff"),
    "globex": uuid.UUID("00000000-0000-4000-8000-000000000000"),
}


@pytest.fixture
def two_workspaces(db: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    acme, _ = f.make_workspace("acme")
    globex, _ = f.make_workspace("globex")
    person = f.make_person(acme, "dana", "operator")
    Membership.objects.create(user=person, workspace=globex, role=Role.OPERATOR)
    threads = {}
    id_field = Thread._meta.get_field("id")
    for workspace in (acme, globex):
        # Field caches its default callable as _get_default.
        monkeypatch.setattr(id_field, "_get_default", lambda name=workspace.name: THREAD_IDS[name])
        thread = f.make_thread(workspace, external_id="order-1", title=f"{workspace.name} order")
        f.append(thread, f.user(f"hello from {workspace.name}"))
        threads[workspace.name] = thread
    monkeypatch.undo()
    return {"person": person, "acme": acme, "globex": globex, "threads": threads}


def _choose(client: Client, workspace: Any) -> None:
    response = client.post("/workspace/", {"workspace": workspace.pk, "next": "/threads/"})
    assert response.status_code in (302, 303)
    assert response["Location"] == "/threads/"


@pytest.mark.parametrize("chosen", ["acme", "globex"])
def test_dashboard_resolves_external_id_in_the_chosen_workspace(
    two_workspaces: dict[str, Any], chosen: str
) -> None:
    client = Client()
    client.force_login(two_workspaces["person"])
    _choose(client, two_workspaces[chosen])
    expected = two_workspaces["threads"][chosen]

    page = client.get("/threads/order-1/")
    assert page.status_code == 200
    assert page.context["thread"].pk == expected.pk
    assert f"{chosen} order" in page.content.decode()
    # The top bar says which workspace external ids resolve in.
    assert page.context["ctx_current_workspace"]().pk == two_workspaces[chosen].pk

    context = client.get("/threads/order-1/context/")
    assert context.status_code == 200
    assert context.context["thread"].pk == expected.pk


@pytest.mark.parametrize("chosen", ["acme", "globex"])
def test_api_reads_and_writes_follow_the_chosen_workspace(
    two_workspaces: dict[str, Any], chosen: str
) -> None:
    client = APIClient()
    client.force_login(two_workspaces["person"])
    _choose(client, two_workspaces[chosen])
    expected = two_workspaces["threads"][chosen]
    other = two_workspaces["threads"]["globex" if chosen == "acme" else "acme"]

    read = client.get("/api/v1/threads/order-1/")
    assert read.status_code == 200
    assert read.json()["id"] == str(expected.pk)

    write = client.post("/api/v1/threads/order-1/checkpoints/", {"label": "x"}, format="json")
    assert write.status_code == 201, write.content
    assert write.json()["thread"] == str(expected.pk)
    assert not Checkpoint.objects.filter(thread=other, label="x").exists()


def test_without_a_choice_an_ambiguous_external_id_resolves_in_the_first_workspace_by_name(
    two_workspaces: dict[str, Any],
) -> None:
    client = APIClient()
    client.force_login(two_workspaces["person"])
    for _ in range(3):  # deterministic, not whichever row sorts first
        assert client.get("/api/v1/threads/order-1/").json()["id"] == str(
            two_workspaces["threads"]["acme"].pk
        )


def test_an_external_id_resolves_only_in_the_chosen_workspace_but_a_uuid_anywhere(
    two_workspaces: dict[str, Any],
) -> None:
    only_globex = f.make_thread(two_workspaces["globex"], external_id="globex-only")
    client = Client()
    client.force_login(two_workspaces["person"])
    _choose(client, two_workspaces["acme"])
    assert client.get("/threads/globex-only/").status_code == 404
    assert client.get(f"/threads/{only_globex.pk}/").status_code == 200
    assert client.get(f"/api/v1/threads/{only_globex.pk}/").status_code == 200


def test_choosing_a_workspace_one_does_not_belong_to_is_404(
    two_workspaces: dict[str, Any],
) -> None:
    stranger_ws, _ = f.make_workspace("initech")
    client = Client()
    client.force_login(two_workspaces["person"])
    response = client.post("/workspace/", {"workspace": stranger_ws.pk, "next": "/threads/"})
    assert response.status_code == 404
    assert "ctx_workspace" not in client.session


def test_the_switcher_never_redirects_off_site(two_workspaces: dict[str, Any]) -> None:
    client = Client()
    client.force_login(two_workspaces["person"])
    response = client.post(
        "/workspace/", {"workspace": two_workspaces["acme"].pk, "next": "/\\evil.example"}
    )
    assert response["Location"] == "/threads/"
