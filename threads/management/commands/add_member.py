"""`add_member WORKSPACE USERNAME ROLE --password P`: create or update a person and their role.

The password is held to AUTH_PASSWORD_VALIDATORS. Without one, a new person cannot sign in
until it is set (the output says so); an existing person keeps theirs."""

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
        parser.add_argument(
            "--password",
            help="set (or reset) the person's password, held to AUTH_PASSWORD_VALIDATORS; "
            "without it a new person cannot sign in until one is set",
        )

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
        if not user.has_usable_password():
            self.stdout.write(
                f"{user.get_username()} has no password and cannot sign in: set one with "
                f"add_member {workspace.name} {user.get_username()} {options['role']} "
                "--password P."
            )
