"""Numbers that say the same thing wherever they are shown, named for what they count
(docs/dashboard.md, "Dashboard"): a summary version's events folded and events covered, the thread
list's log tokens beside its working context's share of the budget."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from threads.models import SummaryVersion, Thread

pytestmark = pytest.mark.django_db


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_a_version_row_and_the_head_say_the_same_coverage(operator: Client, story: Thread) -> None:
    """v2 folded only the events after v1 yet stands for all of them: the row names both, and
    its "covers" is the header's."""
    head = SummaryVersion.objects.get(thread=story, version=2)
    assert head.covered_from > 1  # v2 folded a tail, not the whole log
    page = _text(operator.get(f"/threads/{story.pk}/summaries/").content.decode())
    assert f"head v2 covers 1–{head.covered_until}" in page
    row = page.split("v2 head", 1)[1]
    folded, covers = re.findall(r"(\d+)–(\d+)", row)[:2]
    assert folded == (str(head.covered_from), str(head.covered_until))
    assert covers == ("1", str(head.covered_until))
    detail = _text(operator.get(f"/threads/{story.pk}/summaries/2/").content.decode())
    assert f"Folded {head.covered_from}–{head.covered_until}" in detail
    assert f"Covers 1–{head.covered_until}" in detail


def test_the_thread_list_names_its_token_numbers(operator: Client, story: Thread) -> None:
    page = _text(operator.get("/threads/").content.decode())
    assert "Log tokens" in page and "Working context" in page
    assert re.search(r"\d+% of its [\d,]+-token budget", page), page
