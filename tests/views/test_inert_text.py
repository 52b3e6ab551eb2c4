"""Agent text is inert on every page that shows it (docs/dashboard.md, "Dashboard"): script tags,
event handlers, javascript: links, SVG handlers and htmx attributes written by an agent into
messages, tool arguments and results, approvals, tool definitions, summaries, titles,
external ids, import file names and key names render as text, never as markup, and any htmx
attribute text sits inside an `hx-disable` region, where htmx would not act on it even if it
were markup."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client

from integrations.trace_imports.models import TraceImport
from integrations.trace_imports.services.uploads import import_start
from tests import factories as f
from tests.views.conftest import MANUAL
from threads.models import Checkpoint, SideEffect, SummaryVersion, Thread
from threads.services import folding
from threads.services.api_keys import api_key_issue
from threads.services.side_effects import side_effect_resolve
from threads.services.tools import thread_tools_set

pytestmark = pytest.mark.django_db

PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    '<div hx-get="/evil" hx-trigger="load">',
    "<svg onload=alert(1)>",
]
HOSTILE = " ".join(PAYLOADS)
# Text that means htmx attributes, wherever it shows.
HTMX_MARKERS = ("hx-get", "hx-trigger")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


def seed_hostile(workspace: Any, admin_user: Any) -> Thread:
    """A thread where every field an agent writes carries the payloads."""
    thread = f.make_thread(
        workspace,
        external_id="<svg onload=alert(1)><div hx-get=evil hx-trigger=load>",
        title=HOSTILE,
    )
    thread_tools_set(
        thread=thread,
        tools=[{"name": "lookup", "description": HOSTILE, "parameters": {"q": HOSTILE}}],
    )
    f.append(
        thread,
        f.user(HOSTILE),
        f.annotation("constraint", "user", {"text": HOSTILE}),
        f.call("c1", "lookup<img src=x onerror=alert(1)>", {"q": HOSTILE}),
        f.result("c1", value={"text": HOSTILE}, verified_facts=[{"key": "k", "value": HOSTILE}]),
        f.assistant(HOSTILE),
    )
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)  # None when a trigger folded
    f.append(
        thread,
        f.call("c2", "refund", {"note": HOSTILE}, side_effect_key="refund<svg onload=alert(1)>"),
        f.result("c2", status="timeout", value={"error": HOSTILE}),
        f.assistant(HOSTILE),
        {
            "kind": "approval_request",
            "action": HOSTILE[:200],
            "arguments": {"note": HOSTILE},
            "tool_name": "credit<svg onload=alert(1)>",
        },
    )
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)  # None when a trigger folded
    side_effect_resolve(
        side_effect=SideEffect.objects.get(thread=thread),
        actor=admin_user,
        status="failed",
        evidence=HOSTILE,
    )
    import_start(workspace=workspace, actor=admin_user, fmt="jsonl", file_name=HOSTILE, content=b"")
    api_key_issue(workspace=workspace, actor=admin_user, name=HOSTILE[:100])
    thread.refresh_from_db()
    return thread


def pages(thread: Thread) -> list[str]:
    base = f"/threads/{thread.pk}/"
    urls = [
        "/threads/",
        "/threads/?q=svg",
        "/threads/?q=evil&content=1",
        "/side-effects/",
        "/approvals/",
        "/integrity/",
        "/audit/",
        "/imports/",
        "/keys/",
        base,
        f"{base}context/",
        f"{base}summaries/",
        f"{base}checkpoints/",
    ]
    urls += [f"{base}events/{seq}/" for seq in range(1, thread.last_seq + 1)]
    for version in SummaryVersion.objects.filter(thread=thread).values_list("version", flat=True):
        urls += [f"{base}summaries/{version}/", f"{base}summaries/{version}/?against=1"]
    checkpoint = Checkpoint.objects.filter(thread=thread).order_by("-cursor").first()
    assert checkpoint is not None
    urls.append(f"{base}checkpoints/{checkpoint.pk}/rollback-preview/")
    urls += [f"/imports/{pk}/" for pk in TraceImport.objects.values_list("pk", flat=True)]
    return urls


class Inspector(HTMLParser):
    """Every element and text of a page, with whether an ancestor (or itself) has
    hx-disable."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []
        self.problems: list[str] = []

    @property
    def disabled(self) -> bool:
        return any(flag for _, flag in self.stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                self.problems.append(f"<{tag} {name}=…> (an event handler)")
            if name in ("href", "src", "action", "formaction") and value.strip().lower().startswith(
                "javascript:"
            ):
                self.problems.append(f"<{tag} {name}={value!r}>")
            if name.startswith("hx-") and "/evil" in value:
                self.problems.append(f"<{tag} {name}={value!r}> (agent htmx)")
        if tag == "script" and "src" not in names:
            self.problems.append("an inline <script>")
        if tag not in VOID:
            self.stack.append((tag, "hx-disable" in names))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index][0] == tag:
                del self.stack[index:]
                return

    def handle_data(self, data: str) -> None:
        in_title = any(tag == "title" for tag, _ in self.stack)
        if any(marker in data for marker in HTMX_MARKERS) and not self.disabled and not in_title:
            self.problems.append(f"agent htmx text outside hx-disable: {data.strip()[:80]!r}")


def inspect(page: str) -> list[str]:
    problems = [f"raw {payload!r}" for payload in PAYLOADS if payload in page]
    inspector = Inspector()
    inspector.feed(page)
    inspector.close()
    return problems + inspector.problems


def test_agent_text_is_inert_on_every_page(workspace: Any) -> None:
    admin_user = f.make_person(workspace, "ada", "admin")
    thread = seed_hostile(workspace, admin_user)
    client = Client()
    client.force_login(admin_user)
    shown = 0
    problems = []
    for url in pages(thread):
        response = client.get(url)
        assert response.status_code == 200, url
        page = response.content.decode()
        shown += "alert(1)" in page
        problems += [f"{url}: {problem}" for problem in inspect(page)]
    assert not problems, "\n".join(problems)
    # The payloads are really shown (escaped), or the test would prove nothing.
    assert shown >= len(pages(thread)) - 2


def test_the_inspector_catches_live_markup() -> None:
    assert inspect("<p>" + HOSTILE + "</p>")
    assert inspect('<p>&lt;div hx-get="/evil"&gt;</p>')  # text, but outside hx-disable
    assert not inspect('<p hx-disable>&lt;div hx-get="/evil"&gt;</p>')
