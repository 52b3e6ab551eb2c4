"""Redaction of one event's content (docs/event-log.md, "Redaction"): the one change the log allows
to a stored event, made by an admin with a reason, under the thread's lock, in one transaction
with its chained record, its audit entry and the scrubbing of the stores beside the event
(threads.services.content_scrub).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connections, router, transaction
from django.db.models import F
from django.utils import timezone

from threads.access import require_role
from threads.database.guard import redaction_opened
from threads.database.search_index import fts_purge
from threads.domain import chain
from threads.domain.canonical import format_time
from threads.domain.errors import Conflict, NotFound, PermissionDenied
from threads.domain.redaction import (
    MAX_REASON,
    REDACTED,
    UNREDACTABLE_KINDS,
    RecordFields,
    needles,
    placeholder_data,
    placeholder_text,
    record_genesis,
    record_hash,
    remains_digest,
)
from threads.domain.secrets import event_secret_values
from threads.keys.chain import thread_genesis, thread_key
from threads.models import (
    ApprovalRequest,
    ApprovalStatus,
    Event,
    EventKind,
    Redaction,
    Role,
    Thread,
)
from threads.selectors.events import event_dict
from threads.selectors.redactions import last_redaction
from threads.services.audit import audit_record, required_text_clean
from threads.services.content_scrub import content_scrub
from threads.services.event_tokens import event_token_count
from threads.services.events import server_event_append
from threads.services.threads import thread_lock

# Who may redact: people with the admin role (docs/access.md, "People and access"); agents'
# keys may not.
REDACTION_ROLE = Role.ADMIN


class AlreadyRedacted(Conflict):
    code = "already_redacted"


class NothingToRedact(Conflict):
    """A retraction or a reset: a marker holds no content."""

    code = "nothing_to_redact"


class RedactionRefused(Conflict):
    """The stored event no longer matches its chain: a redaction must not vouch for it."""

    code = "redaction_refused"


def redaction_reason_clean(reason: Any) -> str:
    return required_text_clean(
        reason if isinstance(reason, str) else "",
        field="reason",
        limit=MAX_REASON,
        missing="a reason is required",
        hint=f"must be at most {MAX_REASON} characters",
    )


def redaction_require_role(*, actor: Any, thread: Thread) -> None:
    require_role(actor, thread.workspace, REDACTION_ROLE)


def event_redact(
    *, thread: Thread, seq: int, actor: Any, reason: str, extra_needles: Sequence[str] = ()
) -> Redaction:
    """Remove event `seq`'s content, keeping its seq, kind, time, ids, hash and digest. Admin
    only; a reason is required.

    Locks the thread row (select_for_update), checks the event still matches its chain (its
    content digest, or for a v1 event its hash), replaces its data by the kind's placeholder
    and its metadata by {}, drops its salt and secret flags, recounts its tokens, writes the
    chained Redaction record, scrubs the stores beside the event (content_scrub) and audits,
    all in one transaction (the caller's, when there is one). Raises NotFound,
    PermissionDenied, InvalidEvent (no reason), AlreadyRedacted, NothingToRedact,
    RedactionRefused.
    """
    redaction_require_role(actor=actor, thread=thread)
    reason = redaction_reason_clean(reason)
    with transaction.atomic():
        locked = thread_lock(thread)
        row = Event.objects.filter(thread=locked, seq=seq).first()
        if row is None:
            raise NotFound(f"no event at seq {seq}")
        return _redact_locked(locked, row, actor=actor, reason=reason, extra_needles=extra_needles)


def _redact_locked(
    thread: Thread,
    row: Event,
    *,
    actor: Any,
    reason: str,
    by: str = "",
    extra_needles: Sequence[str] = (),
) -> Redaction:
    seq = row.seq
    _require_redactable(row)
    key = thread_key(thread)
    previous_hash = (
        thread_genesis(thread.id, thread.chain_key_id)
        if seq == 1
        else Event.objects.filter(thread=thread, seq=seq - 1).values_list("hash", flat=True).get()
    )
    stored = event_dict(row)
    stored.pop("secrets", None)
    _require_intact(row, stored, previous_hash, key)
    user: Any = actor if isinstance(actor, AbstractBaseUser) else None
    by = by or (user.get_username() if user is not None else str(actor or "system"))
    at = timezone.now()
    data = placeholder_data(row.data, by=by, at=format_time(at), reason=reason)
    found = needles(row.data, row.metadata, [*_secret_values(row), *extra_needles])
    after = {**{k: v for k, v in stored.items() if k in ("seq", "kind", "created_at")}, **data}
    tokens = event_token_count(after, thread.encoding)
    connection = connections[router.db_for_write(Event)]
    with redaction_opened(connection, thread.pk, seq):
        Event.objects.filter(pk=row.pk).update(
            data=data, metadata={}, content_salt=None, secrets=None, token_count=tokens
        )
    fts_purge(connection)
    Thread.objects.filter(pk=thread.pk).update(
        token_total=F("token_total") - row.token_count + tokens,
        events_with_secrets=F("events_with_secrets") - (1 if row.secrets else 0),
        # A LangGraph saver's conditional restore reads the thread's updated_at among its
        # validators: a redaction is a change it must see.
        updated_at=at,
    )
    last = last_redaction(thread_id=thread.pk)
    fields = RecordFields(
        thread=str(thread.pk),
        number=(last.number if last is not None else 0) + 1,
        seq=seq,
        by=by,
        at=format_time(at),
        reason=reason,
        event_hash=row.hash,
        previous_hash=previous_hash,
        remains_digest=remains_digest(data, {}),
    )
    before = last.record_hash if last is not None else record_genesis(str(thread.pk), key)
    record = Redaction.objects.create(
        thread=thread,
        number=fields.number,
        seq=seq,
        by=user,
        by_label=by,
        at=at,
        reason=reason,
        event_hash=fields.event_hash,
        previous_hash=previous_hash,
        remains_digest=fields.remains_digest,
        record_hash=record_hash(before, fields, key),
    )
    scrubbed = content_scrub(
        thread=thread, seq=seq, needles=found, placeholder=placeholder_text({**data, "seq": seq})
    )
    audit_record(
        workspace=thread.workspace,
        actor=user,
        actor_label=by,
        action="event_redacted",
        target_type="event",
        target_id=f"{thread.pk}:{seq}",
        thread=thread,
        # Nothing of the content: the seq, the kind, why, and what the scrub touched.
        after={
            "seq": seq,
            "kind": row.kind,
            "reason": reason,
            "record_hash": record.record_hash,
            "scrubbed": scrubbed,
            "written_before_salted_digests": row.content_digest is None,
        },
    )
    # What the scrub touched, for a caller that reports it (erasure by subject); not stored.
    record.scrubbed = scrubbed  # type: ignore[attr-defined]
    return record


def _require_redactable(row: Event) -> None:
    if REDACTED in row.data:
        raise AlreadyRedacted(f"the event at seq {row.seq} is redacted already")
    if row.kind in UNREDACTABLE_KINDS:
        raise NothingToRedact(f"a {row.kind} holds no content to redact")


def _require_intact(row: Event, stored: dict[str, Any], previous_hash: str, key: Any) -> None:
    """A redaction vouches for the event it removes: its content must still be what the chain
    committed to (v2: the digest; v1: the link from the previous hash)."""
    if row.content_digest is not None:
        ok = row.content_salt is not None and hmac.compare_digest(
            chain.event_digest({**stored, "content_salt": row.content_salt}), row.content_digest
        )
    else:
        ok = hmac.compare_digest(
            chain.link_hash(previous_hash, chain.event_canonical(stored), key), row.hash
        )
    if not ok:
        raise RedactionRefused(
            f"the event at seq {row.seq} does not match its chain: verify the thread first"
        )


def _secret_values(row: Event) -> list[str]:
    """The secrets detect-secrets finds in the event: looked for elsewhere, never stored."""
    fields: dict[str, Any] = {**row.data, "metadata": row.metadata}
    return event_secret_values(fields)


# The approval request's action when the workspace requires a second admin.
REDACTION_ACTION = "ctxadmin.redact"


class RedactionPending(Conflict):
    code = "redaction_pending"


class SecondAdminRequired(PermissionDenied):
    code = "second_admin_required"


def event_redact_request(
    *, thread: Thread, seq: int, actor: Any, reason: str
) -> ApprovalRequest | None:
    """The API's and the dashboard's redaction. Redacts at once and answers None; where the
    workspace requires a second admin (`redaction_needs_second_admin`), asks for it instead
    and answers the approval request (docs/event-log.md, "Redaction"): an `approval_request`
    event of action REDACTION_ACTION in the log, decided in the approval queue, where only
    another admin's approval redacts (redaction_approved_locked)."""
    if not thread.workspace.redaction_needs_second_admin:
        event_redact(thread=thread, seq=seq, actor=actor, reason=reason)
        return None
    redaction_require_role(actor=actor, thread=thread)
    reason = redaction_reason_clean(reason)
    with transaction.atomic():
        locked = thread_lock(thread)
        row = Event.objects.filter(thread=locked, seq=seq).first()
        if row is None:
            raise NotFound(f"no event at seq {seq}")
        _require_redactable(row)
        pending = ApprovalRequest.objects.filter(
            thread=locked,
            action=REDACTION_ACTION,
            status=ApprovalStatus.PENDING,
            arguments__seq=seq,
        )
        if pending.exists():
            raise RedactionPending(f"a redaction of seq {seq} is waiting for a second admin")
        by = actor.get_username()
        request = server_event_append(
            thread=locked,
            kind=EventKind.APPROVAL_REQUEST,
            data={
                "action": REDACTION_ACTION,
                "arguments": {"seq": seq, "reason": reason, "requested_by": by},
            },
        )
        approval = ApprovalRequest.objects.get(request_event=request)
        # Who asked, for the rule that another admin approves: kept beside the request.
        ApprovalRequest.objects.filter(pk=approval.pk).update(
            arguments={**approval.arguments, "requested_by_id": actor.pk}
        )
        approval.refresh_from_db()
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            action="event_redaction_requested",
            target_type="event",
            target_id=f"{locked.pk}:{seq}",
            thread=locked,
            after={"seq": seq, "reason": reason, "approval_id": approval.pk},
        )
    return approval


def redaction_approval_require(*, approval: ApprovalRequest, actor: Any, decision: str) -> None:
    """Deciding a redaction's approval needs the admin role; approving it, another admin than
    the one who asked."""
    require_role(actor, approval.thread.workspace, REDACTION_ROLE)
    if decision == "approve" and approval.arguments.get("requested_by_id") == actor.pk:
        raise SecondAdminRequired("a second admin, not the one who asked, approves a redaction")


def redaction_approved_locked(*, thread: Thread, approval: ApprovalRequest, actor: Any) -> None:
    """Carry out an approved redaction, in the decision's transaction (the thread locked)."""
    arguments = approval.arguments
    row = Event.objects.filter(thread=thread, seq=arguments["seq"]).first()
    if row is None:
        raise NotFound(f"no event at seq {arguments['seq']}")
    by = f"{arguments.get('requested_by', '')}, approved by {actor.get_username()}"
    _redact_locked(thread, row, actor=actor, reason=str(arguments["reason"]), by=by[:200])
