"""Trace imports' part in retention (docs/operations.md, "Retention"), registered with the
core's `threads.services.retention.thread_deleters`: an import's report keeps a line per
conversation, naming the thread it went into and its external id. When retention deletes that
thread, the line keeps its outcome and counts and loses the thread and the external id; once no
line of an import names a thread that is still there, the uploaded file (which holds the
conversations' content) goes too: `content` is emptied, its size and SHA-256 stay.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connections, router
from django.db.models import QuerySet

from integrations.trace_imports.models import TraceImport
from threads.models import Thread

DELETED = "deleted by retention"


def trace_imports_retention_rows(thread_ids: Sequence[uuid.UUID]) -> list[QuerySet[Any]]:
    """Nothing here is deleted as a row (a report line is scrubbed, an upload emptied)."""
    return []


def trace_imports_retention_thread_delete(thread: Thread) -> dict[str, int]:
    """Scrub the report lines naming the thread; empty the uploads none of whose lines name a
    thread still there. Runs in the retention's transaction. Answers the uploads emptied."""
    key = str(thread.pk)
    emptied = 0
    imports = TraceImport.objects.filter(workspace_id=thread.workspace_id).only("id", "report")
    if connections[router.db_for_write(TraceImport)].vendor == "postgresql":
        # jsonb containment, served by the table alone: only the imports naming the thread.
        imports = imports.filter(report__contains=[{"thread": key}])
    for trace_import in imports:
        report = trace_import.report or []
        if not any(isinstance(line, dict) and line.get("thread") == key for line in report):
            continue
        for line in report:
            if isinstance(line, dict) and line.get("thread") == key:
                line.update(thread=None, external_id="", reason=DELETED)
        named = {line.get("thread") for line in report if isinstance(line, dict)} - {None}
        fields: dict[str, Any] = {"report": report}
        if not Thread.objects.filter(pk__in=list(named)).exclude(pk=thread.pk).exists():
            fields["content"] = b""
            emptied += 1
        TraceImport.objects.filter(pk=trace_import.pk).update(**fields)
    return {f"{TraceImport._meta.db_table} (uploads emptied)": emptied}
