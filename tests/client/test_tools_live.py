"""`Thread.set_tools` / `Thread.tools` of both clients against a live server (docs/api.md,
"Tool definitions — `PUT` and `GET /api/v1/threads/{id}/tools/`"): the set is stored, counted, read
back, and counted in the working context's budget."""

from __future__ import annotations

import pytest
from ctxadmin_client import AsyncClient, Client, ValidationError

from tests.client.conftest import CountingTransport, Server

TOOLS = [
    {"type": "function", "function": {"name": "get_order", "parameters": {"type": "object"}}},
    {"name": "refund", "description": "Refund an order", "input_schema": {"type": "object"}},
]


def test_set_tools_and_read_them_back(server: Server, counting: CountingTransport) -> None:
    with Client(server.url, server.api_key, transport=counting) as client:
        thread = client.thread("tools-1")
        thread.append({"kind": "message", "role": "user", "content": "hello"})
        stored = thread.set_tools(TOOLS)
        assert stored["changed"] is True and [t["name"] for t in stored["tools"]] == [
            "get_order",
            "refund",
        ]
        assert stored["token_total"] == sum(t["token_count"] for t in stored["tools"]) > 0
        assert thread.set_tools(TOOLS)["changed"] is False
        read = thread.tools()
        assert read["tools"] == stored["tools"] and read["count"] == 2
        budget = thread.context()["budget"]
        assert budget["fixed"] == budget["sections"]["tools"] == stored["token_total"]
        with pytest.raises(ValidationError) as caught:
            thread.set_tools([{"description": "no name"}])
        assert "tools[0]" in caught.value.fields
    puts = [r for r in counting.requests if r[0] == "PUT"]
    assert puts == [("PUT", f"/api/v1/threads/{thread.id}/tools/")] * 3


@pytest.mark.asyncio
async def test_async_set_tools_and_read_them_back(server: Server) -> None:
    async with AsyncClient(server.url, server.api_key) as client:
        thread = await client.thread("tools-2")
        stored = await thread.set_tools(TOOLS)
        assert stored["changed"] is True and stored["count"] == 2
        assert (await thread.tools())["tools"] == stored["tools"]
        assert (await thread.set_tools([]))["token_total"] == 0
