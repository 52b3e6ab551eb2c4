"""bench/scale.py writes its millions of events without the API; these tests hold that what it
writes is what the append would have stored, so that the scale figures are ctxadmin's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import factories
from threads.models import Event, SideEffect, SideEffectStatus, Thread
from threads.services.integrity import integrity_check

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import scale  # noqa: E402
from pages import long_unit  # noqa: E402

pytestmark = pytest.mark.django_db

# Every column the append derives from the body; hash and created_at also depend on the
# thread and the moment, and are held by the chain check instead.
COLUMNS = (
    "seq",
    "kind",
    "metadata",
    "data",
    "role",
    "tool_call_id",
    "request_digest",
    "token_count",
)


def test_built_threads_verify_and_keep_their_heads(workspace: Any) -> None:
    builder = scale.Builder(workspace, long_events=300)
    builder.grow(2500)

    threads = list(Thread.objects.filter(workspace=workspace))
    assert len(threads) == builder.threads + 1 >= 2
    assert sum(t.last_seq for t in threads if t.pk != builder.long.pk) == builder.events == 2500
    for thread in threads:
        events = Event.objects.filter(thread=thread)
        assert events.count() == thread.last_seq
        assert sum(events.values_list("token_count", flat=True)) == thread.token_total > 0
        assert integrity_check(thread=thread, full=True).ok, thread.external_id
    # Every side-effecting call has its side effect, bound to its result; timeouts unknown.
    events = Event.objects.filter(thread__workspace=workspace)
    calls = events.filter(kind="tool_call", data__side_effect=True)
    effects = SideEffect.objects.filter(thread__workspace=workspace)
    assert effects.count() == calls.count() > 0
    assert effects.filter(result_seq__isnull=True).count() == 0
    timeouts = events.filter(kind="tool_result", data__status="timeout").count()
    assert effects.filter(status=SideEffectStatus.UNKNOWN).count() == timeouts > 0


def test_rows_equal_what_the_api_stores(workspace: Any, agent: Any) -> None:
    built = scale.new_thread(workspace.pk, "built")
    scale.flush([scale.thread_writes(built, 120, 0)])
    bodies = [event for unit in range(30) for event in long_unit(unit)]
    posted = factories.make_thread(workspace, "posted")
    response = agent.post(
        f"/api/v1/threads/{posted.pk}/events/",
        data=json.dumps({"events": bodies}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content

    def rows(thread: Any) -> list[tuple[Any, ...]]:
        return list(Event.objects.filter(thread=thread).order_by("seq").values_list(*COLUMNS))

    assert rows(built) == rows(posted)
    assert len(rows(built)) == 120
    posted.refresh_from_db()
    built.refresh_from_db()
    assert (built.last_seq, built.token_total) == (posted.last_seq, posted.token_total)
    assert integrity_check(thread=built, full=True).ok
