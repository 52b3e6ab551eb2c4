"""AsyncClient against a live server: the same operations as Client, awaited."""

from __future__ import annotations

import pytest
from ctxadmin_client import AsyncClient, AsyncThread, ConflictError, NotFoundError

from tests.client.conftest import Server


@pytest.mark.asyncio
async def test_async_thread_append_context_and_pages(server: Server) -> None:
    async with AsyncClient(server.url, server.api_key) as client:
        thread = await client.thread("async-1", context_window=12000)
        assert isinstance(thread, AsyncThread)
        assert (await client.thread("async-1")).id == thread.id
        assert (await client.get_thread("async-1")).id == thread.id

        sent = [{"kind": "message", "role": "user", "content": f"m{i}"} for i in range(1003)]
        answers = await thread.append(*sent)
        assert [a["seq"] for a in answers] == list(range(1, 1004))
        assert (await thread.refresh())["last_seq"] == 1003

        seqs = [e["seq"] async for e in thread.events()]
        assert seqs == list(range(1, 1004))
        paged = [e["client_event_id"] async for e in thread.events(after=900, page_size=25)]
        assert paged == [e["client_event_id"] for e in sent[900:]]

        context = await thread.context(window=3000, reserved_output=100)
        assert context["budget"]["window"] == 3000
        assert context["read_until"] == 1003 and context["trimmed_units"]
        assert "chain_ok" in await thread.integrity()

        [replay] = await thread.append(sent[0])
        assert replay["replayed"] is True and replay["seq"] == 1
        with pytest.raises(ConflictError):
            await thread.append({**sent[1], "content": "changed"})
        with pytest.raises(NotFoundError):
            await client.get_thread("missing")
