"""The timeline finds the retractions after its page by their partial index (docs/scale.md,
"What one database holds"), not by reading the rest of the thread's log."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests import factories as f
from tests.views.test_thread_list_indexes import plan
from threads.models import Thread
from threads.selectors.events import retractions_by_target

pytestmark = pytest.mark.django_db


def test_retractions_after_a_page_are_read_off_their_index(thread: Thread) -> None:
    f.append(thread, *[f.user(f"message {n}") for n in range(40)])
    f.append(thread, {"kind": "retraction", "retracts": 3}, {"kind": "retraction", "retracts": 30})
    with CaptureQueriesContext(connection) as seen:
        found = retractions_by_target(thread=thread, targets={3, 4, 30})
    assert found == {3: 41, 30: 42}
    used: Any = plan(seen.captured_queries[-1]["sql"], "seqscan")
    assert "event_retraction" in used
