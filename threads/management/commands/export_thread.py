"""`export_thread ID FILE`: a thread's log as JSONL that anyone can re-verify offline.

Line 1 is a header object:
    {"ctxadmin_export": 1, "thread": "<uuid>", "external_id", "workspace", "last_seq",
     "chain_head", "algorithm": "sha256" | "hmac-sha256", "chain_key_id",
     "genesis": {"input": "ctxadmin/v1/<uuid>", "hash": "<h_0>"},
     "published_head": the thread's last signed heads line (docs/repairs.md,
     "Published chain heads") | null}
Every further line is one event in seq order: exactly the object the chain covers (docs/api.md,
"Canonical forms and checksums": `seq`, `kind`, `created_at`, `client_event_id`, `metadata` and the
kind's own fields) plus its `hash`, and for an event appended since salted digests (chain v2,
docs/event-log.md, "Hash chain and canonical JSON") its `content_salt` and `content_digest`. A
redacted event (docs/event-log.md, "Redaction") is written as it now reads: its placeholder, its
digest, no salt; the header's `redactions` lists the thread's redaction records with their
`record_hash` (export version 2). To re-verify (SHA-256; with a chain key, HMAC-SHA256 keyed
by it):

    h = sha256(b"ctxadmin/v1/" + thread.encode()).hexdigest()
    for event in events:
        if "content_digest" in event:        # v2: the link commits to the digest
            if "content_salt" in event:      # else: redacted, explained by its record
                body = {"data": <the kind's fields>, "metadata": event["metadata"]}
                assert sha256(bytes.fromhex(event["content_salt"]) + canonical(body))
                    .hexdigest() == event["content_digest"]
            form = {"v": 2, "seq", "kind", "created_at", "client_event_id", "content_digest"}
        else:                                # v1: the event itself
            form = {k: v for k, v in event.items() if k != "hash"}
        h = sha256(h.encode() + canonical(form)).hexdigest()
        assert h == event["hash"], event["seq"]
    assert h == header["chain_head"]

`verify_export FILE [--heads-key heads.pub]` does the same without a database, and checks that
the file's chain reaches the published head and that its signature verifies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from threads.domain.canonical import canonical_json
from threads.keys.chain import ChainKeyUnknown, thread_genesis, thread_key
from threads.models import Thread
from threads.selectors.published_heads import thread_last_published_head
from threads.selectors.redactions import record_export, thread_redactions
from threads.services.integrity import stored_events

# 2: chain v2's salt and digest on events, the redaction records in the header.
EXPORT_VERSION = 2


def export_header(thread: Thread, *, last_seq: int, chain_head: str) -> dict[str, Any]:
    try:
        key = thread_key(thread)
    except ChainKeyUnknown as unknown:
        raise CommandError(unknown.message) from unknown
    genesis_input = f"ctxadmin/v1/{thread.pk}"
    published = thread_last_published_head(thread_id=thread.pk)
    return {
        "ctxadmin_export": EXPORT_VERSION,
        "thread": str(thread.pk),
        "external_id": thread.external_id,
        "workspace": thread.workspace.name,
        "last_seq": last_seq,
        "chain_head": chain_head,
        "algorithm": "hmac-sha256" if key else "sha256",
        "chain_key_id": thread.chain_key_id,
        "genesis": {"input": genesis_input, "hash": thread_genesis(thread.pk, thread.chain_key_id)},
        "published_head": published.line() if published is not None else None,
        "redactions": [record_export(r) for r in thread_redactions(thread_id=thread.pk)],
    }


class Command(BaseCommand):
    help = (
        "Write a thread's events as JSONL: a header line, then each event's stored form "
        "with its hash, in seq order."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("thread", help="the thread's UUID or external_id")
        parser.add_argument("file", help="where to write the JSONL ('-' for standard output)")
        parser.add_argument("--workspace", help="the workspace, when external_ids repeat")

    def handle(self, *args: Any, **options: Any) -> None:
        thread = _find_thread(options["thread"], options["workspace"])
        # The log's head as of now; events appended later are left for the next export.
        head = Thread.objects.values("last_seq", "chain_head").get(pk=thread.pk)
        header = export_header(thread, last_seq=head["last_seq"], chain_head=head["chain_head"])
        target = options["file"]
        out = self.stdout if target == "-" else Path(target).open("w", encoding="utf-8")
        try:
            out.write(json.dumps(header, ensure_ascii=False) + "\n")
            count = 0
            for event in stored_events(thread_id=thread.pk, until=head["last_seq"]):
                # Absent fields are omitted, as in the chain's canonical form.
                line = {k: v for k, v in event.items() if v is not None}
                out.write(canonical_json(line).decode("utf-8") + "\n")
                count += 1
        finally:
            if target != "-":
                out.close()
        if target != "-":
            self.stdout.write(f"Exported {count} events of {thread.external_id} to {target}.")


def _find_thread(wanted: str, workspace: str | None) -> Thread:
    import uuid

    threads = Thread.objects.select_related("workspace")
    if workspace:
        threads = threads.filter(workspace__name=workspace)
    try:
        found = threads.filter(pk=uuid.UUID(wanted)).first()
    except ValueError:
        found = None
    if found is None:
        matches = list(threads.filter(external_id=wanted)[:2])
        if len(matches) > 1:
            raise CommandError(f"{wanted!r} names threads in several workspaces; add --workspace")
        found = matches[0] if matches else None
    if found is None:
        raise CommandError(f"no thread {wanted!r}")
    return found
