"""Trace imports' part of a redaction (docs/repairs.md, "Redaction beside the event"): an
uploaded file keeps the conversations it imported, byte for byte, so a redacted event's content
is in the upload of every import that wrote to the thread.

Registered into threads.services.content_scrub.content_scrubbers by the app's `ready()`, and run
in the redaction's transaction. An upload is text (JSON or JSONL, gzipped or not: the formats an
upload may have): each needle, as it is and as JSON spells it inside a string, is replaced by the
placeholder spelt the same way, so the file stays one the importer reads, and its size and
SHA-256 are those of the new bytes. The import's report and error lose the needles too.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from integrations.trace_imports.models import TraceImport
from integrations.trace_imports.readers.common import GZIP_MAGIC
from threads.domain.scrub import Needles, scrub_json
from threads.models import Thread


def _spellings(text: str) -> list[str]:
    """A text as a file may hold it: as it is, and inside a JSON string (escaped, with and
    without non-ASCII escapes)."""
    return [text, json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]]


def upload_scrub(data: bytes, needles: Sequence[str], placeholder: str) -> bytes | None:
    """The upload's bytes without the needles (gzipped again when they were), or None when it
    holds none or is not UTF-8 text."""
    packed = data[:2] == GZIP_MAGIC
    try:
        text = (gzip.decompress(data) if packed else data).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError):
        return None
    new = text
    for needle in needles:  # longest first: the whole text before its parts
        for spelled, spelled_placeholder in zip(
            _spellings(needle), _spellings(placeholder), strict=True
        ):
            new = new.replace(spelled, spelled_placeholder)
    if new == text:
        return None
    encoded = new.encode("utf-8")
    return gzip.compress(encoded, mtime=0) if packed else encoded


def _imported_into(trace_import: TraceImport, thread: Thread) -> bool:
    return any(
        isinstance(line, dict) and line.get("thread") == str(thread.pk)
        for line in trace_import.report or []
    )


def trace_imports_content_scrub(
    *, thread: Thread, seq: int, needles: Sequence[str], placeholder: str
) -> dict[str, int]:
    """Remove the needles from the uploads (and reports) of the workspace's imports that wrote
    to the thread; answers {"trace_imports": rows changed}."""
    found = Needles(needles, placeholder)
    if not found:
        return {"trace_imports": 0}
    changed = 0
    for trace_import in TraceImport.objects.filter(workspace_id=thread.workspace_id).order_by(
        "created_at"
    ):
        if not _imported_into(trace_import, thread):
            continue
        updates: dict[str, Any] = {}
        content = upload_scrub(bytes(trace_import.content), found.texts, placeholder)
        if content is not None:
            updates.update(
                content=content, size=len(content), sha256=hashlib.sha256(content).hexdigest()
            )
        report = scrub_json(trace_import.report, found)
        if report is not trace_import.report:
            updates["report"] = report
        error = found.sub(trace_import.error)
        if error != trace_import.error:
            updates["error"] = error
        if updates:
            TraceImport.objects.filter(pk=trace_import.pk).update(**updates)
            changed += 1
    return {"trace_imports": changed}
