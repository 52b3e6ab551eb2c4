"""Resolving side effects whose outcome is unknown (docs/repairs.md, "Side effects and approvals").

Side-effect truth belongs to the tool's own system. A person records the outcome with evidence,
or a per-tool status check asks that system; either way the outcome is a
`side_effect_resolution` event appended to the thread's log, and the SideEffect row (a query
aid derived from the log) follows it.

A side effect resolved as `failed` is never retried from here: an agent that wants to retry it
posts an `approval_request` (with `tool_name` and the arguments it would use), a reviewer
decides it, and the agent reads the decision back before calling the tool again.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from threads.access import require_role
from threads.domain.canonical import canonical_json
from threads.domain.errors import Conflict, InvalidEvent
from threads.models import (
    Event,
    EventKind,
    Role,
    SideEffect,
    SideEffectStatus,
    TaskRun,
    ToolStatusCheck,
)
from threads.services.audit import audit_record, required_text_clean
from threads.services.enqueue import SIDE_EFFECT_STATUS_CHECK, task_run_enqueue
from threads.services.events import announce_after_commit, server_event_append
from threads.services.run_status import agent_owed_locked
from threads.services.tasks import task_run_tracked
from threads.services.threads import thread_lock

RESOLUTION_STATUSES = ("succeeded", "failed", "cancelled")
# Outcomes a person or a check may still settle: no result yet, or a timeout.
RESOLVABLE = (SideEffectStatus.RUNNING, SideEffectStatus.UNKNOWN)
MAX_EVIDENCE = 10_000
STATUS_CHECK_ACTOR = "status-check"
STATUS_CHECK_TIMEOUT = 10  # seconds
STATUS_CHECK_MAX_BYTES = 64 * 1024


class AlreadyResolved(Conflict):
    code = "already_resolved"


class NoStatusCheck(Conflict):
    code = "no_status_check"


def side_effect_resolve(
    *,
    side_effect: SideEffect,
    actor: AbstractBaseUser | None,
    status: str,
    evidence: str,
    actor_label: str = "",
) -> Event:
    """Record the outcome of a running or unknown side effect as a side_effect_resolution event.

    `actor` is the person (operator or higher); None means ctxadmin itself (a status check),
    named by `actor_label`. Locks the thread row (select_for_update) before appending; the
    status moves by a conditional UPDATE, so of two concurrent resolutions exactly one wins
    and the other raises AlreadyResolved (409).
    """
    if status not in RESOLUTION_STATUSES:
        raise InvalidEvent(
            "invalid resolution",
            fields={"status": f"must be one of {', '.join(RESOLUTION_STATUSES)}"},
        )
    evidence = required_text_clean(
        evidence,
        field="evidence",
        limit=MAX_EVIDENCE,
        missing="evidence is required",
        hint=f"at most {MAX_EVIDENCE} characters",
    )
    thread = side_effect.thread
    if actor is not None:
        require_role(actor, thread.workspace, Role.OPERATOR)
        label = actor.get_username()
    else:
        label = actor_label or STATUS_CHECK_ACTOR
    with transaction.atomic(durable=True):
        locked = thread_lock(thread)
        current = SideEffect.objects.get(pk=side_effect.pk)
        moved = SideEffect.objects.filter(pk=side_effect.pk, status__in=RESOLVABLE).update(
            status=status
        )
        if not moved:
            raise AlreadyResolved(
                f"side effect {side_effect.pk} is already {current.status}; only running or "
                "unknown side effects can be resolved",
                fields={"status": current.status},
            )
        # The agent held at the call owes a pickup of its outcome (run status).
        agent_owed_locked(locked, now=timezone.now())
        event = server_event_append(
            thread=locked,
            kind=EventKind.SIDE_EFFECT_RESOLUTION,
            data={
                "tool_call_id": current.tool_call_id,
                "call_seq": current.call_seq,
                "side_effect_id": current.pk,
                "status": status,
                "evidence": evidence,
                "actor": label,
            },
        )
        announce_after_commit(locked.pk, [event])
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            actor_label=label,
            action="side_effect.resolve",
            target_type="side_effect",
            target_id=current.pk,
            thread=locked,
            before={"status": current.status},
            after={"status": status, "evidence": evidence, "seq": event.seq},
        )
    side_effect.status = status
    return event


def side_effect_check_request(*, side_effect: SideEffect, actor: AbstractBaseUser) -> TaskRun:
    """Enqueue the tool's status check for a running or unknown side effect (operator+)."""
    thread = side_effect.thread
    require_role(actor, thread.workspace, Role.OPERATOR)
    if side_effect.status not in RESOLVABLE:
        raise AlreadyResolved(
            f"side effect {side_effect.pk} is already {side_effect.status}",
            fields={"status": side_effect.status},
        )
    if not ToolStatusCheck.objects.filter(
        workspace_id=thread.workspace_id, tool_name=side_effect.tool_name
    ).exists():
        raise NoStatusCheck(
            f"no status check is configured for tool {side_effect.tool_name!r}",
            fields={"tool_name": side_effect.tool_name},
        )
    side_effect_id = side_effect.pk
    with transaction.atomic(durable=True):
        run = task_run_enqueue(
            workspace=thread.workspace,
            thread=thread,
            kind="side_effect_status_check",
            task_name=SIDE_EFFECT_STATUS_CHECK,
            args=(side_effect_id,),
        )
        audit_record(
            workspace=thread.workspace,
            actor=actor,
            action="side_effect.check",
            target_type="side_effect",
            target_id=side_effect_id,
            thread=thread,
            after={"task_id": run.id},
        )
    return run


