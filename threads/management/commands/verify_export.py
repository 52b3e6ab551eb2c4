"""`verify_export FILE [--key K]`: check an export_thread file offline, without a database.

Recomputes the chain from the genesis hash of the thread named in the header and names the
first bad seq: a modified line (hash mismatch), a deleted, swapped or inserted line (seq out
of order or hash mismatch), or a file cut short (fewer events than the header's last_seq, or
a final hash that is not the header's chain_head). Without the chain key, a file rewritten
with a consistent forged chain (and header) passes: compare its chain_head with the one the
server reports, or verify with --key when the server uses HMAC.

A header's `published_head` (the thread's last signed head, docs/repairs.md,
"Published chain heads") is checked too: the file's chain must reach its seq with its hash, so an
export of a log cut back or recomputed in the database fails even without the chain key; with
`--heads-key heads.pub` its Ed25519 signature must verify (and the header must carry one).

Redactions (docs/event-log.md, "Redaction"): the header's records are walked as a chain (keyed
like the event chain); an event without its content is accepted only where a record that
verifies explains it, and each is reported as `redacted at seq N`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser

from threads.domain import chain
from threads.domain.heads import head_parse, public_key_id
from threads.domain.redaction import RecordFields, RecordsVerdict, verify_records
from threads.keys.chain import LEGACY_KEY_ID, chain_keys
from threads.keys.heads import public_key_load

RECORD_MEMBERS = tuple(RecordFields.__dataclass_fields__)


class Command(BaseCommand):
    help = "Verify an export_thread JSONL file offline; exit 1 naming the first bad seq."
    # Nothing here may touch the database: no system checks, no migrations check.
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument(
            "--key",
            help="the chain key when the export is HMAC-SHA256; defaults to the configured "
            "key with the header's chain_key_id (CTXADMIN_CHAIN_KEYS, or CTXADMIN_CHAIN_KEY)",
        )
        parser.add_argument("--thread", help="the thread UUID, for a file with no header")
        parser.add_argument(
            "--heads-key",
            help="the public key (heads.pub) that signs published chain heads; the header's "
            "published head must verify with it",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        if not path.exists():
            raise CommandError(f"{path} does not exist", returncode=2)
        lines = _lines(path)
        first = next(lines, None)
        header: dict[str, Any] = {}
        events: Iterator[tuple[int, Any]] = lines
        if first is not None and isinstance(first[1], dict) and "ctxadmin_export" in first[1]:
            header = first[1]
        elif first is not None:
            events = _chain_first(first, lines)
        thread_uid = options["thread"] or header.get("thread")
        if not thread_uid:
            raise CommandError(
                "the file has no header naming its thread; pass --thread", returncode=2
            )
        # By default the configured key the header's chain_key_id names ('' = k0, as in
        # threads/keys/chain.py).
        configured = chain_keys().get(header.get("chain_key_id") or LEGACY_KEY_ID)
        key_text = options["key"] or (configured.decode("utf-8") if configured else "")
        keyed = header.get("algorithm") == "hmac-sha256"
        if keyed and not key_text:
            raise CommandError("this export is HMAC-SHA256: pass --key", returncode=2)
        key = key_text.encode("utf-8") if key_text and (keyed or options["key"]) else None
        genesis = chain.genesis_hash(str(thread_uid), key)
        if header.get("genesis", {}).get("hash") not in (None, genesis):
            self._broken(1, "the genesis hash does not match the thread (or the key)")
        published = header.get("published_head")
        if options["heads_key"]:
            self._check_signature(published, Path(options["heads_key"]), str(thread_uid))
        wanted = published.get("seq") if isinstance(published, dict) else None
        seen: dict[int, str] = {}
        records = _records(header.get("redactions"), str(thread_uid), key)
        verdict = chain.verify_chain(
            _noting(_events(events), wanted, seen),
            start_hash=genesis,
            key=key,
            redactions=records.trusted,
        )
        bad_record = records.first_bad_seq
        if bad_record is not None and (verdict.ok or bad_record < (verdict.first_bad_seq or 0)):
            self._broken(bad_record, records.detail)
        if not verdict.ok:
            self._broken(verdict.first_bad_seq, verdict.detail)
        if isinstance(published, dict) and isinstance(wanted, int):
            if verdict.verified_until < wanted:
                self._broken(
                    verdict.verified_until + 1,
                    f"the file ends at seq {verdict.verified_until}; seq {wanted} was published",
                )
            if seen.get(wanted) != published.get("chain_head"):
                self._broken(wanted, f"the chain hash at seq {wanted} is not the published head")
        last_seq = header.get("last_seq")
        if last_seq is not None and verdict.verified_until < last_seq:
            self._broken(
                verdict.verified_until + 1,
                f"the file ends at seq {verdict.verified_until}; the header says {last_seq}",
            )
        if last_seq is not None and verdict.verified_until > last_seq:
            self._broken(last_seq + 1, f"events after the header's last_seq {last_seq}")
        if header.get("chain_head") not in (None, verdict.head):
            self._broken(verdict.verified_until, "the last hash is not the header's chain_head")
        self.stdout.write(
            f"OK {verdict.verified_until} events verified; chain head {verdict.head}"
            + ("" if key else " (SHA-256: compare the head with the server's)")
        )
        for note in verdict.redactions:
            self.stdout.write(note)

    def _check_signature(self, published: Any, key_path: Path, thread_uid: str) -> None:
        if not key_path.exists():
            raise CommandError(f"{key_path} does not exist", returncode=2)
        try:
            public = public_key_load(key_path)
        except ValueError as error:
            raise CommandError(str(error), returncode=2) from error
        if not isinstance(published, dict):
            self._broken(1, "the header carries no published head to check with --heads-key")
        head, reason = head_parse(published, {public_key_id(public): public})
        if head is None:
            self._broken(published.get("seq"), f"the published head: {reason}")
        elif head.thread != thread_uid:
            self._broken(head.seq, "the published head names another thread")

    def _broken(self, seq: int | None, detail: str) -> NoReturn:
        self.stdout.write(f"BROKEN first bad seq {seq}: {detail}")
        raise CommandError(f"chain broken at seq {seq}", returncode=1)


def _records(listed: Any, thread_uid: str, key: bytes | None) -> RecordsVerdict:
    """The header's redaction records walked as their chain; a malformed one breaks it there."""
    fields = []
    for number, item in enumerate(listed if isinstance(listed, list) else [], start=1):
        try:
            body = {name: item[name] for name in RECORD_MEMBERS}
            fields.append((RecordFields(**body), str(item["record_hash"])))
        except (KeyError, TypeError):
            seq = item.get("seq") if isinstance(item, dict) else None
            return RecordsVerdict(
                {},
                seq if isinstance(seq, int) else 1,
                "",
                f"redaction record {number} is malformed",
            )
    return verify_records(fields, thread_uid=thread_uid, key=key)


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError:
                yield number, None


def _chain_first(first: tuple[int, Any], rest: Iterator[tuple[int, Any]]) -> Iterator[Any]:
    yield first
    yield from rest


def _noting(
    events: Iterator[dict[str, Any]], seq: int | None, seen: dict[int, str]
) -> Iterator[dict[str, Any]]:
    """Pass events through, keeping the stored hash at `seq` (the walk vouches for it)."""
    for event in events:
        if event.get("seq") == seq:
            seen[event["seq"]] = event["hash"]
        yield event


def _events(lines: Iterator[tuple[int, Any]]) -> Iterator[dict[str, Any]]:
    expected = 1
    for _number, value in lines:
        if isinstance(value, dict) and isinstance(value.get("seq"), int) and "hash" in value:
            expected = value["seq"] + 1
            yield value
        else:
            # A line that is not an event breaks the chain where it stands: it takes the seq it
            # displaced, with a hash that can never match.
            yield {"seq": expected, "hash": "", "kind": "unreadable"}
            expected += 1
