"""`recover [--older-than SECONDS]`: decide prepared summary versions whose worker died.

Each one is re-verified and committed by compare-and-swap when the head is still the one it
was built on and every check passes, discarded when the head moved, rejected when a check
fails (docs/pipeline.md, "Recovery"). The same sweep runs every minute as the
`ctxadmin.recover_prepared` task.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from threads.services.fold_recovery import recover_prepared


class Command(BaseCommand):
    help = (
        "Re-verify prepared summary versions older than the timeout and commit them (if still "
        "on the head they were built on and valid) or discard them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            default=None,
            metavar="SECONDS",
            help="only versions prepared at least this long ago (default: "
            "CTXADMIN_PREPARED_TIMEOUT)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        seconds = options["older_than"]
        older_than = (
            settings.CTXADMIN_PREPARED_TIMEOUT if seconds is None else timedelta(seconds=seconds)
        )
        decided = recover_prepared(older_than=older_than)
        for version in decided:
            self.stdout.write(f"{version.thread_id} v{version.version}: {version.phase}")
        self.stdout.write(f"{len(decided)} prepared version(s) decided")