def _ask(url: str) -> Any:
    """GET the tool's status URL; the JSON it answers, or raise ValueError/OSError."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        # urllib would read file:// and other schemes too; a status check is HTTP only.
        raise ValueError(f"status check URLs must be http or https, not {url!r}")
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=STATUS_CHECK_TIMEOUT) as response:  # noqa: S310
        body = response.read(STATUS_CHECK_MAX_BYTES + 1)
    if len(body) > STATUS_CHECK_MAX_BYTES:
        raise ValueError(f"the answer is larger than {STATUS_CHECK_MAX_BYTES} bytes")
    return json.loads(body.decode("utf-8"))


def side_effect_status_check(*, side_effect_id: int, task_id: str | None = None) -> dict[str, Any]:
    """Ask the tool's own system whether a side effect happened and, when the answer is
    conclusive, append its resolution with the answer as evidence (actor "status-check").

    Idempotent: a side effect that is no longer running or unknown is left alone. The HTTP
    call happens outside any transaction; only the resolution takes the thread's lock.
    With `task_id`, the task run of that id follows the check.
    """
    return task_run_tracked(task_id, lambda: _status_check(side_effect_id))


def _status_check(side_effect_id: int) -> dict[str, Any]:
    effect = (
        SideEffect.objects.select_related("thread", "thread__workspace")
        .filter(pk=side_effect_id)
        .first()
    )
    if effect is None:
        return {"resolved": False, "error": f"side effect {side_effect_id} does not exist"}
    base = {"side_effect": effect.pk, "resolved": False}
    if effect.status not in RESOLVABLE:
        return {**base, "status": effect.status, "detail": "already resolved"}
    check = ToolStatusCheck.objects.filter(
        workspace_id=effect.thread.workspace_id, tool_name=effect.tool_name
    ).first()
    if check is None:
        return {**base, "error": f"no status check is configured for {effect.tool_name!r}"}
    url = check.url_template.replace(
        "{idempotency_key}", urllib.parse.quote(effect.idempotency_key, safe="")
    )
    try:
        answer = _ask(url)
    except (OSError, ValueError) as exc:  # URLError, HTTPError and timeouts are OSErrors
        return {**base, "error": f"status check failed: {exc}"}
    status = answer.get("status") if isinstance(answer, dict) else None
    if status == "unknown":
        return {**base, "status": "unknown", "detail": "the tool does not know yet"}
    if status not in RESOLUTION_STATUSES:
        return {**base, "error": f"inconclusive answer: {canonical_json(answer)[:500]!r}"}
    evidence = f"GET {url} answered {canonical_json(answer).decode('utf-8')}"[:MAX_EVIDENCE]
    try:
        event = side_effect_resolve(
            side_effect=effect,
            actor=None,
            actor_label=STATUS_CHECK_ACTOR,
            status=status,
            evidence=evidence,
        )
    except AlreadyResolved as exc:
        return {**base, "detail": exc.message}
    return {**base, "resolved": True, "status": status, "seq": event.seq}
