"""The context page's tool definitions and repeated content (docs/pipeline.md,
"Tool definitions and repeated content"; docs/dashboard.md, "Dashboard")."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from threads.models import Thread, ThreadTool
from threads.services.tools import thread_tools_set

pytestmark = pytest.mark.django_db

# 11 for the page, 3 for the problem banner (the thread's flags, its open side effects, its
# second results: threads/selectors/problems.py), 1 for where a LangGraph thread stands (its
# latest root checkpoint: none here)
QUERIES = 15

TOOLS = [
    {"name": "refund", "description": "Refund", "input_schema": {}},
    {
        "type": "function",
        "function": {
            "name": "search_orders",
            "description": "Search the orders of a customer by any of their fields " * 4,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    },
    {"type": "function", "name": "get_order", "description": "Look an order up by id"},
]


def _page(client: Client, thread: Thread) -> str:
    response = client.get(f"/threads/{thread.pk}/context/")
    assert response.status_code == 200
    return response.content.decode()


def _section(page: str, element_id: str) -> str:
    start = page.index(f'id="{element_id}"')
    return page[start : page.index("</table>", start)]


def _with_tools(workspace: Any, external_id: str = "tools") -> Thread:
    thread = f.make_thread(workspace, external_id=external_id)
    thread_tools_set(thread=thread, tools=TOOLS)
    thread.refresh_from_db()
    return thread


def test_the_tools_are_a_segment_of_the_bar_and_a_table_by_cost(
    operator: Client, workspace: Any
) -> None:
    thread = _with_tools(workspace)
    f.append(thread, f.user("hello"))
    page = _page(operator, thread)
    costs = {t.name: t.token_count for t in ThreadTool.objects.filter(thread=thread)}
    total = sum(costs.values())
    assert 'class="seg seg-tools"' in page
    assert f"Tool definitions: {total:,} tokens" in page  # the segment's title
    share = f"{100 * total / thread.context_window:.1f}%"
    assert f"({share} of W)" in page  # the legend gives its share
    assert "Other fixed input" in page
    table = _section(page, "tool-costs")
    names = re.findall(r"<code>([^<]+)</code>", table)
    assert names == sorted(costs, key=lambda n: -costs[n])
    assert names[0] == "search_orders"
    for name, tokens in costs.items():
        assert re.search(
            rf"<code>{name}</code></td><td class=\"num\">{tokens:,}</td>"
            rf"<td class=\"num\">{100 * tokens / thread.context_window:.1f}%</td>",
            table,
        )


def test_a_thread_without_tools_has_the_bar_it_had(operator: Client, story: Thread) -> None:
    page = _page(operator, story)
    assert "seg-tools" not in page and "Other fixed input" not in page
    assert 'title="Fixed input: 0 tokens"' in page
    assert "No tool definitions" in page


def test_repeated_content_names_the_first_seq_and_the_waste(
    operator: Client, workspace: Any
) -> None:
    thread = f.make_thread(workspace, external_id="repeats")
    events = f.append(
        thread,
        f.user("where is order 7?"),  # 1
        f.call("a", "lookup", {"order": 7}),  # 2
        f.result("a", value={"status": "shipped", "log": "x " * 100}),  # 3
        f.assistant("It shipped."),  # 4
        f.user("where is order 7?"),  # 5: repeats 1
        f.call("b", "lookup", {"order": 7}),  # 6: repeats 2
        f.result("b", value={"status": "shipped", "log": "x " * 100}),  # 7: repeats 3
        f.assistant("It shipped, as I said."),  # 8
    )
    tokens = {e.seq: e.token_count for e in events}
    page = _page(operator, thread)
    assert "3 repeats waste" in page
    table = _section(page, "repeat-costs")
    rows = re.findall(
        r'\?seq=(\d+)">#\d+</a></td><td>[^<]*</td><td><a [^>]*>#(\d+)</a></td>'
        r'<td class="num">([\d,]+)</td>',
        table,
    )
    assert [(int(s), int(first), int(n.replace(",", ""))) for s, first, n in rows] == sorted(
        [(7, 3, tokens[7]), (5, 1, tokens[5]), (6, 2, tokens[6])], key=lambda r: (-r[2], r[0])
    )
    assert rows[0][0] == "7"  # the long result wastes most


def test_the_context_page_costs_a_fixed_number_of_queries(
    operator: Client, workspace: Any, django_assert_num_queries: Callable[..., Any]
) -> None:
    thread = _with_tools(workspace, "counted")
    f.append(thread, *[f.user(f"message {n % 5}") for n in range(40)])
    _page(operator, thread)  # warm the session
    # session, user, the thread, the caller's roles, the working context (its head, its
    # events), the versions, the repeats, the chart's buckets, the tools, the top bar's
    # workspaces, the banner's three
    with django_assert_num_queries(QUERIES):
        _page(operator, thread)
    thread_tools_set(thread=thread, tools=[*TOOLS, *({"name": f"t{n}"} for n in range(30))])
    f.append(thread, *[f.user(f"message {n % 5}") for n in range(300)])
    with django_assert_num_queries(QUERIES):
        page = _page(operator, thread)
    assert "335 repeats waste" in page
