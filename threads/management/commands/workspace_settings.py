"""`workspace_settings NAME [--stall-after SECONDS] [--redaction-needs-second-admin on|off]
[--redact-secrets-at-ingest on|off] [--retention-days N|none] [--keep-checkpoints K|none]`: show
a workspace's settings, or change them (audited)."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from threads.domain.errors import DomainError
from threads.models import Workspace
from threads.services.retention import workspace_retention_update
from threads.services.workspaces import workspace_settings_update


def _count_or_none(value: str) -> int | None:
    """A retention setting's value: a whole number, or `none` (keep everything)."""
    return None if value.strip().lower() == "none" else int(value)


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
            "--redaction-needs-second-admin",
            choices=("on", "off"),
            dest="second_admin",
            help="on: a redaction waits for another admin's approval in the approval queue",
        )
        parser.add_argument(
            "--redact-secrets-at-ingest",
            choices=("on", "off"),
            dest="redact_secrets",
            help="on: the secrets found in an event are taken out before it is stored",
        )
        parser.add_argument(
            "--retention-days",
            type=_count_or_none,
            default=argparse.SUPPRESS,
            dest="retention_days",
            help="delete threads inactive this many days (none: keep forever)",
        )
        parser.add_argument(
            "--keep-checkpoints",
            type=_count_or_none,
            default=argparse.SUPPRESS,
            dest="keep_checkpoints",
            help="keep the latest K checkpoints per thread, and those still needed (none: all)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.filter(name=options["name"]).first()
        if workspace is None:
            raise CommandError(f"no workspace {options['name']!r}")
        second_admin = options["second_admin"]
        redact = options["redact_secrets"]
        if any(v is not None for v in (options["stall_after"], second_admin, redact)):
            try:
                workspace = workspace_settings_update(
                    workspace=workspace,
                    actor_label="manage.py workspace_settings",
                    stall_after_seconds=options["stall_after"],
                    redaction_needs_second_admin=None
                    if second_admin is None
                    else second_admin == "on",
                    redact_secrets_at_ingest=None if redact is None else redact == "on",
                )
            except DomainError as exc:
                raise CommandError(str(exc)) from None
        retention = {
            name: options[name]
            for name in ("retention_days", "keep_checkpoints")
            if name in options
        }
        if retention:
            try:
                workspace = workspace_retention_update(
                    workspace=workspace, actor_label="manage.py workspace_settings", **retention
                )
            except DomainError as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(f"stall_after_seconds {workspace.stall_after_seconds}")
        second = "on" if workspace.redaction_needs_second_admin else "off"
        self.stdout.write(f"redaction_needs_second_admin {second}")
        self.stdout.write(
            "redact_secrets_at_ingest " + ("on" if workspace.redact_secrets_at_ingest else "off")
        )
        for name in ("retention_days", "keep_checkpoints"):
            value = getattr(workspace, name)
            self.stdout.write(f"{name} {'none' if value is None else value}")
