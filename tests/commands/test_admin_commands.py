"""create_workspace, add_member and verify_chains."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from tests import factories as f
from threads.models import Checkpoint, Event, Membership, Thread, Workspace

pytestmark = pytest.mark.django_db


def _run(*args: Any) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_create_workspace_prints_a_working_key_on_its_last_line() -> None:
    output = _run("create_workspace", "initech")
    key = output.strip().splitlines()[-1]
    assert Workspace.objects.filter(name="initech").exists()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    answer = client.post("/api/v1/threads/", {"external_id": "t-1"}, format="json")
    assert answer.status_code == 201, answer.content


def test_create_workspace_refuses_a_duplicate(workspace: Workspace) -> None:
    with pytest.raises(CommandError, match="already exists"):
        _run("create_workspace", workspace.name)


def test_add_member_creates_then_updates(workspace: Workspace) -> None:
    _run("add_member", workspace.name, "ada", "operator", "--password", "first-password-1")
    _run("add_member", workspace.name, "ada", "admin", "--password", "second-password-2")
    user = get_user_model().objects.get(username="ada")
    assert user.check_password("second-password-2")
    assert Membership.objects.get(user=user, workspace=workspace).role == "admin"
    assert Membership.objects.filter(user=user).count() == 1


def test_add_member_holds_the_password_to_the_validators(workspace: Workspace) -> None:
    with pytest.raises(CommandError, match="password refused: .*too short"):
        _run("add_member", workspace.name, "bob", "operator", "--password", "short")
    assert not get_user_model().objects.filter(username="bob").exists()
    _run("add_member", workspace.name, "ada", "operator", "--password", "first-password-1")
    with pytest.raises(CommandError, match="password refused"):
        _run("add_member", workspace.name, "ada", "admin", "--password", "short")
    ada = get_user_model().objects.get(username="ada")
    assert ada.check_password("first-password-1")
    assert Membership.objects.get(user=ada, workspace=workspace).role == "operator"


def test_add_member_without_a_password_says_the_person_cannot_sign_in(
    workspace: Workspace,
) -> None:
    output = _run("add_member", workspace.name, "bob", "operator")
    assert "bob has no password and cannot sign in" in output
    bob = get_user_model().objects.get(username="bob")
    assert not bob.has_usable_password()
    # An existing person keeps their password, and nothing is said about it.
    _run("add_member", workspace.name, "ada", "operator", "--password", "first-password-1")
    output = _run("add_member", workspace.name, "ada", "admin")
    assert "cannot sign in" not in output
    assert get_user_model().objects.get(username="ada").check_password("first-password-1")


def test_add_member_names_a_missing_workspace() -> None:
    with pytest.raises(CommandError, match="no workspace"):
        _run("add_member", "nowhere", "ada", "operator")


def _filled(workspace: Workspace, external_id: str) -> Thread:
    thread = f.make_thread(workspace, external_id)
    f.append(
        thread,
        f.user("hello"),
        f.call("c1", "lookup", {"q": 1}),
        f.result("c1", value={"ok": True}),
        f.assistant("done"),
        f.user("thanks"),
    )
    return thread


def test_verify_chains_reports_ok(workspace: Workspace) -> None:
    _filled(workspace, "a")
    _filled(workspace, "b")
    output = _run("verify_chains")
    assert output.count("OK") == 2 and "acme/a" in output and "seq 5" in output


@pytest.mark.parametrize(
    ("option", "message"), [("--workspace", "no workspace 'nosuch'"), ("--thread", "no thread")]
)
def test_verify_chains_refuses_an_unknown_workspace_or_thread(
    workspace: Workspace, option: str, message: str
) -> None:
    _filled(workspace, "a")
    out = io.StringIO()
    with pytest.raises(CommandError, match=message) as failure:
        call_command("verify_chains", option, "nosuch", stdout=out, stderr=io.StringIO())
    assert failure.value.returncode == 2
    assert out.getvalue() == ""


def test_verify_chains_of_one_workspace(workspace: Workspace) -> None:
    _filled(workspace, "a")
    _filled(Workspace.objects.create(name="other"), "b")
    output = _run("verify_chains", "--workspace", workspace.name)
    assert "acme/a" in output and "other/b" not in output


def test_verify_chains_names_a_flipped_row_and_marks_checkpoints(workspace: Workspace) -> None:
    good = _filled(workspace, "good")
    bad = _filled(workspace, "bad")
    from django.db import transaction

    from threads.services.checkpoints import checkpoint_record

    with transaction.atomic():
        late = checkpoint_record(
            thread=bad,
            version=None,
            summary_checksum="",
            cursor=4,
            chain_hash=Event.objects.get(thread=bad, seq=4).hash,
        )
        early = checkpoint_record(
            thread=bad,
            version=None,
            summary_checksum="",
            cursor=2,
            chain_hash=Event.objects.get(thread=bad, seq=2).hash,
        )
    with f.log_unsealed():
        Event.objects.filter(thread=bad, seq=3).update(
            data={"tool_call_id": "c1", "status": "failed", "call_seq": 2}
        )
    out = io.StringIO()
    with pytest.raises(CommandError) as failure:
        call_command("verify_chains", "--full", stdout=out, stderr=io.StringIO())
    assert failure.value.returncode == 1
    lines = out.getvalue().splitlines()
    assert any(
        line.startswith("BROKEN") and "acme/bad" in line and "first bad seq 3" in line
        for line in lines
    )
    assert any(line.startswith("OK") and "acme/good" in line for line in lines)
    assert not Checkpoint.objects.get(pk=late.pk).safe
    assert Checkpoint.objects.get(pk=early.pk).safe
    good.refresh_from_db()
    assert good.chain_ok


def test_verify_chains_for_one_thread_by_external_id(workspace: Workspace) -> None:
    _filled(workspace, "a")
    _filled(workspace, "b")
    output = _run("verify_chains", "--thread", "b")
    assert "acme/b" in output and "acme/a" not in output
    with pytest.raises(CommandError):
        _run("verify_chains", "--thread", "missing")
