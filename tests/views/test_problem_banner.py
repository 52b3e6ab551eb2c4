"""The problem banner on every thread tab, the timeline's badges that link to their action and
the thread list's severity sort (docs/dashboard.md, "Problems and what to do")."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from tests.views.conftest import build_story
from threads.models import ApprovalRequest, SideEffect, Thread
from threads.services.integrity import integrity_check

pytestmark = pytest.mark.django_db


def tabs(thread: Thread) -> list[str]:
    return [
        f"/threads/{thread.pk}/",
        f"/threads/{thread.pk}/context/",
        f"/threads/{thread.pk}/summaries/",
        f"/threads/{thread.pk}/summaries/1/",
        f"/threads/{thread.pk}/checkpoints/",
        f"/threads/{thread.pk}/events/1/",
    ]


def banner(html: str) -> str:
    found = re.search(r'<section class="alert[^"]*problem-banner".*?</section>', html, re.S)
    return found.group(0) if found else ""


def test_every_thread_tab_shows_the_banner_with_the_links_that_act(
    operator: Client, story: Thread
) -> None:
    effect = SideEffect.objects.get(thread=story, tool_call_id="c2")
    approval = ApprovalRequest.objects.get(thread=story)
    for url in tabs(story):
        page = operator.get(url)
        assert page.status_code == 200, url
        shown = banner(page.content.decode())
        assert "2 open problems" in shown, url
        # the unknown refund first (more severe), then the approval
        resolve = shown.index(f"status=unknown#effect-{effect.pk}")
        review = shown.index(f"#approval-{approval.pk}")
        assert resolve < review, url


def test_the_resolve_link_leads_to_the_resolve_form(operator: Client, story: Thread) -> None:
    shown = banner(operator.get(f"/threads/{story.pk}/").content.decode())
    href = re.search(r'href="([^"]*#effect-\d+)"', shown)
    assert href is not None
    path, anchor = href.group(1).replace("&amp;", "&").split("#")
    queue = operator.get(path).content.decode()
    effect = SideEffect.objects.get(thread=story, tool_call_id="c2")
    assert f'id="{anchor}"' in queue
    assert f'action="/side-effects/{effect.pk}/resolve/"' in queue


def test_a_thread_without_problems_shows_no_banner(operator: Client, workspace: Any) -> None:
    thread = f.make_thread(workspace, external_id="quiet")
    f.append(thread, f.user("hello"), f.assistant("hi"))
    page = operator.get(f"/threads/{thread.pk}/").content.decode()
    assert "problem-banner" not in page and "open problem" not in page


def test_timeline_badges_link_to_their_action(operator: Client, story: Thread) -> None:
    effect = SideEffect.objects.get(thread=story, tool_call_id="c2")
    approval = ApprovalRequest.objects.get(thread=story)
    page = operator.get(f"/threads/{story.pk}/").content.decode()
    timeline = page.split('class="tabs"', 1)[1]  # below the banner
    assert re.search(
        rf'<a class="badge badge-warn badge-action" href="[^"]*#effect-{effect.pk}"[^>]*>'
        r"side effect: unknown",
        timeline,
    )
    assert re.search(rf'<a class="badge-action" href="[^"]*#approval-{approval.pk}"', timeline)


def test_a_settled_badge_is_no_link(operator: Client, workspace: Any) -> None:
    thread = f.make_thread(workspace, external_id="settled")
    f.append(
        thread,
        f.call("c1", "refund", {"order": 1}, side_effect_key="refund-1"),
        f.result("c1", value="refunded"),
    )
    page = operator.get(f"/threads/{thread.pk}/").content.decode()
    assert "side effect: succeeded" in page
    assert "badge-action" not in page and "problem-banner" not in page


def test_the_thread_list_sorts_by_severity(operator: Client, workspace: Any) -> None:
    build_story(f.make_thread(workspace, external_id="story"))
    broken = f.make_thread(workspace, external_id="broken")
    f.append(broken, f.user("cancel my order"), f.assistant("cancelled"))
    f.tamper(broken.events.get(seq=2), content="refunded $900")
    integrity_check(thread=broken, full=True)
    quiet = f.make_thread(workspace, external_id="quiet")
    f.append(quiet, f.user("hello"))
    page = operator.get("/threads/?sort=-severity").content.decode()
    rows = re.findall(r'<a class="strong" href="/threads/[^"]+/" hx-disable>([^<]+)</a>', page)
    assert rows == ["broken", "story", "quiet"]
    # the Problems header is the severity sort, its aria-sort set
    assert re.search(r'class="col-problems" aria-sort="descending"><a href="\?sort=severity"', page)
    # the default order is the severity sort too; by last update on request
    default = operator.get("/threads/").content.decode()
    assert (
        re.findall(r'<a class="strong" href="/threads/[^"]+/" hx-disable>([^<]+)</a>', default)
        == rows
    )
    by_update = operator.get("/threads/?sort=-updated").content.decode()
    assert (
        re.findall(r'<a class="strong" href="/threads/[^"]+/" hx-disable>([^<]+)</a>', by_update)[0]
        == "quiet"
    )
