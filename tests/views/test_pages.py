"""Every dashboard page renders for a member, hides other workspaces (404), asks strangers to
log in, and renders agent-written content as inert text."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from tests.views.conftest import HOSTILE
from threads.models import Checkpoint, Thread

pytestmark = pytest.mark.django_db


def thread_pages(thread: Thread) -> list[str]:
    checkpoint = Checkpoint.objects.filter(thread=thread).order_by("cursor").first()
    assert checkpoint is not None
    return [
        f"/threads/{thread.pk}/",
        f"/threads/{thread.pk}/?from=1",
        f"/threads/{thread.pk}/context/",
        f"/threads/{thread.pk}/summaries/",
        f"/threads/{thread.pk}/summaries/2/",
        f"/threads/{thread.pk}/summaries/2/?against=1",
        f"/threads/{thread.pk}/checkpoints/",
        f"/threads/{thread.pk}/events/1/",
    ]


LIST_PAGES = ["/threads/", "/side-effects/", "/approvals/", "/integrity/", "/audit/"]


def test_root_redirects_to_threads(operator: Client) -> None:
    response = operator.get("/")
    assert response.status_code == 302 and response["Location"] == "/threads/"


@pytest.mark.parametrize("url", LIST_PAGES + ["/"])
def test_strangers_are_sent_to_log_in(client: Client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_login_page_is_styled_and_logs_in(client: Client, workspace: Any) -> None:
    f.make_person(workspace, "ada", "admin")
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b"ctxadmin/app.css" in page.content
    response = client.post("/accounts/login/", {"username": "ada", "password": f.PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/threads/"
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/threads/").status_code == 302


def test_a_signed_in_person_is_sent_on_from_the_login_page(operator: Client) -> None:
    assert operator.get("/accounts/login/")["Location"] == "/threads/"
    sent_on = operator.get("/accounts/login/?next=/approvals/")
    assert sent_on.status_code == 302 and sent_on["Location"] == "/approvals/"
    # Never to another site, whatever `next` says.
    assert operator.get("/accounts/login/?next=https://evil.example/")["Location"] == "/threads/"


def test_an_event_opened_as_a_page_is_a_page(operator: Client, story: Thread) -> None:
    """A bookmarked or new-tab event address gets the thread's page around the card; the
    summary page's in-place expansion (htmx) gets the card alone."""
    page = operator.get(f"/threads/{story.pk}/events/1/").content.decode()
    assert "<html" in page and "ctxadmin/app.css" in page and "Show #1 in the timeline" in page
    card = operator.get(f"/threads/{story.pk}/events/1/", headers={"HX-Request": "true"})
    assert card.content.decode().lstrip().startswith("<article")


@pytest.mark.parametrize("url", LIST_PAGES)
def test_list_pages_render(operator: Client, story: Thread, url: str) -> None:
    response = operator.get(url)
    assert response.status_code == 200
    assert b"acme" in response.content  # the top bar names the workspace and the role
    assert b"operator" in response.content


def test_thread_pages_render_by_uuid_and_external_id(operator: Client, story: Thread) -> None:
    for url in thread_pages(story):
        assert operator.get(url).status_code == 200, url
    assert operator.get("/threads/order-10086/").status_code == 200


def test_another_workspaces_thread_is_404(outsider: Client, story: Thread) -> None:
    for url in thread_pages(story):
        assert outsider.get(url).status_code == 404, url
    assert outsider.get("/threads/order-10086/").status_code == 404
    # and its lists show nothing of acme
    for url in LIST_PAGES:
        assert b"order-10086" not in outsider.get(url).content, url


def test_thread_list_shows_problem_badges_and_filters(
    operator: Client, story: Thread, workspace: Any
) -> None:
    f.make_thread(workspace, external_id="quiet-thread")
    page = operator.get("/threads/").content.decode()
    assert "unknown side effect" in page and "approval pending" in page
    only_unknown = operator.get("/threads/?unknown=1").content.decode()
    assert "order-10086" in only_unknown and "quiet-thread" not in only_unknown
    only_pending = operator.get("/threads/?pending=1").content.decode()
    assert "order-10086" in only_pending and "quiet-thread" not in only_pending
    assert "order-10086" not in operator.get("/threads/?failed=1").content.decode()
    found = operator.get("/threads/?q=quiet").content.decode()
    assert "quiet-thread" in found and "order-10086" not in found
    by_text = operator.get("/threads/?q=never+more+than&content=1").content.decode()
    assert "order-10086" in by_text and "quiet-thread" not in by_text


