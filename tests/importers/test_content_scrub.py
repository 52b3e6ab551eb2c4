"""A redacted event's content leaves the upload that imported it (docs/repairs.md, "Redaction
beside the event"): the file stays one the importer reads, with the placeholder in its place."""

from __future__ import annotations

import gzip
import hashlib
import json
from typing import Any

import pytest
from django.db import transaction

from integrations.trace_imports.models import TraceImport
from integrations.trace_imports.readers.common import read_bytes
from integrations.trace_imports.services.uploads import import_run, import_start
from tests.support_secret_scan import find_everywhere, sqlite_search_tables
from threads.models import Thread, Workspace
from threads.services.content_scrub import content_scrub

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]

SECRET = "ghp_PINEAPPLEcafé0123456789abcdef"
TEXT = f'deploy with "{SECRET}" tonight'


def _imported(workspace: Workspace) -> TraceImport:
    workspace.agents_may_import = True
    workspace.save(update_fields=["agents_may_import"])
    conversations: list[dict[str, Any]] = [
        {"id": "a", "messages": [{"role": "user", "content": TEXT}]},
        {"id": "b", "messages": [{"role": "user", "content": "nothing to hide"}]},
    ]
    trace_import = import_start(
        workspace=workspace,
        actor=None,
        actor_label="test",
        fmt="openai-chat",
        file_name="f.json.gz",
        content=gzip.compress(json.dumps(conversations).encode()),
    )
    assert import_run(import_id=str(trace_import.pk))["created"] == 2
    trace_import.refresh_from_db()
    return trace_import


def test_the_upload_loses_the_content_and_still_reads(workspace: Workspace) -> None:
    trace_import = _imported(workspace)
    thread = Thread.objects.get(workspace=workspace, external_id="a")
    skip = ["threads_event", *sqlite_search_tables()]
    before = find_everywhere(SECRET, skip_tables=skip)
    assert ("threads_traceimport", "content", 1) in before, before

    with transaction.atomic():
        counts = content_scrub(thread=thread, seq=1, needles=[TEXT, SECRET], placeholder="[x]")

    assert counts["trace_imports"] == 1
    assert find_everywhere(SECRET, skip_tables=skip) == []
    assert counts["threads"] == 1  # its title was the first user words
    trace_import.refresh_from_db()
    data = bytes(trace_import.content)
    assert (trace_import.size, trace_import.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    read = read_bytes(data, where="upload")
    assert [c["messages"][0]["content"] for c in read] == ["[x]", "nothing to hide"]


def test_an_upload_that_did_not_write_to_the_thread_is_left(workspace: Workspace) -> None:
    trace_import = _imported(workspace)
    other = Thread.objects.create(workspace=workspace, external_id="elsewhere", chain_head="0")
    with transaction.atomic():
        counts = content_scrub(thread=other, seq=1, needles=[TEXT, SECRET], placeholder="[x]")
    assert counts["trace_imports"] == 0
    assert bytes(TraceImport.objects.get(pk=trace_import.pk).content) == bytes(trace_import.content)
