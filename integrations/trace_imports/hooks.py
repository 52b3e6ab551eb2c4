"""How trace imports take part in the core's repairs: what `AppConfig.ready()` registers with
the core's hooks.

- A redaction removes the event's content from the uploads that imported it too
  (threads.services.content_scrub.content_scrubbers).
"""

from __future__ import annotations

from integrations.trace_imports.services.content_scrub import trace_imports_content_scrub
from threads.services.content_scrub import content_scrubbers


def register() -> None:
    """Register with the core's hooks, once however often it is called."""
    if trace_imports_content_scrub not in content_scrubbers:
        content_scrubbers.append(trace_imports_content_scrub)
