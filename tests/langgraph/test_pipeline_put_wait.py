"""The saver's queue (ctxadmin_client._langgraph_pipeline): a write LangGraph's loop made under
`"async"` waits at the queue's head for its checkpoint's put, sent before it in one request;
a put that never comes holds it PUT_WAIT_S at most, and says so."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from ctxadmin_client import _langgraph_pipeline as pipeline_module
from ctxadmin_client._langgraph_pipeline import Pending, Pipeline


def _item(kind: str, checkpoint_id: str, *, put_follows: bool = False) -> Pending:
    def never() -> Any:  # the fake sender below never makes the operation
        raise AssertionError("not sent through the API here")

    return Pending("t-1", kind, checkpoint_id, never, put_follows=put_follows)


def _recording() -> tuple[list[list[tuple[str, str]]], Any]:
    sent: list[list[tuple[str, str]]] = []

    def send(thread_id: str, items: list[Pending]) -> None:
        sent.append([(item.kind, item.checkpoint_id) for item in items])

    return sent, send


def test_a_write_waits_for_its_put_and_goes_after_it_in_one_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent, send = _recording()
    queue = Pipeline(send, stored=lambda thread_id, checkpoint_id: False)
    queue.submit(_item("writes", "c2", put_follows=True))
    # The put comes from another thread a moment later, as LangGraph's executor sends it.
    later = threading.Timer(0.05, lambda: queue.submit(_item("put", "c2")))
    later.start()
    with caplog.at_level(logging.WARNING, logger="ctxadmin_client.langgraph"):
        queue.flush(5)
    later.join()
    queue.close()
    assert sent == [[("put", "c2"), ("writes", "c2")]]
    assert "did not come" not in caplog.text


def test_a_put_that_never_comes_holds_the_write_put_wait_s_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(pipeline_module, "PUT_WAIT_S", 0.2)
    sent, send = _recording()
    queue = Pipeline(send, stored=lambda thread_id, checkpoint_id: False)
    with caplog.at_level(logging.WARNING, logger="ctxadmin_client.langgraph"):
        queue.submit(_item("writes", "c7", put_follows=True))
        queue.flush(5)
    queue.close()
    assert sent == [[("writes", "c7")]]
    assert "waited 0.2 s for the put of checkpoint c7, which did not come" in caplog.text
