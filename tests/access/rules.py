"""Who may call which route with which method (docs/access.md, "People and access", docs/api.md,
"Roles" and "Dashboard URLs").

One rule per route pattern of the URL resolver; tests/access/test_matrix.py walks every route
and fails for a route that has no rule here. A rule names the methods the route answers and,
per method, who may: agents (`agent`) and the least role of a person (`person`; None: no
person). Any other method is 405 (after authentication). `object` says that the path names
an object of the seeded workspace, so a person or agent of another workspace gets 404.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from threads.models import Role

OPERATOR, REVIEWER, ADMIN = Role.OPERATOR, Role.REVIEWER, Role.ADMIN


@dataclass(frozen=True)
class Access:
    agent: bool = False
    person: Role | None = None


# Shorthands: who may call one method.
AGENTS = Access(agent=True)
EVERYONE = Access(agent=True, person=OPERATOR)  # agents and every member
OP = Access(person=OPERATOR)
REV = Access(person=REVIEWER)
ADM = Access(person=ADMIN)
AGENTS_AND_ADMINS = Access(agent=True, person=ADMIN)


@dataclass(frozen=True)
class Rule:
    # "html": a dashboard page (login_required: strangers are sent to log in); "api": DRF
    # (strangers 401); "public": the same answer for everyone, given per method in `public`.
    kind: str
    methods: dict[str, Access] = field(default_factory=dict)
    object: bool = False
    # Methods of an `object` route that name no object (a GET that only leads to a form):
    # a member of another workspace gets what a member of this one does.
    unscoped: tuple[str, ...] = ()
    # The body sent with unsafe methods, so the role check is reached rather than a body
    # check: a form for HTML, JSON (or "multipart") for the API. Values may name the seeded
    # objects: "{workspace}", "{workspace_name}", "{checkpoint}".
    body: dict[str, Any] | None = None
    multipart: bool = False
    # Another workspace's agent: LangGraph threads are named by external_id within the
    # agent's own workspace, so A's name is simply an empty thread there, never A's data.
    foreign_agent: str = "404"
    public: dict[str, int] = field(default_factory=dict)
    # A public route that answers a signed-in person otherwise: this status, whatever the
    # method (the login page sends them on).
    signed_in: int | None = None


def html(methods: dict[str, Access], **kw: Any) -> Rule:
    return Rule("html", methods, **kw)


def api(methods: dict[str, Access], **kw: Any) -> Rule:
    return Rule("api", methods, **kw)


CHECKPOINT_BODY = {"checkpoint": "{checkpoint}", "reason": "matrix"}
FORK_BODY = {"checkpoint": "{checkpoint}", "external_id": "matrix-fork"}
LANGGRAPH = {"foreign_agent": "ok", "object": True}

RULES: dict[str, Rule] = {
    # --- The agent API ----------------------------------------------------------------------------
    # (docs/api.md, "Auth and errors", "Threads", "Events — `/api/v1/threads/{id}/events/`",
    # "Working context — `GET /api/v1/threads/{id}/context/`", "Summaries and folding",
    # "Tasks — `GET /api/v1/tasks/{task_id}/`", "Checkpoints, integrity, rollback, fork",
    # "Side effects and approvals", "Imports — `/api/v1/imports/`" and "LangGraph checkpointer")
    "api/v1/threads/": api({"GET": EVERYONE, "POST": AGENTS}, body={"external_id": "m-new"}),
    # Workspace-scoped by the caller: an agent's own workspace, a person's memberships.
    "api/v1/search/": api({"GET": EVERYONE}),
    "api/v1/threads/<str:id>/": api(
        {"GET": EVERYONE, "PATCH": ADM}, object=True, body={"summarizer": "structured"}
    ),
    "api/v1/threads/<str:id>/events/": api(
        {"GET": EVERYONE, "POST": AGENTS},
        object=True,
        body={"kind": "message", "role": "user", "content": "matrix"},
    ),
    "api/v1/threads/<str:id>/tools/": api(
        {"GET": EVERYONE, "PUT": AGENTS}, object=True, body={"tools": []}
    ),
    "api/v1/tasks/<str:task_id>/": api({"GET": EVERYONE}, object=True),
    "api/v1/threads/<str:id>/verify/": api({"POST": EVERYONE}, object=True, body={}),
    "api/v1/threads/<str:id>/integrity/": api({"GET": EVERYONE}, object=True),
    "api/v1/threads/<str:id>/context/": api({"GET": EVERYONE}, object=True),
    "api/v1/threads/<str:id>/fold/": api({"POST": EVERYONE}, object=True, body={}),
    "api/v1/threads/<str:id>/summaries/": api({"GET": EVERYONE}, object=True),
    "api/v1/threads/<str:id>/summaries/<int:version>/": api({"GET": EVERYONE}, object=True),
    "api/v1/threads/<str:id>/checkpoints/": api(
        {"GET": EVERYONE, "POST": OP}, object=True, body={"label": "matrix"}
    ),
    "api/v1/threads/<str:id>/checkpoints/<int:checkpoint_id>/preview/": api(
        {"GET": ADM}, object=True
    ),
    "api/v1/threads/<str:id>/rollback/": api({"POST": ADM}, object=True, body=CHECKPOINT_BODY),
    "api/v1/threads/<str:id>/fork/": api({"POST": REV}, object=True, body=FORK_BODY),
    "api/v1/threads/<str:id>/unpin/": api({"POST": ADM}, object=True, body={"reason": "matrix"}),
    "api/v1/threads/<str:id>/events/<int:seq>/redact/": api(
        {"POST": ADM}, object=True, body={"reason": "matrix"}
    ),
    "api/v1/redactions/": api({"POST": ADM}, body={"query": "matrix", "reason": "matrix"}),
    "api/v1/threads/<str:id>/approvals/": api({"GET": EVERYONE}, object=True),
    "api/v1/side-effects/": api({"GET": EVERYONE}),
    "api/v1/side-effects/<int:id>/resolve/": api(
        {"POST": OP}, object=True, body={"status": "failed", "evidence": "matrix"}
    ),
    "api/v1/side-effects/<int:id>/check/": api({"POST": OP}, object=True, body={}),
    "api/v1/approvals/": api({"GET": EVERYONE}),
    "api/v1/approvals/<int:id>/decide/": api(
        {"POST": REV}, object=True, body={"decision": "reject", "reason": "matrix"}
    ),
    # A person names the workspace to import into (acme: not found for globex's admin); an
    # agent imports into its own. Reading an import is reading the workspace (operator).
    "api/v1/imports/": api(
        {"POST": AGENTS_AND_ADMINS},
        body={"format": "jsonl", "workspace": "{workspace_name}"},
        multipart=True,
        object=True,
        foreign_agent="ok",
    ),
    "api/v1/imports/<str:id>/": api({"GET": EVERYONE}, object=True),
    "api/v1/imports/<str:id>/cancel/": api({"POST": ADM}, object=True),
    "api/v1/threads/<str:id>/langgraph/": api({"DELETE": AGENTS}, **LANGGRAPH),
    "api/v1/threads/<str:id>/langgraph/checkpoints/": api(
        {"GET": AGENTS, "POST": AGENTS}, body={}, **LANGGRAPH
    ),
    "api/v1/threads/<str:id>/langgraph/checkpoints/<str:checkpoint_id>/": api(
        {"GET": AGENTS}, object=True
    ),
    "api/v1/threads/<str:id>/langgraph/writes/": api({"POST": AGENTS}, body={}, **LANGGRAPH),
    "api/v1/threads/<str:id>/langgraph/batch/": api({"POST": AGENTS}, body={}, **LANGGRAPH),
    "api/v1/threads/<str:id>/langgraph/copy/": api({"POST": AGENTS}, body={}, **LANGGRAPH),
    "api/v1/langgraph/checkpoints/": api({"GET": AGENTS}),
    "api/v1/langgraph/prune/": api({"POST": AGENTS}, body={}),
    "api/v1/langgraph/delete-for-runs/": api({"POST": AGENTS}, body={}),
    # --- Schema, docs, the API's catch-all, login: the same for everyone ----------------------
    "api/schema/": Rule("public", public={"GET": 200}),
    "api/docs/": Rule("public", public={"GET": 200}),
    "^api/": Rule("public", public={m: 404 for m in ("GET", "POST", "PUT", "PATCH", "DELETE")}),
    "accounts/login/": Rule("public", public={"GET": 200, "POST": 200, "PUT": 200}, signed_in=302),
    # --- The dashboard (docs/api.md, "Dashboard URLs") --------------------------------------------
    "": html({"GET": OP}),
    "threads/": html({"GET": OP}),
    "threads/<str:id>/": html({"GET": OP}, object=True),
    "threads/<str:id>/events/<int:seq>/": html({"GET": OP}, object=True),
    "threads/<str:id>/events/<int:seq>/body/": html({"GET": OP}, object=True),
    "threads/<str:id>/context/": html({"GET": OP}, object=True),
    "threads/<str:id>/summaries/": html({"GET": OP}, object=True),
    "threads/<str:id>/summaries/<int:version>/": html({"GET": OP}, object=True),
    "threads/<str:id>/fold/": html({"POST": OP}, object=True),
    "threads/<str:id>/checkpoints/": html({"GET": OP}, object=True),
    "threads/<str:id>/checkpoints/new/": html({"POST": OP}, object=True, body={"label": "m"}),
    "threads/<str:id>/checkpoints/<int:checkpoint>/rollback-preview/": html(
        {"GET": ADM}, object=True
    ),
    "threads/<str:id>/events/<int:seq>/redact/": html(
        {"POST": ADM}, object=True, body={"reason": "matrix", "confirm": "1"}
    ),
    "threads/<str:id>/rollback/": html(
        {"POST": ADM}, object=True, body={"checkpoint": "{checkpoint}"}
    ),
    "threads/<str:id>/fork/": html(
        {"POST": REV}, object=True, body={"checkpoint": "{checkpoint}", "external_id": "m-fork"}
    ),
    "threads/<str:id>/verify/": html({"POST": OP}, object=True),
    "threads/<str:id>/settings/": html(
        {"POST": ADM},
        object=True,
        body={
            "summarizer": "structured",
            "context_window": 16000,
            "reserved_output": 2000,
            "reasoning_reserve": 0,
            "safety_margin": 500,
            "fixed_tokens": 0,
            "high_watermark": 0.8,
            "low_watermark": 0.5,
        },
    ),
    "threads/<str:id>/unpin/": html({"POST": ADM}, object=True, body={"reason": "matrix"}),
    "threads/<str:id>/pause/": html({"POST": ADM}, object=True, body={"reason": "matrix"}),
    "tasks/<str:task_id>/progress/": html({"GET": OP}, object=True),
    "side-effects/": html({"GET": OP}),
    "side-effects/<int:pk>/resolve/": html(
        {"POST": OP}, object=True, body={"status": "failed", "evidence": "matrix"}
    ),
    "side-effects/<int:pk>/check/": html({"POST": OP}, object=True),
    "approvals/": html({"GET": OP}),
    "approvals/<int:pk>/decide/": html(
        {"POST": REV}, object=True, body={"decision": "reject", "reason": "matrix"}
    ),
    "integrity/": html({"GET": OP}),
    "audit/": html({"GET": OP}),
    "operations/": html({"GET": OP}),
    "workspace/": html({"POST": OP}, object=True, body={"workspace": "{workspace}"}),
    "imports/": html({"GET": ADM}),
    # GET: the upload's address reached by a link or a reload leads to the form (/imports/).
    "imports/new/": html(
        {"GET": ADM, "POST": ADM},
        object=True,
        unscoped=("GET",),
        body={"workspace": "{workspace}", "format": "jsonl"},
        multipart=True,
    ),
    "imports/<str:id>/": html({"GET": ADM}, object=True),
    "imports/<str:id>/cancel/": html({"POST": ADM}, object=True),
    # The workspace is named in the form: another workspace's admin names one they cannot see.
    "imports/agents/": html(
        {"POST": ADM}, object=True, body={"workspace": "{workspace}", "allowed": "1"}
    ),
    "keys/": html({"GET": ADM}),
    "keys/new/": html({"POST": ADM}, object=True, body={"workspace": "{workspace}", "name": "m"}),
    "keys/<int:pk>/revoke/": html({"POST": ADM}, object=True),
    "keys/<int:pk>/expiry/": html({"POST": ADM}, object=True, body={"expires": ""}),
    # The Forget page acts on the person's current workspace (another workspace's admin acts
    # on theirs); an erasure's report names a task run of the seeded workspace.
    "forget/": html({"GET": ADM}),
    "forget/erase/": html({"POST": ADM}, body={"value": "nobody@example.com", "reason": "m"}),
    "forget/erasures/<str:task_id>/": html({"GET": ADM}, object=True),
    "forget/retention/": html({"POST": ADM}, body={"retention_days": "", "keep_checkpoints": ""}),
    "forget/retention/dry-run/": html({"POST": ADM}),
    "forget/retention/dry-runs/<str:task_id>/": html({"GET": ADM}, object=True),
}
# Logging out answers POST only, for everyone: a redirect to the login page.
RULES["accounts/logout/"] = Rule("public", public={"POST": 302})
# The test client calls from 127.0.0.1, which /metrics answers without a token (loopback).
RULES["metrics"] = Rule("public", public={"GET": 200})
RULES["metrics/"] = Rule("public", public={"GET": 200})
