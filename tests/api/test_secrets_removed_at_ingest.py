"""Secrets redacted at ingest (docs/event-log.md, "Secrets redacted at ingest"): where the
workspace chooses it, an agent's leaked keys never reach the database — not the event, the
search index, the summary folded from the log, the working context or the export — while the
rest of what the agent wrote reads as it was, the chain verifies, a retry of the same request is
recognised and a reused id with another body is still refused."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from tests import factories
from tests.api.conftest import post_json
from tests.api.test_secrets import (
    AWS_KEY_ID,
    GITHUB_TOKEN,
    LEAK_FLAGS,
    SECRET_TEXTS,
    leaked_result,
)
from tests.services.test_checkpoints import fold
from threads.domain.secret_masking import masked_text, masked_value
from threads.models import Thread, Workspace
from threads.services.workspaces import workspace_settings_update

pytestmark = [pytest.mark.django_db]


def database_text() -> str:
    """Every row of the tables an event's text reaches: the log, its search index, the
    summaries, checkpoints and side effects, as the database returns them."""
    tables = ["threads_event", "threads_summaryversion", "threads_checkpoint", "threads_sideeffect"]
    if connection.vendor == "sqlite":
        tables.append("threads_event_search_text")  # what the FTS index was fed
    out: list[str] = []
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            out.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(out)


def no_secret_in(text: str) -> None:
    for secret in SECRET_TEXTS:
        assert secret not in text


def test_the_agents_leak_is_stored_without_its_secrets(
    agent: APIClient, thread: Thread, events_url: str, workspace: Workspace, tmp_path: Any
) -> None:
    workspace_settings_update(
        workspace=workspace, actor_label="test", redact_secrets_at_ingest=True
    )
    leak = {**leaked_result(), "client_event_id": "read-config-1"}
    answer = post_json(
        agent,
        events_url,
        {
            "events": [
                factories.user("Deploy the service with the staging config"),
                factories.call("c1", "read_config", {"path": "deploy/staging.env"}),
                leak,
                factories.assistant("I read the config and will deploy now."),
            ]
        },
    )
    assert answer.status_code == 201, answer.content
    stored = answer.json()[2]
    # Flagged as before, each flag saying that its secret is gone.
    assert stored["secrets"] == [{**flag, "removed": True} for flag in LEAK_FLAGS]
    result = stored["result"]
    assert result["credentials"]["access_key_id"] == "[secret removed at ingest: AWS Access Key]"
    # The text around a secret stays; a private key goes whole.
    assert result["credentials"]["config"] == (
        "aws_secret_access_key = '[secret removed at ingest: AWS Access Key]'"
    )
    assert result["ssh_key"] == "[secret removed at ingest: Private Key]"
    assert result["deploy_token"] == "[secret removed at ingest: GitHub Token]"

    # The working context the agent reads next, and the log it pages through.
    context = agent.get(f"/api/v1/threads/{thread.pk}/context/")
    assert context.status_code == 200
    no_secret_in(context.content.decode())
    assert "staging config" in context.content.decode()
    no_secret_in(agent.get(events_url).content.decode())

    # Search finds the rest of the event, and nothing of the key.
    hits = agent.get("/api/v1/search/", {"q": AWS_KEY_ID}).json()
    assert hits["results"] == []
    assert agent.get("/api/v1/search/", {"q": "aws_secret_access_key"}).json()["results"]

    # A summary folded from the log, and the database under it all.
    fold(thread)
    no_secret_in(database_text())

    # The chain commits to the event as stored: it verifies.
    out = io.StringIO()
    call_command("verify_chains", stdout=out, stderr=io.StringIO())
    assert "OK" in out.getvalue() and "BROKEN" not in out.getvalue().upper()

    # The agent's retry of the same request (same id, same body) is the same event...
    replay = post_json(agent, events_url, leak)
    assert replay.status_code == 200
    assert replay.json()["seq"] == 3 and replay.json()["replayed"] is True
    # ...and the id with another body is still a conflict, not a silent match.
    other = {**leak, "result": {"credentials": {"access_key_id": "AKIAI44QH8DHBEXAMPLE"}}}
    assert post_json(agent, events_url, other).status_code == 409
    thread.refresh_from_db()
    assert thread.last_seq == 4 and thread.events_with_secrets == 1

    # An export holds it as stored.
    path = tmp_path / "export.jsonl"
    call_command("export_thread", str(thread.pk), str(path), stdout=io.StringIO())
    no_secret_in(path.read_text())


def test_off_by_default_and_per_workspace(
    agent: APIClient, thread: Thread, events_url: str, workspace: Workspace
) -> None:
    kept = post_json(agent, events_url, factories.user(f"token {GITHUB_TOKEN}")).json()
    assert kept["content"] == f"token {GITHUB_TOKEN}"
    assert kept["secrets"] == [{"type": "GitHub Token", "field": "content"}]

    # Another workspace's setting changes nothing here.
    other, _ = factories.make_workspace("elsewhere")
    workspace_settings_update(workspace=other, actor_label="test", redact_secrets_at_ingest=True)
    again = post_json(agent, events_url, factories.user(f"again {GITHUB_TOKEN}")).json()
    assert again["content"] == f"again {GITHUB_TOKEN}"

    # The setting is audited, and the command shows it.
    out = io.StringIO()
    call_command(
        "workspace_settings", workspace.name, "--redact-secrets-at-ingest", "on", stdout=out
    )
    assert "redact_secrets_at_ingest on" in out.getvalue()
    masked = post_json(agent, events_url, factories.user(f"now {GITHUB_TOKEN}")).json()
    assert masked["content"] == "now [secret removed at ingest: GitHub Token]"
    # The appenders beside the API (an import, the LangGraph mirror) store it masked too.
    (row,) = factories.append(thread, factories.assistant(f"the key is {AWS_KEY_ID}"))
    assert row.data["content"] == "the key is [secret removed at ingest: AWS Access Key]"


# --- what is taken out -------------------------------------------------------------------------


def test_only_the_secret_goes() -> None:
    url = "postgres://app:s3cr3t-pw@db.internal:5432/prod"
    assert masked_text(f"connect to {url}") == (
        "connect to postgres://app:[secret removed at ingest: Basic Auth Credentials]"
        "@db.internal:5432/prod"
    )
    plain = "the reservation 4WQ150 is confirmed; see https://example.com/help"
    assert masked_text(plain) == plain
    value = {"note": plain, "items": [1, "two", {"k": None}]}
    assert masked_value(value) is value  # nothing to take out: not even copied


def test_a_secret_used_as_a_key_goes_too() -> None:
    masked = masked_value({"tokens": {GITHUB_TOKEN: "deploy", AWS_KEY_ID: "ci"}})
    assert json.dumps(masked).count("secret removed at ingest") == 2
    no_secret_in(json.dumps(masked))


@pytest.mark.parametrize("secret", [AWS_KEY_ID, GITHUB_TOKEN])
def test_every_occurrence_goes(secret: str) -> None:
    text = f"{secret} and again {secret}."
    out: Any = masked_text(text)
    assert secret not in out and out.count("secret removed at ingest") == 2
