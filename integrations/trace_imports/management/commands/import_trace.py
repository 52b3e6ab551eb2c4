"""`import_trace FILE --format F --workspace NAME`: recorded agent traces as threads."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from integrations.trace_imports.models import ImportOutcome
from integrations.trace_imports.readers import (
    DEFAULT_SIDE_EFFECT_TOOLS,
    FORMATS,
    ImportFormatError,
    read_conversations,
    side_effect_tools_option,
)
from integrations.trace_imports.services.conversations import (
    ConversationReport,
    conversations_import,
)
from threads.domain.errors import DomainError
from threads.models import Workspace


class Command(BaseCommand):
    help = (
        "Import a JSON array or JSONL of conversations (OpenAI chat, OpenAI Responses, "
        "Anthropic, ctxadmin event JSONL) or a LangGraph PostgreSQL store (FILE is its DSN). "
        "One thread per conversation; importing again appends nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "file", help="a .json/.jsonl(.gz) file, or a PostgreSQL DSN for langgraph-postgres"
        )
        parser.add_argument("--format", required=True, choices=sorted(FORMATS))
        parser.add_argument("--workspace", required=True)
        parser.add_argument(
            "--side-effect-tools",
            help="comma-separated tool names whose calls are side effects (idempotency key "
            "derived from the thread and the tool_call_id); 'none' for no tool; default: "
            + ",".join(sorted(DEFAULT_SIDE_EFFECT_TOOLS)),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.filter(name=options["workspace"]).first()
        if workspace is None:
            raise CommandError(f"no workspace named {options['workspace']!r}")
        side_effect_tools = side_effect_tools_option(options["side_effect_tools"])
        refused: list[ConversationReport] = []

        def report(line: ConversationReport) -> None:
            if line.outcome == ImportOutcome.REFUSED:
                refused.append(line)

        try:
            conversations = read_conversations(options["file"], options["format"])
            # A conversation that cannot be imported is reported; the others still import.
            results = conversations_import(
                workspace=workspace,
                conversations=conversations,
                fmt=options["format"],
                side_effect_tools=DEFAULT_SIDE_EFFECT_TOOLS
                if side_effect_tools is None
                else side_effect_tools,
                report=report,
            )
        except (ImportFormatError, DomainError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        verbose = options["verbosity"] > 1
        for result in results:
            self.stdout.write(
                f"{result.thread.external_id}: {result.created} new of {result.total} events"
                + (f", {len(result.skipped)} items skipped" if result.skipped else "")
            )
            for reason in result.skipped if verbose else result.skipped[:3]:
                self.stdout.write(f"  skipped {reason}")
        created = sum(r.created for r in results)
        self.stdout.write(
            f"Imported {len(results)} conversations ({created} new events) into {workspace.name}."
        )
        if refused:
            for line in refused:
                self.stderr.write(f"refused conversation {line.index}: {line.reason}")
            raise CommandError(
                f"{len(refused)} of {len(conversations)} conversations refused; first: "
                f"conversation {refused[0].index}: {refused[0].reason}"
            )
