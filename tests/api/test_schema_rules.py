"""The OpenAPI schema says what the server enforces (docs/api.md, "Codes"), case by case: a body the
served schema forbids — a NUL in a string, a watermark of 0, a LangGraph write with both bytes
and messages, a checkpoint_id its URL cannot reach — is one the server refuses, and a body it
allows is one the server takes. tests/api/test_schemathesis.py runs the same agreement over
generated cases; these are the cases the second attack pass named, on the production settings."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

SCHEMA = json.loads(
    json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str)
)
GOOD_ID = "1f0c4a2e-6a1b-6d2c-8000-4f1a2b3c4d5e"


def _nullable_to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0's `nullable` and boolean `exclusiveMinimum` as JSON Schema draft 4 says them."""
    if isinstance(node, list):
        return [_nullable_to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable_to_json_schema(v) for k, v in node.items()}
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def allowed(component: str, body: Any) -> bool:
    document = _nullable_to_json_schema(
        {"$ref": f"#/components/schemas/{component}", "components": SCHEMA["components"]}
    )
    return jsonschema.Draft4Validator(document).is_valid(body)


@pytest.fixture(autouse=True)
def production(settings: Any) -> None:
    settings.DEBUG = False


def _status(answer: Any) -> int:
    return int(answer.status_code)


@pytest.mark.parametrize(
    ("body", "ok"),
    [
        ({"external_id": "t-1"}, True),
        ({"external_id": "t-1", "low_watermark": 0.5, "high_watermark": 0.8}, True),
        ({"external_id": "t-1", "low_watermark": 0}, False),
        ({"external_id": "t-1", "high_watermark": 0}, False),
        ({"external_id": "t\x00-1"}, False),
        ({"external_id": "t-1", "title": "a\x00b"}, False),
    ],
)
def test_a_thread_create_the_schema_forbids_is_refused(
    agent: APIClient, body: dict[str, Any], ok: bool
) -> None:
    assert allowed("ThreadCreateInput", body) is ok
    answer = agent.post("/api/v1/threads/", body, format="json")
    assert (_status(answer) == 201) is ok, answer.content
    if not ok:
        assert _status(answer) == 400


WRITE = {"idx": 0, "channel": "x"}
MESSAGE = {"id": "m1", "digest": "0" * 64, "message": {"type": "human", "data": {}}}


@pytest.mark.parametrize(
    ("write", "ok"),
    [
        ({**WRITE, "type": "json", "data": "e30="}, True),
        ({**WRITE}, False),
        ({**WRITE, "type": "json"}, False),
        ({**WRITE, "type": "json", "data": "e30=", "messages": [MESSAGE]}, False),
        ({**WRITE, "messages": [{**MESSAGE, "message": None}]}, False),
    ],
)
def test_a_langgraph_write_the_schema_forbids_is_refused(
    agent: APIClient, write: dict[str, Any], ok: bool
) -> None:
    body = {"checkpoint_id": GOOD_ID, "task_id": "t1", "writes": [write]}
    assert allowed("LanggraphWritesInput", body) is ok
    answer = agent.post("/api/v1/threads/lg-schema/langgraph/writes/", body, format="json")
    assert _status(answer) == (204 if ok else 400), answer.content


@pytest.mark.parametrize(
    ("checkpoint_id", "ok"),
    [(GOOD_ID, True), ("latest", False), ("a/b", False), ("..", False), (".", False)],
)
def test_a_checkpoint_id_the_schema_forbids_is_refused(
    agent: APIClient, checkpoint_id: str, ok: bool
) -> None:
    body = {
        "checkpoint_id": checkpoint_id,
        "checkpoint": {"v": 4, "id": checkpoint_id, "channel_versions": {}},
    }
    assert allowed("LanggraphPutInput", body) is ok
    answer = agent.post("/api/v1/threads/lg-schema/langgraph/checkpoints/", body, format="json")
    assert _status(answer) == (201 if ok else 400), answer.content
