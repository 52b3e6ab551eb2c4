"""`apply_retention [--workspace NAME] [--dry-run]`: apply the workspaces' retention policies
(docs/operations.md, "Retention"), what the `ctxadmin.apply_retention` beat task does on
schedule; a dry run lists what would go and the bytes it would free."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from threads.models import Workspace
from threads.services.retention import retention_apply


class Command(BaseCommand):
    help = (
        "Delete threads past their workspace's retention_days (leaving signed tombstones) and "
        "checkpoints beyond keep_checkpoints that nothing needs. --dry-run deletes nothing and "
        "lists what would go, with the bytes it would free (an estimate of the rows' size)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="one workspace (by name); every one if omitted")
        parser.add_argument("--dry-run", action="store_true", help="list, delete nothing")
        parser.add_argument(
            "--batch",
            type=int,
            default=settings.CTXADMIN_RETENTION_BATCH,
            help="threads per transaction",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["workspace"]
        if name is not None and not Workspace.objects.filter(name=name).exists():
            raise CommandError(f"no workspace {name!r}", returncode=2)
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1", returncode=2)
        dry = options["dry_run"]
        outcomes = retention_apply(workspace_name=name, dry_run=dry, batch_size=options["batch"])
        verb = "would delete" if dry else "deleted"
        for outcome in outcomes:
            summary = outcome.summary()
            for line in outcome.threads:
                self.stdout.write(
                    f"THREAD {outcome.workspace}/{line['external_id']} ({line['thread']}) "
                    f"last seq {line['last_seq']}, inactive since {line['inactive_since']}"
                )
            for line in outcome.checkpoints.threads:
                self.stdout.write(
                    f"CHECKPOINTS {outcome.workspace}/{line['external_id']} ({line['thread']}) "
                    f"{line['deleted']} of them, {line['kept']} kept"
                )
            self.stdout.write(
                f"{outcome.workspace}: {verb} {summary['threads_deleted']} thread(s) and "
                f"{summary['checkpoints_deleted']} checkpoint(s), "
                f"{summary['bytes']} bytes (estimated row size); "
                f"{outcome.checkpoints.kept_needed} checkpoint(s) beyond the limit kept as needed"
            )
        if not outcomes:
            self.stdout.write("No workspace has a retention policy.")
