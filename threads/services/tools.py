"""A thread's tool definitions: replaced whole, atomically (docs/pipeline.md,
"Tool definitions and repeated content", docs/api.md,
"Tool definitions — `PUT` and `GET /api/v1/threads/{id}/tools/`")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction

from threads.domain.tools import tool_definitions
from threads.models import Thread, ThreadTool
from threads.services.audit import audit_record


@dataclass
class ToolsSet:
    tools: list[ThreadTool]  # the thread's set after the call, in the order sent
    changed: bool  # False when the set was already exactly this one


def _audit_form(names: list[str], tokens: int) -> dict[str, Any]:
    return {"tools": names, "token_total": tokens}


def thread_tools_set(
    *,
    thread: Thread,
    tools: Any,
    actor: AbstractBaseUser | AnonymousUser | None = None,
    actor_label: str = "",
) -> ToolsSet:
    """Replace the thread's tool definitions with `tools` (a list in the providers' shapes;
    anything else is InvalidTools).

    Validates and counts tokens before taking any lock (InvalidTools or PayloadTooLarge name
    the bad `tools[i]`). Then locks the thread row (select_for_update), and when the set
    differs from the stored one — names, definitions or order — deletes the old rows, writes
    the new ones and the thread's `tool_tokens`, and audits the change with the names and
    token totals before and after. The same list again changes nothing and audits nothing.
    """
    definitions = tool_definitions(
        tools, encoding=thread.encoding, max_bytes=settings.CTXADMIN_MAX_EVENT_BYTES
    )
    total = sum(d.token_count for d in definitions)
    with transaction.atomic(durable=True):
        # of=self: lock the thread row only, never the joined workspace row.
        locked = (
            Thread.objects.select_for_update(of=("self",))
            .select_related("workspace")
            .get(pk=thread.pk)
        )
        stored = list(ThreadTool.objects.filter(thread=locked).order_by("position"))
        if [(t.name, t.content_hash) for t in stored] == [
            (d.name, d.content_hash) for d in definitions
        ]:
            return ToolsSet(tools=stored, changed=False)
        ThreadTool.objects.filter(thread=locked).delete()
        rows = ThreadTool.objects.bulk_create(
            ThreadTool(
                thread=locked,
                position=d.position,
                name=d.name,
                definition=d.definition,
                token_count=d.token_count,
                content_hash=d.content_hash,
            )
            for d in definitions
        )
        Thread.objects.filter(pk=locked.pk).update(tool_tokens=total)
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            actor_label=actor_label,
            action="thread.tools_set",
            target_type="thread",
            target_id=locked.pk,
            thread=locked,
            before=_audit_form([t.name for t in stored], locked.tool_tokens),
            after=_audit_form([d.name for d in definitions], total),
        )
    thread.tool_tokens = total
    return ToolsSet(tools=rows, changed=True)
