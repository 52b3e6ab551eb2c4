"""`publish_chain_heads`: append a signed head for every thread whose head moved
(docs/repairs.md, "Published chain heads"); what the `ctxadmin.publish_chain_heads` beat task does
on schedule."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from threads.services.chain_heads import chain_heads_publish


class Command(BaseCommand):
    help = (
        "Publish signed chain heads to CTXADMIN_HEADS_DIR: one line per thread whose head "
        "moved since its last publication. Exits 1 if a thread's head could not be published."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            publication = chain_heads_publish()
        except ImproperlyConfigured as error:
            raise CommandError(str(error), returncode=2) from error
        where = publication.file or "nothing new"
        self.stdout.write(f"Published {len(publication.published)} head(s): {where}")
        for thread, reason in publication.refused:
            self.stdout.write(f"REFUSED {thread}: {reason}")
        if publication.refused:
            raise CommandError(f"{len(publication.refused)} head(s) not published", returncode=1)
