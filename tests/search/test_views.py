"""Message search in the dashboard's thread list and over the API (docs/search.md, "Message search",
docs/api.md, "Message search — `GET /api/v1/search/`"): hits with thread, seq, kind and a
highlighted snippet whose agent text stays inert, links to the timeline at the hit's seq, the
person's current workspace only."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests import factories as f
from tests.views.conftest import HOSTILE, login
from threads.models import Membership, Role, Thread

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(workspace: Any) -> Client:
    return login(workspace, "operator")


@pytest.fixture
def thread_with_text(workspace: Any) -> Thread:
    thread = f.make_thread(workspace, external_id="order-10086", title="Lost parcel")
    f.append(
        thread,
        f.user("Where is my parcel? " + HOSTILE),
        f.call("c1", "track_parcel", {"carrier": "Northwind", "parcel": "NW-1"}),
        f.result("c1", value={"where": "Rotterdam depot"}),
        f.assistant("It waits in the Rotterdam depot."),
    )
    return thread


def hit_rows(page: str) -> list[str]:
    return re.findall(r'<tr class="search-hit">(.*?)</tr>', page, re.S)


def test_the_search_box_shows_hits_with_seq_kind_and_highlight(
    operator: Client, thread_with_text: Thread
) -> None:
    page = operator.get("/threads/?q=rotterdam&content=1").content.decode()
    rows = hit_rows(page)
    assert len(rows) == 2
    newest, older = rows
    assert f'href="/threads/{thread_with_text.pk}/?seq=4"' in newest and "message" in newest
    assert "<mark>Rotterdam</mark>" in newest
    assert f'href="/threads/{thread_with_text.pk}/?seq=3"' in older and "tool_result" in older
    assert "<mark>Rotterdam</mark>" in older
    # The thread itself is listed below the hits.
    assert page.count(f'href="/threads/{thread_with_text.pk}/"') >= 3
    # Tool names and arguments.
    (call,) = hit_rows(operator.get("/threads/?q=Northwind&content=1").content.decode())
    assert "tool_call" in call and "<mark>Northwind</mark>" in call
    (named,) = hit_rows(operator.get("/threads/?q=track_parcel&content=1").content.decode())
    assert "?seq=2" in named


def test_agent_markup_in_a_hit_stays_text(operator: Client, thread_with_text: Thread) -> None:
    page = operator.get("/threads/?q=parcel&content=1").content.decode()
    (row,) = [r for r in hit_rows(page) if "?seq=1" in r]
    assert "<script>" not in row and "&lt;script&gt;" in row
    assert 'hx-post="/x"' not in row
    assert '<td class="snippet" hx-disable>' in row
    assert "<mark>parcel</mark>" in row
    assert re.findall(r"<(\w+)", row.split('class="snippet"')[1]) == ["mark"]


def test_a_plain_search_finds_words_in_events(operator: Client, thread_with_text: Thread) -> None:
    """No box to tick: a word the agent wrote finds its event and its thread."""
    page = operator.get("/threads/?q=rotterdam").content.decode()
    assert len(hit_rows(page)) == 2 and "No threads match." not in page
    assert f'href="/threads/{thread_with_text.pk}/"' in page


@pytest.mark.parametrize("opt_out", ["names_only=1", "content=0"])
def test_names_only_or_no_match_shows_no_hits(
    operator: Client, thread_with_text: Thread, opt_out: str
) -> None:
    page = operator.get(f"/threads/?q=rotterdam&{opt_out}").content.decode()
    assert "search-hits" not in page and "No threads match." in page
    none = operator.get("/threads/?q=zeppelin").content.decode()
    assert "No event holds these words." in none and hit_rows(none) == []


def test_hits_come_from_the_current_workspace_only(workspace: Any) -> None:
    other, _ = f.make_workspace("globex")
    mine = f.make_thread(workspace, external_id="mine")
    theirs = f.make_thread(other, external_id="theirs")
    f.append(mine, f.user("capybara in acme"))
    f.append(theirs, f.user("capybara in globex"))
    person = f.make_person(workspace, "dana", "operator")
    client = Client()
    client.force_login(person)
    assert len(hit_rows(client.get("/threads/?q=capybara&content=1").content.decode())) == 1
    Membership.objects.create(user=person, workspace=other, role=Role.OPERATOR)
    client.post("/workspace/", {"workspace": other.pk, "next": "/threads/"})
    (row,) = hit_rows(client.get("/threads/?q=capybara&content=1").content.decode())
    assert f"/threads/{theirs.pk}/?seq=1" in row
    stranger = login(f.make_workspace("initech")[0], "operator", username="ivan")
    assert hit_rows(stranger.get("/threads/?q=capybara&content=1").content.decode()) == []


def test_older_hits_page_on(operator: Client, thread: Thread) -> None:
    f.append(thread, *[f.user(f"echo {n}") for n in range(25)])
    page = operator.get("/threads/?q=echo&content=1").content.decode()
    assert len(hit_rows(page)) == 20
    more = re.search(r'href="\?([^"]*before=\d+)">Older matches', page)
    assert more is not None
    rest = operator.get("/threads/?" + more.group(1).replace("&amp;", "&")).content.decode()
    assert [re.search(r"\?seq=(\d+)", r).group(1) for r in hit_rows(rest)] == [  # type: ignore[union-attr]
        "5",
        "4",
        "3",
        "2",
        "1",
    ]
    assert "Newest matches" in rest and "Older matches" not in rest


def test_a_hit_link_opens_the_timeline_at_its_seq(operator: Client, thread: Thread) -> None:
    f.append(thread, *[f.user(f"line {n}") for n in range(250)], f.user("needle here"))
    response = operator.get(f"/threads/{thread.pk}/?seq=251")
    assert response.status_code == 302 and response["Location"].endswith("?from=201#seq-251")


def test_api_search_for_agents_and_people(
    agent: APIClient, other_agent: APIClient, thread_with_text: Thread, workspace: Any
) -> None:
    answer = agent.get("/api/v1/search/", {"q": "rotterdam", "limit": "1"})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    (hit,) = body["results"]
    assert hit["thread"] == str(thread_with_text.pk) and hit["thread_external_id"] == "order-10086"
    assert (hit["seq"], hit["kind"]) == (4, "message")
    assert {"text": "Rotterdam", "hit": True} in hit["snippet"]
    assert body["next_before"] == hit["event_id"]
    rest = agent.get(
        "/api/v1/search/", {"q": "rotterdam", "before": str(body["next_before"])}
    ).json()
    assert [(h["seq"], h["kind"]) for h in rest["results"]] == [(3, "tool_result")]
    assert rest["next_before"] is None
    # Snippets are plain text: markup comes back as the agent wrote it, never as HTML.
    parcel = agent.get("/api/v1/search/", {"q": "parcel"}).json()["results"]
    assert any(HOSTILE in "".join(p["text"] for p in h["snippet"]) for h in parcel)
    assert other_agent.get("/api/v1/search/", {"q": "rotterdam"}).json()["results"] == []
    person = APIClient()
    person.force_login(f.make_person(workspace, "rita", "reviewer"))
    assert len(person.get("/api/v1/search/", {"q": "rotterdam"}).json()["results"]) == 2
    assert agent.get("/api/v1/search/").status_code == 400
    assert agent.get("/api/v1/search/", {"q": "x", "limit": "0"}).status_code == 400
    assert agent.get("/api/v1/search/", {"q": "..."}).json()["results"] == []
    assert APIClient().get("/api/v1/search/", {"q": "x"}).status_code in (401, 403)


def test_a_query_of_more_than_16_terms_is_refused_not_cut(
    agent: APIClient, operator: Client, workspace: Any
) -> None:
    """Every term is required: a 17th cannot be dropped, or the hits would lack it."""
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi"
    thread = f.make_thread(workspace, external_id="greek")
    f.append(thread, f.user(words))
    assert len(agent.get("/api/v1/search/", {"q": words}).json()["results"]) == 1
    too_many = words + " nonexistentword"
    answer = agent.get("/api/v1/search/", {"q": too_many})
    assert answer.status_code == 400
    assert "at most 16 terms" in answer.json()["error"]["fields"]["q"]
    page = operator.get("/threads/", {"q": too_many, "content": "1"}).content.decode()
    assert hit_rows(page) == []
    assert "Use at most 16 words" in page
