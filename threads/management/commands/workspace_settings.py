"""`workspace_settings NAME [--stall-after SECONDS] [--redact-secrets-at-ingest on|off]`: show a
workspace's settings, or change them (audited)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from threads.domain.errors import DomainError
from threads.models import Workspace
from threads.services.workspaces import workspace_settings_update


class Command(BaseCommand):
    help = "Show a workspace's settings; change those given (audited)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument(
            "--stall-after",
            type=int,
            dest="stall_after",
            help="seconds a thread may wait for its agent before its run status is stalled",
        )
        parser.add_argument(
            "--redact-secrets-at-ingest",
            choices=["on", "off"],
            dest="redact_secrets",
            help="on: the secrets found in an event are taken out before it is stored",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.filter(name=options["name"]).first()
        if workspace is None:
            raise CommandError(f"no workspace {options['name']!r}")
        redact = options["redact_secrets"]
        if options["stall_after"] is not None or redact is not None:
            try:
                workspace = workspace_settings_update(
                    workspace=workspace,
                    actor_label="manage.py workspace_settings",
                    stall_after_seconds=options["stall_after"],
                    redact_secrets_at_ingest=None if redact is None else redact == "on",
                )
            except DomainError as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(f"stall_after_seconds {workspace.stall_after_seconds}")
        self.stdout.write(
            "redact_secrets_at_ingest " + ("on" if workspace.redact_secrets_at_ingest else "off")
        )
