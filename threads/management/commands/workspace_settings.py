"""`workspace_settings NAME [--stall-after SECONDS]`: show a workspace's settings, or change
them (audited)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from threads.domain.errors import DomainError
from threads.models import Workspace
from threads.services.workspaces import workspace_settings_update


class Command(BaseCommand):
    help = "Show a workspace's settings; with --stall-after, change when a thread is stalled."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument(
            "--stall-after",
            type=int,
            dest="stall_after",
            help="seconds a thread may wait for its agent before its run status is stalled",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.filter(name=options["name"]).first()
        if workspace is None:
            raise CommandError(f"no workspace {options['name']!r}")
        if options["stall_after"] is not None:
            try:
                workspace = workspace_settings_update(
                    workspace=workspace,
                    actor_label="manage.py workspace_settings",
                    stall_after_seconds=options["stall_after"],
                )
            except DomainError as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(f"stall_after_seconds {workspace.stall_after_seconds}")
