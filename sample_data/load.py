"""Loading the demo workspace: people, an agent key, the sample scenarios and tau-bench threads.

Idempotent: people are created or updated, the key is derived from SECRET_KEY (so it can be
printed again), events carry fixed client_event_ids and replay as no-ops.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from integrations.trace_imports.readers import read_conversations
from integrations.trace_imports.services.conversations import conversations_import
from sample_data.scenarios import scenarios
from threads.domain.errors import IdempotencyConflict
from threads.domain.events import normalize_event
from threads.models import ApiKey, Role, Thread, Workspace
from threads.services.events import event_append_batch
from threads.services.threads import thread_get_or_create
from threads.services.workspaces import API_KEY_PREFIX, api_key_digest, member_add

DEMO_WORKSPACE = "demo"
# One person per role; demo passwords are printed by the demo command.
DEMO_PEOPLE = {
    Role.OPERATOR: ("operator", "operator-demo-pass"),
    Role.REVIEWER: ("reviewer", "reviewer-demo-pass"),
    Role.ADMIN: ("admin", "admin-demo-pass"),
}
TAU_BENCH = Path(settings.BASE_DIR) / "tests" / "data" / "tau-bench-gpt-4o-airline.json.gz"


@dataclass
class Loaded:
    thread: Thread
    created: int
    conflict: str = ""  # set when the thread holds other events under the sample's ids


def demo_api_key() -> str:
    """A key derived from SECRET_KEY: stable across runs, so the demo can print it again."""
    digest = hmac.new(
        settings.SECRET_KEY.encode(), b"ctxadmin demo agent key", hashlib.sha256
    ).hexdigest()
    return f"{API_KEY_PREFIX}demo_{digest[:40]}"


def demo_workspace_load() -> tuple[Workspace, str]:
    with transaction.atomic(durable=True):
        workspace, _ = Workspace.objects.get_or_create(name=DEMO_WORKSPACE)
        secret = demo_api_key()
        ApiKey.objects.get_or_create(
            key_hash=api_key_digest(secret),
            defaults={"workspace": workspace, "name": "demo agent", "prefix": secret[:12]},
        )
    for role, (username, password) in DEMO_PEOPLE.items():
        member_add(workspace=workspace, username=username, role=role, password=password)
    return workspace, secret


def scenarios_load(*, workspace: Workspace) -> list[Loaded]:
    loaded = []
    max_bytes = settings.CTXADMIN_MAX_EVENT_BYTES
    for scenario in scenarios():
        thread, _ = thread_get_or_create(
            workspace=workspace,
            external_id=scenario.external_id,
            title=scenario.title,
            **scenario.settings,
        )
        new = [normalize_event(body, max_bytes=max_bytes) for body in scenario.events]
        try:
            appended = event_append_batch(thread=thread, new_events=new)
        except IdempotencyConflict as exc:
            # Loaded by an older version of the sample: the log is append-only, so it stays.
            loaded.append(Loaded(thread, 0, conflict=exc.message))
            continue
        loaded.append(Loaded(thread, sum(1 for a in appended if a.created)))
    return loaded


def tau_bench_load(*, workspace: Workspace, count: int) -> list[Loaded]:
    """The first `count` tau-bench airline conversations, named by their task id."""
    conversations: list[Any] = read_conversations(str(TAU_BENCH), "openai-chat")[:count]
    named = [{**c, "id": f"tau-airline-task-{c['task_id']:03d}"} for c in conversations]
    results = conversations_import(workspace=workspace, conversations=named, fmt="openai-chat")
    return [Loaded(r.thread, r.created) for r in results]
