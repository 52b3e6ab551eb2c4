"""Secrets found in new events at ingest (docs/event-log.md, "Secrets at ingest"): the flags of a
batch's events, from one scan of the whole batch (threads.domain.secrets), or none when
CTXADMIN_DETECT_SECRETS is off.

The flags name a plugin's secret type and a field, never the secret: nothing here logs, counts
or stores the text it scans.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from django.conf import settings

from threads.domain.canonical import canonical_text, join_canonical
from threads.domain.events import NewEvent
from threads.domain.secret_masking import masked_value
from threads.domain.secrets import Flag, event_secrets
from threads.models import Workspace


def event_secret_flags(new_events: Sequence[NewEvent]) -> list[list[Flag]] | None:
    """Each event's flags in order ([] for an event without a secret); None when detection
    is off."""
    if not settings.CTXADMIN_DETECT_SECRETS or not new_events:
        return None
    return event_secrets([(_fields(new), _text(new)) for new in new_events])


def workspace_removes_secrets(workspace_id: int) -> bool:
    """Whether the workspace stores its events with their secrets taken out
    (`redact_secrets_at_ingest`): read only for a batch that holds one."""
    return bool(
        Workspace.objects.filter(pk=workspace_id)
        .values_list("redact_secrets_at_ingest", flat=True)
        .first()
    )


def secrets_removed(
    new_events: Sequence[NewEvent], flags: list[list[Flag]]
) -> tuple[list[NewEvent], list[list[Flag]]]:
    """The events as they are stored where the workspace redacts secrets at ingest: each
    flagged one with its secrets replaced by placeholders (threads.domain.secret_masking) and
    its flags marked `removed`; the others as they came. The digest of the submitted body stays
    the request's: a retry of the same request is still recognised as the same event."""
    events: list[NewEvent] = []
    marked: list[list[Flag]] = []
    for new, found in zip(new_events, flags, strict=True):
        if not found:
            events.append(new)
            marked.append(found)
            continue
        events.append(
            dataclasses.replace(
                new,
                data=masked_value(new.data),
                metadata=masked_value(new.metadata),
                data_texts=None,
                data_text=None,
                metadata_text=None,
            )
        )
        marked.append([{**flag, "removed": True} for flag in found])
    return events, marked


def _fields(new: NewEvent) -> dict[str, Any]:
    """Where a flag's field starts: the kind's fields, then `metadata` and `client_event_id`."""
    fields: dict[str, Any] = {**new.data, "metadata": new.metadata}
    if new.client_event_id is not None:
        fields["client_event_id"] = new.client_event_id
    return fields


def _text(new: NewEvent) -> str:
    """The event's strings as JSON writes them: the canonical texts normalize_event encoded.
    An event that came without them (one ctxadmin writes, a fork's copy) gets them here, kept on
    it for the append, which would encode them next."""
    if new.data_text is None:
        if new.data_texts is None or new.metadata_text is None:
            new.data_texts, new.metadata_text = new.texts()
        new.data_text = join_canonical(new.data_texts)
    metadata = new.metadata_text if new.metadata_text is not None else canonical_text(new.metadata)
    return f"{new.data_text}\n{metadata}\n{new.client_event_id or ''}"