def test_over_budget_filter_compares_history_with_the_high_watermark(
    operator: Client, workspace: Any
) -> None:
    small = f.make_thread(
        workspace,
        external_id="tiny-window",
        context_window=700,
        reserved_output=100,
        safety_margin=0,
    )
    f.append(small, f.user("word " * 600))
    f.make_thread(workspace, external_id="roomy")
    page = operator.get("/threads/?over_budget=1").content.decode()
    assert "tiny-window" in page and "roomy" not in page


def test_thread_list_sorts(operator: Client, workspace: Any) -> None:
    for name in ("b-thread", "a-thread", "c-thread"):
        f.make_thread(workspace, external_id=name)
    page = operator.get("/threads/?sort=external_id").content.decode()
    assert page.index("a-thread") < page.index("b-thread") < page.index("c-thread")
    page = operator.get("/threads/?sort=-external_id").content.decode()
    assert page.index("c-thread") < page.index("b-thread") < page.index("a-thread")


def test_thread_list_htmx_refresh_returns_only_the_table(operator: Client, story: Thread) -> None:
    response = operator.get("/threads/?unknown=1", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="thread-table"')
    assert 'hx-trigger="every 10s' in body and "<nav" not in body.split("thread-table")[0]
    assert 'hx-get="/threads/?unknown=1"' in body  # the refresh keeps the filters


def test_timeline_links_calls_and_results_both_ways(operator: Client, story: Thread) -> None:
    page = operator.get(f"/threads/{story.pk}/?from=1").content.decode()
    # c1 is #3 → result #4; c2 is #7 → result #8 (seq numbers of the story)
    assert 'id="seq-3"' in page and 'href="#seq-4"' in page and 'href="#seq-3"' in page
    assert "side effect: unknown" in page
    assert "approval pending" in page
    assert "Unit 1–5" in page and "Unit 6–9" in page


def test_timeline_is_windowed_and_jumps(operator: Client, workspace: Any) -> None:
    thread = f.make_thread(workspace, external_id="long")
    f.append(thread, *[f.user(f"message {n}") for n in range(1, 451)])
    newest = operator.get(f"/threads/{thread.pk}/").content.decode()
    assert 'id="seq-450"' in newest and 'id="seq-401"' in newest and 'id="seq-400"' not in newest
    middle = operator.get(f"/threads/{thread.pk}/?from=201").content.decode()
    assert 'id="seq-201"' in middle and 'id="seq-400"' in middle and 'id="seq-401"' not in middle
    assert "?from=1" in middle and "?from=401" in middle
    jump = operator.get(f"/threads/{thread.pk}/?seq=250")
    assert jump.status_code == 302 and jump["Location"].endswith("?from=201#seq-250")
    past = operator.get(f"/threads/{thread.pk}/?from=900").content.decode()
    assert "Showing events 401–450 of 450" in past and 'id="seq-450"' in past


def test_timeline_links_a_result_on_another_page(operator: Client, workspace: Any) -> None:
    thread = f.make_thread(workspace, external_id="split")
    f.append(thread, f.user("go"), f.call("k", "search", {}))
    f.append(thread, *[f.assistant(f"thinking {n}") for n in range(250)])
    f.append(thread, f.result("k", value="found"))
    first = operator.get(f"/threads/{thread.pk}/?from=1").content.decode()
    assert f"/threads/{thread.pk}/?from=201#seq-253" in first
    last = operator.get(f"/threads/{thread.pk}/?from=201").content.decode()
    assert f"/threads/{thread.pk}/?from=1#seq-2" in last


def test_context_page_shows_budget_trim_and_chart(operator: Client, story: Thread) -> None:
    page = operator.get(f"/threads/{story.pk}/context/").content.decode()
    assert "budget-bar" in page and "wm-high" in page and "wm-low" in page
    assert "<svg" in page and "<polyline" in page and ">v2<" in page
    assert "Summary v2" in page


def test_context_page_trims_and_says_why(operator: Client, workspace: Any) -> None:
    thread = f.make_thread(
        workspace, external_id="tight", context_window=500, reserved_output=100, safety_margin=0
    )
    f.append(
        thread,
        f.user("one " * 250),
        f.assistant("ok"),
        f.user("two " * 250),
        f.assistant("ok"),
        f.user("three"),
    )
    page = operator.get(f"/threads/{thread.pk}/context/").content.decode()
    assert "Nothing is trimmed" not in page and "budget over by" in page


def test_context_page_explains_a_budget_too_small(operator: Client, story: Thread) -> None:
    response = operator.get(f"/threads/{story.pk}/context/?window=100&reserved_output=90")
    assert response.status_code == 422 and b"Budget too small" in response.content
    page = response.content.decode()
    # The settings stay on the page to be changed, and the figures read as words.
    assert 'id="ov-window"' in page and 'value="100"' in page
    assert "reserved output: 90" in page and "reserved_output:" not in page


@pytest.mark.parametrize("value", ["999999999999999999999", "５", "12abc", "-5"])
def test_context_page_says_which_override_it_did_not_use(
    operator: Client, story: Thread, value: str
) -> None:
    response = operator.get(f"/threads/{story.pk}/context/", {"window": value})
    assert response.status_code == 200
    page = response.content.decode()
    assert "is not a whole number up to 2147483647; not used" in page


def test_a_cited_call_shown_in_place_links_its_result(operator: Client, story: Thread) -> None:
    """A summary's source card of a call shows its result as the timeline does, linked there."""
    card = operator.get(f"/threads/{story.pk}/events/3/").content.decode()
    assert "no result yet" not in card
    assert f'href="/threads/{story.pk}/?seq=4">↓ result #4' in card
    refund = operator.get(f"/threads/{story.pk}/events/7/").content.decode()
    assert "↓ result #8" in refund and "side effect: unknown" in refund
    result = operator.get(f"/threads/{story.pk}/events/4/").content.decode()
    assert f'href="/threads/{story.pk}/?seq=3">↑ call #3' in result


def test_summary_detail_cites_sources_and_flags_failed_checks(
    operator: Client, story: Thread
) -> None:
    page = operator.get(f"/threads/{story.pk}/summaries/2/").content.decode()
    assert f'hx-get="/threads/{story.pk}/events/7/"' in page  # the refund call, cited
    assert "side_effects_cited" in page and "Every important event is cited" in page
    diff = operator.get(f"/threads/{story.pk}/summaries/2/?against=1").content.decode()
    assert "v1 → v2" in diff and "added" in diff and "go ahead" in diff


def test_summary_detail_lists_uncited_important_events(operator: Client, story: Thread) -> None:
    version = story.versions.get(version=2)
    content = {**version.content, "tool_state": [], "pending": []}
    # A copy that forgets the refund: a new rejected row, as a bad fold would leave it.
    story.versions.create(
        version=3,
        base_version=2,
        phase="rejected",
        covered_from=version.covered_from,
        covered_until=version.covered_until,
        chain_hash=version.chain_hash,
        backend="llm",
        checksum="x",
        content=content,
        rendered="",
        trigger={"kind": "manual"},
        verification={
            "ok": False,
            "checks": [
                {"name": "side_effects_cited", "ok": False, "detail": "call #7 is not cited"}
            ],
        },
    )
    page = operator.get(f"/threads/{story.pk}/summaries/3/").content.decode()
    assert "uncited side-effecting tool call" in page
    assert "call #7 is not cited" in page and "failed" in page
    listing = operator.get(f"/threads/{story.pk}/summaries/").content.decode()
    assert "failed: side_effects_cited" in listing
    assert "fold rejected" in operator.get("/threads/").content.decode()


def test_missing_summary_version_is_404(operator: Client, story: Thread) -> None:
    assert operator.get(f"/threads/{story.pk}/summaries/99/").status_code == 404
    assert operator.get(f"/threads/{story.pk}/events/999/").status_code == 404


class InertCheck(HTMLParser):
    """Records every text node and whether an ancestor carries hx-disable; any <script> tag."""

    VOID = {"br", "img", "input", "meta", "link", "hr", "source", "wbr", "col", "area"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []
        self.texts: list[tuple[str, bool]] = []
        self.scripts: list[str] = []
        self.hx_post_elements = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "script":
            self.scripts.append(dict(attrs).get("src") or "")
        if tag == "div" and ("hx-post", "/x") in attrs:
            self.hx_post_elements += 1
        if tag not in self.VOID:
            self.stack.append("hx-disable" in names)

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.texts.append((data, any(self.stack)))


def assert_inert(html: str) -> None:
    parser = InertCheck()
    parser.feed(html)
    hits = [disabled for text, disabled in parser.texts if HOSTILE in text]
    assert hits, "the hostile content is not on the page"
    assert all(hits), "agent content rendered outside an hx-disable container"
    assert parser.hx_post_elements == 0
    assert all(src for src in parser.scripts), "an inline <script> came from content"


def test_agent_content_renders_inert_everywhere(operator: Client, story: Thread) -> None:
    timeline = operator.get(f"/threads/{story.pk}/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in timeline
    assert_inert(timeline)
    assert_inert(operator.get(f"/threads/{story.pk}/context/").content.decode())
    assert_inert(operator.get(f"/threads/{story.pk}/events/{story.last_seq - 1}/").content.decode())


def test_agent_content_in_a_summary_and_a_queue_renders_inert(
    operator: Client, workspace: Any
) -> None:
    thread = f.make_thread(workspace, external_id="hostile")
    f.append(
        thread,
        f.user(HOSTILE),
        {"kind": "approval_request", "action": HOSTILE, "arguments": {"note": HOSTILE}},
        f.call("z", HOSTILE, {"why": HOSTILE}, side_effect_key="k-1"),
        f.result("z", status="timeout"),
    )
    from tests.views.conftest import fold

    fold(thread)
    assert_inert(operator.get(f"/threads/{thread.pk}/summaries/1/").content.decode())
    assert_inert(operator.get("/approvals/").content.decode())
    assert_inert(operator.get("/side-effects/").content.decode())


def test_pages_load_htmx_without_the_debug_script(
    operator: Client, story: Thread, settings: Any
) -> None:
    """django-htmx's debug script (DEBUG only) replaces the whole page with a refused action's
    answer instead of letting htmx swap it into the notice."""
    settings.DEBUG = True
    page = operator.get(f"/threads/{story.pk}/").content.decode()
    assert "htmx-2.min.js" in page
    assert "django-htmx.js" not in page


@pytest.mark.parametrize(
    ("url", "known"),
    [("/approvals/?status=bogus", "pending"), ("/side-effects/?status=bogus", "unknown")],
)
def test_a_queue_by_a_status_it_has_not_is_400(
    operator: Client, story: Thread, url: str, known: str
) -> None:
    """Not an empty queue that reads as "nothing to do": the page names the statuses."""
    answer = operator.get(url)
    assert answer.status_code == 400
    assert "no status" in answer.content.decode() and known in answer.content.decode()
    assert operator.get(url.split("?")[0] + f"?status={known}").status_code == 200


@pytest.mark.parametrize("any_status", ["", "any"])
def test_both_queues_filtered_by_any_show_every_status(
    operator: Client, reviewer: Client, story: Thread, any_status: str
) -> None:
    """The filter's "any" (an empty choice, or the word): the decided and the pending, the
    resolved and the unknown, not a 400."""
    from threads.models import ApprovalRequest, SideEffect

    f.append(
        story,
        {"kind": "approval_request", "action": "reopen_ticket_4471", "arguments": {}},
    )
    first = ApprovalRequest.objects.get(thread=story, action="issue_store_credit")
    reviewer.post(f"/approvals/{first.pk}/decide/", {"decision": "approve", "reason": "fine"})
    effect = SideEffect.objects.get(thread=story)
    operator.post(
        f"/side-effects/{effect.pk}/resolve/", {"status": "failed", "evidence": "none in PSP"}
    )

    approvals = operator.get(f"/approvals/?status={any_status}")
    assert approvals.status_code == 200
    page = approvals.content.decode()
    assert "issue_store_credit" in page and "reopen_ticket_4471" in page
    pending = operator.get("/approvals/").content.decode()
    assert "reopen_ticket_4471" in pending and "issue_store_credit" not in pending

    effects = operator.get(f"/side-effects/?status={any_status}")
    assert effects.status_code == 200 and "refund-10086" in effects.content.decode()
    assert "refund-10086" not in operator.get("/side-effects/").content.decode()
