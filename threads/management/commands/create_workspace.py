"""`create_workspace NAME`: a workspace and its first agent API key, printed once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from threads.models import Workspace
from threads.services.workspaces import workspace_create


class Command(BaseCommand):
    help = "Create a workspace and print its new API key alone on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"]
        if Workspace.objects.filter(name=name).exists():
            raise CommandError(f"workspace {name!r} already exists")
        workspace, secret = workspace_create(name=name)
        self.stdout.write(f"Created workspace {workspace.name!r} (id {workspace.pk}).")
        self.stdout.write("Its API key (shown once; agents send it as `Authorization: Bearer`):")
        self.stdout.write(secret)
