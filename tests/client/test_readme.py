"""The README's example, run verbatim against a live server: it creates the thread, stores the
three events, and answers a working context holding them."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from tests.client.conftest import Server
from threads.models import Event, Thread

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = re.compile(r"<!-- example:start -->\n```python\n(.*?)```\n<!-- example:end -->", re.S)


def example_code(path: Path) -> str:
    found = EXAMPLE.findall(path.read_text(encoding="utf-8"))
    assert len(found) == 1, f"{path}: one example between the markers"
    return str(found[0])


@pytest.mark.parametrize("copy", ["README.md", "docs/clients.md"])
def test_docs_carry_the_same_example(copy: str) -> None:
    assert example_code(ROOT / copy) == example_code(ROOT / "clients" / "python" / "README.md")


def test_readme_example_runs_as_is(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    code = example_code(ROOT / "clients" / "python" / "README.md")
    monkeypatch.setenv("CTXADMIN_URL", server.url)
    monkeypatch.setenv("CTXADMIN_API_KEY", server.api_key)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md example", "exec"), {"__name__": "__readme__"})

    thread = Thread.objects.get(workspace=server.workspace, external_id="order-10086")
    assert thread.title == "Refund a late order"
    assert thread.context_window == 16000
    kinds = list(Event.objects.filter(thread=thread).order_by("seq").values_list("kind", "seq"))
    assert kinds == [("message", 1), ("tool_call", 2), ("tool_result", 3)]
    assert out.getvalue().startswith("3 events,")
    assert "tokens used" in out.getvalue()

    # Runnable again: the same thread, three more events.
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, "README.md example", "exec"), {"__name__": "__readme__"})
    assert Event.objects.filter(thread=thread).count() == 6
    assert Thread.objects.filter(external_id="order-10086").count() == 1
