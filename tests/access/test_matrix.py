"""Access control, route by route (docs/access.md, "People and access", docs/api.md, "Roles"): every
route of the URL resolver × GET, POST, PUT, PATCH, DELETE × anonymous, acme's agent, operator,
reviewer and admin, and globex's admin and agent calling with acme's object ids. The expected answer
comes from tests/access/rules.py; a route without a rule fails here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction

from tests.access.csp import csp_script_problem
from tests.access.rules import RULES, Access, Rule
from tests.access.world import FOREIGN, METHODS, PRINCIPALS, World, rolled_back, routes, seed
from threads.access import has_role

# Each test runs in its own savepoint inside the module's seeded transaction.
pytestmark = pytest.mark.django_db

ROUTES = routes()


@pytest.fixture(scope="module")
def world(django_db_setup: Any, django_db_blocker: Any) -> Iterator[World]:
    """One database set-up for the whole module, rolled back at its end."""
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic._from_testcase = True  # type: ignore[attr-defined]
        with atomic:
            yield seed()
            transaction.set_rollback(True)


def expected(rule: Rule, method: str, principal: str) -> str:
    """The answer class the rules give: login, 401, 403, 404, 405, ok, or a public status."""
    if rule.kind == "public":
        if rule.signed_in is not None and principal not in ("anonymous", "agent", "other_agent"):
            return str(rule.signed_in)
        return str(rule.public.get(method, 405))
    stranger = principal == "anonymous" or (rule.kind == "html" and "agent" in principal)
    if stranger:
        return "login" if rule.kind == "html" else "401"
    access: Access | None = rule.methods.get(method)
    is_agent = "agent" in principal
    scoped = rule.object and method not in rule.unscoped
    foreign = principal in FOREIGN and scoped
    if access is None:
        # DRF checks a view's permission (people only) before the method.
        return "405" if not is_agent else "403|405"
    if foreign and not (access.agent if is_agent else access.person):
        # Not theirs to do, on an object they cannot see: either refusal reveals nothing.
        return "403|404"
    if is_agent:
        if not access.agent:
            return "403"
        return rule.foreign_agent if principal == "other_agent" and rule.object else "ok"
    if access.person is None:
        return "403"
    if principal in FOREIGN:
        return "404" if scoped else "ok"
    return "ok" if has_role(principal, access.person) else "403"


def answer_class(response: Any, public: bool = False) -> str:
    status = response.status_code
    if public:
        return str(status)
    if status == 302 and response["Location"].startswith("/accounts/login/"):
        return "login"
    if status in (401, 403, 404, 405) or status >= 500:
        return str(status)
    return "ok"


def _body(rule: Rule, world: World) -> dict[str, Any]:
    body = dict(rule.body or {})
    for name, value in body.items():
        if isinstance(value, str):
            body[name] = world.placeholders().get(value, value)
    if rule.multipart:
        body["file"] = SimpleUploadedFile("matrix.jsonl", b"", content_type="application/json")
    return body


def call(world: World, rule: Rule, principal: str, method: str, path: str) -> Any:
    """One request, its writes rolled back and the client's cookies kept (a logout would
    otherwise end the session the next rows need)."""
    client = world.clients[principal]
    cookies = client.cookies
    client.cookies = type(cookies)(cookies)  # type: ignore[assignment]
    try:
        with rolled_back():
            if method == "GET":
                return client.get(path)
            body = _body(rule, world)
            if rule.kind == "api" and not rule.multipart:
                data: Any = json.dumps(body)
                return client.generic(method, path, data, content_type="application/json")
            if method == "POST":
                return client.post(path, body)
            return client.generic(method, path)
    finally:
        client.cookies = cookies


def test_every_route_has_a_rule() -> None:
    missing = [f"add a rule for {route!r} ({name})" for route, name in ROUTES if route not in RULES]
    assert not missing, "\n".join(missing)
    stale = set(RULES) - {route for route, _ in ROUTES}
    assert not stale, f"rules for routes that no longer exist: {sorted(stale)}"


@pytest.mark.parametrize("route, name", ROUTES, ids=[r or "(root)" for r, _ in ROUTES])
def test_route(world: World, route: str, name: str) -> None:
    rule = RULES.get(route)
    if rule is None:
        pytest.fail(f"add a rule for {route!r} ({name}) to tests/access/rules.py")
    path = world.fill(route)
    wrong = []
    for method in METHODS:
        for principal in PRINCIPALS:
            want = expected(rule, method, principal)
            response = call(world, rule, principal, method, path)
            got = answer_class(response, public=rule.kind == "public")
            if got not in want.split("|"):
                wrong.append(
                    f"{method} {path} as {principal}: {response.status_code} ({got}),"
                    f" want {want}: {response.content[:200]!r}"
                )
            if response.get("Content-Type", "").startswith("text/html"):
                csp_problem = csp_script_problem(response)
                if csp_problem:
                    wrong.append(f"{method} {path} as {principal}: {csp_problem}")
            if principal in FOREIGN and method == "GET" and response.status_code == 200:
                # Another workspace's caller sees none of acme's objects in any list.
                body = response.content.decode(errors="replace")
                assert str(world.thread.pk) not in body, (route, principal)
                assert world.thread.external_id not in body, (route, principal)
    assert not wrong, "\n".join(wrong)
