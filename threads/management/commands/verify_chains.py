"""`verify_chains [--thread X] [--full]`: recompute hash chains; exit 1 if any breaks. Each
redaction the walk passes is reported as `redacted at seq N`. Without --thread, threads the
published heads name but the database no longer holds are held against their tombstones too
(docs/event-log.md, "Tombstones")."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from threads.models import Thread, Workspace
from threads.selectors.retention import DeletedThreadVerdict, deleted_threads_verdicts
from threads.services.integrity import integrity_check


class Command(BaseCommand):
    help = (
        "Verify threads' hash chains (incrementally from the last verified point unless "
        "--full). Prints OK or the first bad seq per thread; exits 1 if any chain breaks."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--thread", help="a thread's UUID or external_id (every thread if omitted)"
        )
        parser.add_argument("--workspace", help="limit to one workspace (by name)")
        parser.add_argument(
            "--full",
            action="store_true",
            help="recompute from the genesis hash, ignoring earlier verdicts",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        threads = Thread.objects.select_related("workspace").order_by(
            "workspace__name", "external_id"
        )
        if options["workspace"]:
            name = options["workspace"]
            # A misspelt name is an error, as an unknown --thread is: not "nothing to verify".
            if not Workspace.objects.filter(name=name).exists():
                raise CommandError(f"no workspace {name!r}", returncode=2)
            threads = threads.filter(workspace__name=name)
        if options["thread"]:
            wanted = options["thread"]
            by_uuid = threads.filter(pk=wanted) if _is_uuid(wanted) else threads.none()
            threads = by_uuid if by_uuid.exists() else threads.filter(external_id=wanted)
            if not threads.exists():
                # A thread deleted by retention is named by its uid: its tombstone answers.
                deleted = [
                    d
                    for d in deleted_threads_verdicts(workspace_name=options["workspace"])
                    if d.thread == wanted
                ]
                if not deleted:
                    raise CommandError(f"no thread {wanted!r}", returncode=2)
                self._deleted(deleted)
                return
        broken = 0
        for thread in threads.iterator(chunk_size=200):
            verdict = integrity_check(thread=thread, full=options["full"])
            label = f"{thread.workspace.name}/{thread.external_id} ({thread.pk})"
            if verdict.ok:
                self.stdout.write(f"OK    {label} verified through seq {verdict.verified_until}")
                # What the walk found redacted (docs/event-log.md, "Redaction").
                for note in verdict.redactions:
                    self.stdout.write(f"      {label} {note}")
            else:
                broken += 1
                self.stdout.write(
                    f"BROKEN {label} first bad seq {verdict.first_bad_seq}: {verdict.detail}"
                )
        if not options["thread"]:
            self._deleted(
                deleted_threads_verdicts(workspace_name=options["workspace"]), broken=broken
            )
        elif broken:
            raise CommandError(f"{broken} chain(s) broken", returncode=1)

    def _deleted(self, verdicts: list[DeletedThreadVerdict], broken: int = 0) -> None:
        """Report the threads the heads name that are gone; exit 1 if any chain broke."""
        for deleted in verdicts:
            label = f"{deleted.workspace}/({deleted.thread})"
            if deleted.verdict.ok:
                self.stdout.write(f"DELETED {label} {deleted.verdict.detail}")
            else:
                broken += 1
                self.stdout.write(
                    f"BROKEN {label} first bad seq {deleted.verdict.first_bad_seq}: "
                    f"{deleted.verdict.detail}"
                )
        if broken:
            raise CommandError(f"{broken} chain(s) broken", returncode=1)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
