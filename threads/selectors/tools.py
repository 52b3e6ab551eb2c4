"""Reads for a thread's tool definitions and for the content its events repeat
(docs/pipeline.md, "Tool definitions and repeated content")."""

from __future__ import annotations

from django.db.models import QuerySet

from threads.domain.repeats import CONTENT_KINDS, Repeat, find_repeats
from threads.models import Event, Thread, ThreadTool

# How far back repeated content is looked for: the last this many events of the log.
REPEAT_WINDOW = 2000


def thread_tools(*, thread: Thread, definitions: bool = True) -> QuerySet[ThreadTool]:
    """The thread's tool definitions in the order they were sent (without the definitions'
    JSON when `definitions` is False: a page that lists names and costs)."""
    tools = ThreadTool.objects.filter(thread=thread).order_by("position")
    return tools if definitions else tools.defer("definition")


def content_repeats(*, thread: Thread, window: int = REPEAT_WINDOW) -> list[Repeat]:
    """Events among the thread's last `window` whose content repeats an earlier one's in that
    window byte for byte (threads.domain.repeats), most wasteful first. One query, read in
    chunks: only a hash per distinct content is kept, whatever the events' sizes."""
    rows = (
        Event.objects.filter(
            thread=thread, seq__gt=max(thread.last_seq - window, 0), kind__in=CONTENT_KINDS
        )
        .order_by("seq")
        .values_list("seq", "kind", "data", "token_count")
        .iterator(chunk_size=500)
    )
    return find_repeats(rows)
