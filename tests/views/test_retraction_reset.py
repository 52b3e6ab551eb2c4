"""Retraction and reset on the dashboard: the timeline shows what each did, the context page
lists nothing retracted (docs/event-log.md, "Kinds"; docs/dashboard.md, "Dashboard")."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from tests.views.conftest import HOSTILE
from tests.views.test_pages import assert_inert

pytestmark = pytest.mark.django_db


@pytest.fixture
def popped(workspace: Any) -> Any:
    thread = f.make_thread(workspace, external_id="popped")
    f.append(
        thread,
        f.user("keep this"),  # 1
        f.user(HOSTILE),  # 2
        {"kind": "retraction", "retracts": 2},  # 3
        {"kind": "reset"},  # 4
        f.user("after the reset"),  # 5
    )
    return thread


def test_the_timeline_shows_a_retraction_a_retracted_event_and_a_reset(
    operator: Client, popped: Any
) -> None:
    page = operator.get(f"/threads/{popped.pk}/?from=1").content.decode()
    assert 'retracts <a href="#seq-2">#2</a>' in page
    assert 'class="event kind-message is-retracted" id="seq-2"' in page
    assert '<a href="#seq-3"><span class="badge badge-muted">retracted by #3</span></a>' in page
    assert 'id="seq-4" role="separator"' in page
    assert "reset: earlier events leave the working context" in page
    assert 'class="event kind-message" id="seq-1"' in page  # not retracted: no badge
    assert page.count("retracted by #") == 1
    # The retracted content is still agent text: escaped, inside hx-disable.
    assert_inert(page)


def test_one_event_card_links_its_target_in_the_timeline(operator: Client, popped: Any) -> None:
    card = operator.get(f"/threads/{popped.pk}/events/3/").content.decode()
    assert f'href="/threads/{popped.pk}/?seq=2">#2</a>' in card


def test_the_context_page_lists_nothing_retracted_or_reset(operator: Client, popped: Any) -> None:
    page = operator.get(f"/threads/{popped.pk}/context/").content.decode()
    assert "after the reset" in page
    assert "keep this" not in page  # before the reset
    assert "alert(1)" not in page  # retracted
    assert 'id="seq-3"' not in page and "retracts #" not in page
