"""The API's requests and how their answers combine, written once for both clients.

Each operation is a generator: it yields the `Call`s (and `Sleep`s) it needs and receives each
call's decoded answer (an error answer is raised at the `yield`); its return value is the
operation's result. The one request driver (`_http`) runs them with blocking I/O for `Client`,
with awaits for `AsyncClient`, so the two cannot drift apart.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from ctxadmin_client._http import Call, Operation, Sleep
from ctxadmin_client.errors import ApprovalTimeout, NotFoundError

API = "api/v1"
# The server's limit per request (docs/api.md, "Events — `/api/v1/threads/{id}/events/`").
MAX_BATCH = 1000
EVENTS_PAGE = 1000  # the server's largest page of GET .../events/
BUDGET_NAMES = ("window", "reserved_output", "reasoning_reserve", "safety_margin", "fixed_tokens")


def thread_path(thread_id: str, *rest: str) -> str:
    """`api/v1/threads/{id}/...`; `thread_id` is a UUID or an external_id."""
    return "/".join([API, "threads", quote(thread_id, safe=""), *rest]) + "/"


def new_client_event_id() -> str:
    return uuid.uuid4().hex


def create_thread(external_id: str, settings: Mapping[str, Any]) -> Call:
    return Call("POST", f"{API}/threads/", json={"external_id": external_id, **settings})


def get_thread(thread_id: str) -> Call:
    return Call("GET", thread_path(thread_id))


def prepare_events(events: tuple[Mapping[str, Any], ...]) -> list[dict[str, Any]]:
    """Give every event without a `client_event_id` a fresh one, in place when it is a dict (so
    that appending the same dicts again after an error replays instead of duplicating)."""
    prepared = []
    for index, event in enumerate(events):
        if not isinstance(event, Mapping):
            raise TypeError(f"events[{index}] is {type(event).__name__}, not a dict")
        if isinstance(event, dict):
            if not event.get("client_event_id"):
                event["client_event_id"] = new_client_event_id()
            prepared.append(event)
        else:
            copy = dict(event)
            copy.setdefault("client_event_id", new_client_event_id())
            prepared.append(copy)
    return prepared


def append(
    thread_id: str, events: tuple[Mapping[str, Any], ...]
) -> Operation[list[dict[str, Any]]]:
    """POST the events in batches of at most MAX_BATCH; each batch is all-or-nothing."""
    prepared = prepare_events(events)
    answers: list[dict[str, Any]] = []
    for start in range(0, len(prepared), MAX_BATCH):
        chunk = prepared[start : start + MAX_BATCH]
        answer = yield Call("POST", thread_path(thread_id, "events"), json={"events": chunk})
        answers.extend(answer)
    return answers


def context(thread_id: str, budget: Mapping[str, int | None]) -> Call:
    params = {name: value for name, value in budget.items() if value is not None}
    return Call("GET", thread_path(thread_id, "context"), params=params)


def set_tools(thread_id: str, tools: list[Mapping[str, Any]]) -> Call:
    """PUT the thread's whole set of tool definitions (idempotent: safe to retry)."""
    return Call("PUT", thread_path(thread_id, "tools"), json=[dict(tool) for tool in tools])


def tools(thread_id: str) -> Call:
    return Call("GET", thread_path(thread_id, "tools"))


def events_page(thread_id: str, after: int, limit: int) -> Call:
    return Call("GET", thread_path(thread_id, "events"), params={"after": after, "limit": limit})


def approvals(thread_id: str, status: str | None = None) -> Call:
    return Call("GET", thread_path(thread_id, "approvals"), params={"status": status})


def side_effects(thread_id: str, idempotency_key: str | None = None) -> Call:
    """GET /api/v1/side-effects/ of one thread, narrowed to one key's record when given."""
    params: dict[str, Any] = {"thread": thread_id}
    if idempotency_key is not None:
        params["idempotency_key"] = idempotency_key
    return Call("GET", f"{API}/side-effects/", params=params)


def ledger_entry(
    thread_id: str, idempotency_key: str
) -> Operation[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    """The ledger's record of a key in the thread (None when there is none) and, when the
    record has a result, that result's event: what an exactly-once guard needs to decide
    (docs/clients.md, "Exactly once: side effects and the ledger")."""
    records = yield side_effects(thread_id, idempotency_key)
    record = next((r for r in records if r.get("idempotency_key") == idempotency_key), None)
    if record is None or not record.get("result_seq"):
        return (None if record is None else dict(record)), None
    seq = int(record["result_seq"])
    page = yield events_page(thread_id, seq - 1, 1)
    event = next((e for e in page["events"] if e.get("seq") == seq), None)
    return dict(record), event


def integrity(thread_id: str) -> Call:
    return Call("GET", thread_path(thread_id, "integrity"))


def fold(thread_id: str, reason: str | None) -> Call:
    return Call("POST", thread_path(thread_id, "fold"), json={"reason": reason} if reason else {})


def task(task_id: str) -> Call:
    return Call("GET", f"{API}/tasks/{quote(task_id, safe='')}/")


TASK_DONE = ("SUCCESS", "FAILURE")


def wait_for_task(task_id: str, timeout: float, poll_interval: float) -> Operation[dict[str, Any]]:
    """Poll GET /api/v1/tasks/{id}/ until the task's state is SUCCESS or FAILURE (docs/api.md,
    "Tasks — `GET /api/v1/tasks/{task_id}/`"); TimeoutError when `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        record = yield task(task_id)
        if record.get("state") in TASK_DONE:
            return dict(record)
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(
                f"task {task_id} is still {record.get('state')} after {timeout:g} seconds"
            )
        yield Sleep(min(poll_interval, left))


def request_approval(thread_id: str, event: dict[str, Any]) -> Operation[dict[str, Any]]:
    """Append an `approval_request` event, then read back the approval it opened: the record
    of GET .../approvals/ whose `approval_seq` is the request event's seq."""
    [appended] = yield from append(thread_id, (event,))
    seq = appended["seq"]
    records = yield approvals(thread_id)
    for record in records:
        if record.get("approval_seq") == seq:
            return dict(record)
    raise NotFoundError(
        "not_found",
        404,
        f"the approval_request at seq {seq} opened no approval (it may have expired already)",
        {"seq": seq},
    )


def _expired(expires_at: Any) -> bool:
    """Whether an approval's `expires_at` (RFC 3339, or null) has passed."""
    if not isinstance(expires_at, str) or not expires_at:
        return False
    try:
        when = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when <= datetime.now(timezone.utc)


def wait_for_decision(
    thread_id: str, approval_id: int, timeout: float, poll_interval: float
) -> Operation[dict[str, Any]]:
    """Poll the thread's approvals until `approval_id` is decided; ApprovalTimeout when
    `timeout` seconds pass first, or at once when the request's `expires_at` has passed (an
    expired request stays `pending` but can no longer be decided)."""
    deadline = time.monotonic() + timeout
    while True:
        records = yield approvals(thread_id)
        record = next((r for r in records if r.get("id") == approval_id), None)
        if record is None:
            raise NotFoundError(
                "not_found",
                404,
                f"approval {approval_id} is not one of thread {thread_id}'s approvals",
                {"approval_id": approval_id},
            )
        if record.get("status") != "pending":
            return dict(record)
        # The server says so (`expired`, by its clock); an older server only sends expires_at.
        if record.get("expired") is True or _expired(record.get("expires_at")):
            raise ApprovalTimeout(dict(record), timeout, expired=True)
        left = deadline - time.monotonic()
        if left <= 0:
            raise ApprovalTimeout(dict(record), timeout)
        yield Sleep(min(poll_interval, left))
