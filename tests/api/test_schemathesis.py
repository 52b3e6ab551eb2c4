"""The served OpenAPI schema and the server agree: schemathesis generates requests from
`/api/schema/` (valid ones and ones the schema forbids) and runs every check on each answer —
no 5xx, only documented statuses, content types, headers and bodies, and the server refuses
exactly what the schema forbids (docs/api.md, "Auth and errors")."""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, assume, settings
from schemathesis.core.parameters import ParameterLocation

from ctxadmin.wsgi import application
from tests import factories
from threads.api.parsers import _parse_float as parse_float_exactly
from threads.api.parsers import _Unrepresentable as Unrepresentable

pytestmark = pytest.mark.django_db

# The schema the server serves, loaded once at collection (json round trip: lazy strings).
RAW = json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))
# A schema-valid request may still meet a refusal that depends on stored state: an unknown
# object (404), a conflict (409) or a semantic refusal such as a budget too small or a result
# without its call (422, docs/api.md, "Error shape"). Every other 4xx to a valid request is a
# failure.
CONFIG = schemathesis.Config.from_dict(
    {
        # The parser refuses NUL anywhere in a body (docs/api.md, "Auth and errors"): every declared
        # string of a request says so in its pattern, but OpenAPI 3.0 cannot say it of a free-form
        # value's keys and strings (metadata, a message's JSON form, a tool definition), so strings
        # are generated without it; tests/api/test_bad_input.py holds the server to the rule.
        "generation": {"allow-x00": False},
        "checks": {
            "positive_data_acceptance": {
                "expected-statuses": ["2XX", "3XX", "401", "403", "404", "409", "422"]
            }
        },
    }
)
schema = schemathesis.openapi.from_dict(RAW, config=CONFIG)
schema.app = application

# Bounded so that the whole run (about 45 operations, both generation modes) stays well
# under five minutes on two cores.
BOUNDED = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(autouse=True)
def _keep_the_test_connection() -> Any:
    # The WSGI handler closes the database connection after each request (Django's test
    # client does not): it would close the test's transaction under it.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def world(workspace: Any, api_key: str) -> dict[str, Any]:
    """Real objects for the path parameters of positive cases."""
    thread = factories.make_thread(workspace, external_id="fuzz-1")
    factories.append(thread, factories.user("hello"), factories.call("c1", "search"))
    return {"id": str(thread.id), "external_id": thread.external_id, "key": api_key}


def _resolve(case: Any, world: dict[str, Any]) -> None:
    if case.path_parameters is None or case.meta is None:
        return
    if case.meta.is_negative_at(ParameterLocation.PATH):
        return
    if "id" in case.path_parameters and "{id}" in case.path:
        if "/langgraph/" in case.path:
            # A LangGraph thread_id is the thread's external_id (docs/api.md,
            # "LangGraph checkpointer"), which may never be another thread's UUID.
            case.path_parameters["id"] = world["external_id"]
        elif case.path.startswith("/api/v1/threads/"):
            case.path_parameters["id"] = world["id"]


def _unrepresentable(body: Any) -> bool:
    """A number the parser refuses (docs/api.md, "Auth and errors": a fraction must name its double
    exactly), which JSON Schema cannot say for a free-form value."""
    found: list[str] = []

    def parse_float(literal: str) -> Any:
        value = parse_float_exactly(literal)
        if isinstance(value, Unrepresentable):
            found.append(literal)
        return value

    try:
        json.loads(json.dumps(body), parse_float=parse_float)
    except (TypeError, ValueError):
        return False
    return bool(found)


# Rules between values that JSON Schema cannot state, each tested by hand where it lives: for
# these operations a schema-valid request may still be refused with 400.
CROSS_FIELD_RULES = {
    # 0 < low_watermark < high_watermark <= 1 (tests/api/test_threads.py), held against the
    # thread's own settings when they change (tests/api/test_thread_settings.py)
    "POST /api/v1/threads/",
    "PATCH /api/v1/threads/{id}/",
    # each message's digest is the SHA-256 of its JSON form (tests/langgraph/)
    "POST /api/v1/threads/{id}/langgraph/checkpoints/",
    # and so in a batch of puts and writes (tests/langgraph/test_pipeline.py)
    "POST /api/v1/threads/{id}/langgraph/batch/",
    # the file is a part with a filename, which schemathesis' WSGI transport does not send for
    # a binary field; Django reads such a part as a text field (tests/api/test_imports.py)
    "POST /api/v1/imports/",
}


def _refers_to_seqs(body: Any) -> bool:
    """An annotation's refers_to must name seqs the thread already holds, a rule of the stored
    state that a schema cannot say and that answers 400 like the other event rules
    (tests/api/test_event_errors.py holds it)."""
    if not isinstance(body, dict):
        return False
    events = body["events"] if isinstance(body.get("events"), list) else [body]
    return any(isinstance(e, dict) and e.get("refers_to") for e in events)


@schema.parametrize()
@BOUNDED
def test_api_agrees_with_its_schema(case: Any, world: dict[str, Any]) -> None:
    assume(not _unrepresentable(case.body))
    _resolve(case, world)
    excluded = []
    if case.operation.label in CROSS_FIELD_RULES or _refers_to_seqs(case.body):
        excluded.append(schemathesis.checks.positive_data_acceptance)
    case.call_and_validate(
        headers={"Authorization": f"Bearer {world['key']}"}, excluded_checks=excluded
    )
