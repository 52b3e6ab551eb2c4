"""The seeded world the access tests call every route against: workspace acme with one of
everything a URL can name, the people of each role, its agent; workspace globex with its own
admin and agent, who must find none of acme's objects."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from integrations.langgraph_checkpointer.services.checkpoint_put import langgraph_checkpoint_put
from integrations.trace_imports.models import TraceImport
from integrations.trace_imports.services.uploads import import_start
from tests import factories as f
from tests.views.conftest import build_story
from threads.models import (
    ApiKey,
    ApprovalRequest,
    Checkpoint,
    SideEffect,
    TaskRun,
    Thread,
    Workspace,
)
from threads.services.retention_preview import RETENTION_PREVIEW_KIND
from threads.services.subject_erasure import SUBJECT_ERASURE_KIND
from threads.services.tasks import task_run_start

PRINCIPALS = ("anonymous", "agent", "operator", "reviewer", "admin", "other_admin", "other_agent")
FOREIGN = ("other_admin", "other_agent")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def routes() -> list[tuple[str, str]]:
    """Every route of the URL resolver as (pattern, name), includes walked recursively."""

    def walk(patterns: Any, prefix: str) -> Iterator[tuple[str, str]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern), pattern.name or ""

    return list(walk(get_resolver().url_patterns, ""))


@contextlib.contextmanager
def rolled_back() -> Iterator[None]:
    """A savepoint rolled back at the end, marked as a test's own block so that services'
    durable transactions may open inside it (as inside a TestCase)."""
    atomic = transaction.atomic()
    atomic._from_testcase = True  # type: ignore[attr-defined]
    with atomic:
        yield
        transaction.set_rollback(True)


@dataclass
class World:
    workspace: Workspace
    other: Workspace
    thread: Thread
    langgraph_thread: Thread
    checkpoint: Checkpoint
    langgraph_checkpoint: LanggraphCheckpoint
    side_effect: SideEffect
    approval: ApprovalRequest
    task: TaskRun
    erasure: TaskRun
    dry_run: TaskRun
    trace_import: TraceImport
    key: ApiKey
    clients: dict[str, Client]

    def fill(self, route: str) -> str:
        """A path for the route with real objects of acme in its parameters."""
        if route == "^api/":
            return "/api/no-such-route/"
        values = {
            ("threads", "id"): str(self.thread.pk),
            ("events", "seq"): "1",
            ("summaries", "version"): "1",
            ("checkpoints", "checkpoint"): str(self.checkpoint.pk),
            ("checkpoints", "checkpoint_id"): str(self.checkpoint.pk),
            ("tasks", "task_id"): self.task.pk,
            ("erasures", "task_id"): self.erasure.pk,
            ("dry-runs", "task_id"): self.dry_run.pk,
            ("side-effects", "pk"): str(self.side_effect.pk),
            ("side-effects", "id"): str(self.side_effect.pk),
            ("approvals", "pk"): str(self.approval.pk),
            ("approvals", "id"): str(self.approval.pk),
            ("imports", "id"): str(self.trace_import.pk),
            ("keys", "pk"): str(self.key.pk),
        }
        langgraph = "/langgraph/" in route
        if langgraph:
            values[("threads", "id")] = self.langgraph_thread.external_id
            values[("checkpoints", "checkpoint_id")] = self.langgraph_checkpoint.checkpoint_id

        def one(match: re.Match[str]) -> str:
            segment, name = match.group(1), match.group(2)
            value = values.get((segment, name))
            assert value is not None, f"tests/access/world.py: fill <{name}> after {segment}/"
            return f"{segment}/{value}"

        return "/" + re.sub(r"([\w-]+)/<\w+:(\w+)>", one, route)

    def placeholders(self) -> dict[str, Any]:
        # Numbers as numbers: a JSON body's integer field takes no string (a form's are text).
        return {
            "{workspace}": self.workspace.pk,
            "{workspace_name}": self.workspace.name,
            "{checkpoint}": self.checkpoint.pk,
        }


def _client(user: Any = None, key: str = "") -> Client:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    client = Client(raise_request_exception=False, headers=headers)
    if user is not None:
        client.force_login(user)
    return client


def seed() -> World:
    acme, acme_key = f.make_workspace("acme")
    globex, globex_key = f.make_workspace("globex")
    # Agents may import into both (an admin's switch; off by default): the matrix checks who
    # reaches the import, not the switch (tests/api/test_import_limits.py does).
    Workspace.objects.filter(pk__in=[acme.pk, globex.pk]).update(agents_may_import=True)
    thread = build_story(f.make_thread(acme, external_id="order-10086", title="Refund"))
    langgraph_checkpoint = langgraph_checkpoint_put(
        workspace=acme,
        external_id="lg-thread",
        checkpoint_ns="",
        checkpoint_id="1ef-matrix",
        parent_checkpoint_id="",
        checkpoint={"v": 4, "id": "1ef-matrix", "channel_versions": {}},
        metadata={"source": "loop", "step": 0},
    )
    people = {
        role: f.make_person(acme, f"{role}-m", role) for role in ("operator", "reviewer", "admin")
    }
    stranger = f.make_person(globex, "stranger-m", "admin")
    clients = {
        "anonymous": _client(),
        "agent": _client(key=acme_key),
        **{role: _client(user) for role, user in people.items()},
        "other_admin": _client(stranger),
        "other_agent": _client(key=globex_key),
    }
    trace_import = import_start(
        workspace=acme, actor=people["admin"], fmt="jsonl", file_name="m.jsonl", content=b""
    )
    return World(
        workspace=acme,
        other=globex,
        thread=thread,
        langgraph_thread=Thread.objects.get(workspace=acme, external_id="lg-thread"),
        checkpoint=Checkpoint.objects.filter(thread=thread).order_by("cursor").first(),  # type: ignore[arg-type]
        langgraph_checkpoint=langgraph_checkpoint,
        side_effect=SideEffect.objects.get(thread=thread),
        approval=ApprovalRequest.objects.get(thread=thread),
        task=task_run_start(workspace=acme, thread=thread, kind="fold", send=lambda _id: None),
        erasure=task_run_start(workspace=acme, kind=SUBJECT_ERASURE_KIND, send=lambda _id: None),
        dry_run=task_run_start(workspace=acme, kind=RETENTION_PREVIEW_KIND, send=lambda _id: None),
        trace_import=trace_import,
        key=ApiKey.objects.get(workspace=acme),
        clients=clients,
    )
