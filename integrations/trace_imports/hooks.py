"""How trace imports take part in the core's work: what `AppConfig.ready()` registers with
the core's hooks.

- A redaction removes the event's content from the uploads that imported it too
  (threads.services.content_scrub.content_scrubbers).

- Retention scrubs a deleted thread from the imports' reports, and empties an upload once none
  of its conversations' threads is left (threads.services.retention.thread_deleters).
"""

from __future__ import annotations

from integrations.trace_imports.services.content_scrub import trace_imports_content_scrub
from integrations.trace_imports.services.retention import (
    trace_imports_retention_rows,
    trace_imports_retention_thread_delete,
)
from threads.services.content_scrub import content_scrubbers
from threads.services.retention import ThreadDeleter, thread_deleters


def register() -> None:
    """Register with the core's hooks, once however often it is called."""
    if trace_imports_content_scrub not in content_scrubbers:
        content_scrubbers.append(trace_imports_content_scrub)
    deleter = ThreadDeleter(
        name="trace_imports",
        rows=trace_imports_retention_rows,
        delete=trace_imports_retention_thread_delete,
    )
    if deleter not in thread_deleters:
        thread_deleters.append(deleter)
