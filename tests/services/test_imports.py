"""import_run (docs/imports.md, "Imports of recorded traces"): a redelivered import resumes after
its last recorded line and appends nothing twice; a finished one is not run again; a conversation
refused by the append path in a later batch keeps the batches before it and says so."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from integrations.trace_imports.models import ImportState, TraceImport
from integrations.trace_imports.services.conversations import BATCH_SIZE
from integrations.trace_imports.services.uploads import import_run, import_start
from threads.models import AuditEntry, Event, Thread, Workspace

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]


@pytest.fixture(autouse=True)
def agents_may_import(workspace: Workspace) -> None:
    """These tests start imports as an agent: the workspace allows it (off by default)."""
    workspace.agents_may_import = True
    workspace.save(update_fields=["agents_may_import"])


def chat(id: str, *texts: str) -> dict[str, Any]:
    return {"id": id, "messages": [{"role": "user", "content": t} for t in texts]}


def started(workspace: Workspace, conversations: list[Any], fmt: str = "openai-chat") -> Any:
    # Not run: these tests run the task's service themselves.
    return import_start(
        workspace=workspace,
        actor=None,
        actor_label="test",
        fmt=fmt,
        file_name="f.json",
        content=json.dumps(conversations).encode(),
    )


def test_a_redelivered_import_resumes_after_its_last_line(workspace: Workspace) -> None:
    trace_import = started(workspace, [chat("a", "1"), chat("b", "1", "2"), chat("c", "1")])
    progress: list[tuple[int, int]] = []
    first = import_run(import_id=trace_import.pk, progress=lambda *p: progress.append(p))
    assert first["created"] == 3 and progress[-1] == (3, 3)
    events = Event.objects.count()
    # As a worker that died after recording line 0 left it (line 1's thread exists already).
    TraceImport.objects.filter(pk=trace_import.pk).update(
        state=ImportState.RUNNING,
        report=trace_import_report(trace_import)[:1],
        conversations_done=1,
        created_count=1,
        events_appended=1,
        finished_at=None,
    )
    progress.clear()
    again = import_run(import_id=trace_import.pk, progress=lambda *p: progress.append(p))
    assert progress[0] == (1, 3) and progress[-1] == (3, 3)
    assert (again["created"], again["skipped"], again["events_appended"]) == (1, 2, 1)
    assert Event.objects.count() == events
    lines = trace_import_report(trace_import)
    assert [(line["index"], line["outcome"]) for line in lines] == [
        (0, "created"),
        (1, "skipped"),
        (2, "skipped"),
    ]


def trace_import_report(trace_import: Any) -> list[dict[str, Any]]:
    return TraceImport.objects.get(pk=trace_import.pk).report


def test_a_finished_import_is_not_run_again(workspace: Workspace) -> None:
    trace_import = started(workspace, [chat("a", "1")])
    answer = import_run(import_id=trace_import.pk)
    audits = AuditEntry.objects.count()
    assert import_run(import_id=trace_import.pk) == answer
    assert AuditEntry.objects.count() == audits  # nothing done, nothing audited


def test_a_refusal_in_a_later_batch_keeps_the_batches_before(workspace: Workspace) -> None:
    events = [{"kind": "message", "role": "user", "content": f"m{n}"} for n in range(BATCH_SIZE)]
    # The same client_event_id as event 3 with another body: the append path refuses it (409).
    events.append(
        {"kind": "message", "role": "user", "content": "other", "client_event_id": "import-3"}
    )
    trace_import = started(
        workspace,
        [{"id": "long", "messages": events}, {"id": "fine", "messages": events[:1]}],
        fmt="jsonl",
    )
    answer = import_run(import_id=trace_import.pk)
    assert (answer["state"], answer["refused"], answer["created"]) == ("succeeded", 1, 1)
    long_line, fine_line = trace_import_report(trace_import)
    thread = Thread.objects.get(external_id="long")
    assert long_line["outcome"] == "refused" and long_line["thread"] == str(thread.pk)
    assert (long_line["appended"], long_line["events"]) == (BATCH_SIZE, BATCH_SIZE + 1)
    assert long_line["reason"].startswith(f"events {BATCH_SIZE}-{BATCH_SIZE}: ")
    assert thread.last_seq == BATCH_SIZE and fine_line["outcome"] == "created"
    assert answer["events_appended"] == BATCH_SIZE + 1


def test_the_command_names_a_refused_conversation_and_imports_the_others(
    workspace: Workspace, tmp_path: Any
) -> None:
    path = tmp_path / "chats.json"
    path.write_text(json.dumps([chat("a", "1"), {"id": "b"}, chat("c", "1")]))
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match=r"1 of 3 conversations refused.*conversation 1"):
        call_command(
            "import_trace",
            str(path),
            "--format",
            "openai-chat",
            "--workspace",
            workspace.name,
            stdout=out,
            stderr=err,
        )
    assert "Imported 2 conversations (2 new events)" in out.getvalue()
    assert "refused conversation 1: conversation 1: no `messages`" in err.getvalue()
    assert set(Thread.objects.values_list("external_id", flat=True)) == {"a", "c"}
