"""`add_member WORKSPACE USERNAME ROLE --password P`: create or update a person and their role."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from threads.domain.errors import DomainError
from threads.models import Role, Workspace
from threads.services.workspaces import member_add


class Command(BaseCommand):
    help = "Create or update a person and give them a role (operator, reviewer, admin)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workspace")
        parser.add_argument("username")
        parser.add_argument("role", choices=Role.values)
        parser.add_argument("--password", help="set (or reset) the person's password")

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.filter(name=options["workspace"]).first()
        if workspace is None:
            raise CommandError(f"no workspace named {options['workspace']!r}")
        try:
            user = member_add(
                workspace=workspace,
                username=options["username"],
                role=options["role"],
                password=options["password"],
            )
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"{user.get_username()} is {options['role']} in {workspace.name}.")
