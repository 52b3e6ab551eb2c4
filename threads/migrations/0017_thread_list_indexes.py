"""The thread list read off its indexes (docs/scale.md, "What one database holds").

Both databases: the default order's index gains the thread's key, so a page of the list is
read off `(workspace, updated_at DESC, id)` in order and its count by an index-only scan. Each
thread counts its unknown side effects (`unknown_side_effects`, kept by triggers:
threads/database/unknown_counts.py, counted here from the existing rows), and a partial index of the same
order holds the threads with one, the list's filter.
PostgreSQL: trigram indexes (pg_trgm) on the upper-cased external id and title, the
expressions Django's `icontains` compares, so that the list's search finds names without
reading every thread row. Where pg_trgm is not installed or may not be created, the
migration says so and goes on: the search is then a scan of the thread rows, as before; create
the extension as a superuser, migrate back to 0016_search_compact and forward again to index
it."""

import sys

from django.db import DatabaseError, migrations, models, transaction
from django.db.models import Q

from threads.database import unknown_counts as unknown_counts

TRIGRAM_INDEXES = {
    "thread_external_id_trgm": "external_id",
    "thread_title_trgm": "title",
}


def trigram_forwards(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(using=connection.alias):
            schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except DatabaseError as exc:
        sys.stderr.write(
            f"  pg_trgm could not be created ({str(exc).strip()}): the thread list's search "
            "scans the thread rows (see this migration's docstring).\n"
        )
        return
    for name, column in TRIGRAM_INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON threads_thread "
            f'USING gin (upper("{column}"::text) gin_trgm_ops) WITH (fastupdate = off)'
        )


def counts_forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        # params=None: the function's body goes as written, with no query parameters.
        schema_editor.execute(unknown_counts.POSTGRES_SQL, params=None)
    elif vendor == "sqlite":
        for statement in unknown_counts.SQLITE_SQL:
            schema_editor.execute(statement)
    schema_editor.execute(unknown_counts.RECOUNT_SQL)


def counts_backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(unknown_counts.POSTGRES_REVERSE)
    elif vendor == "sqlite":
        for statement in unknown_counts.SQLITE_REVERSE:
            schema_editor.execute(statement)


def trigram_backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in TRIGRAM_INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("threads", "0016_search_compact")]

    operations = [
        migrations.AddField(
            model_name="thread",
            name="unknown_side_effects",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(counts_forwards, counts_backwards),
        migrations.AddIndex(
            model_name="thread",
            index=models.Index(fields=["workspace", "-updated_at", "id"], name="thread_list_order"),
        ),
        migrations.AddIndex(
            model_name="thread",
            index=models.Index(
                fields=["workspace", "-updated_at", "id"],
                condition=Q(unknown_side_effects__gt=0),
                name="thread_list_unknown",
            ),
        ),
        migrations.RemoveIndex(model_name="thread", name="threads_thr_workspa_1995a8_idx"),
        migrations.RunPython(trigram_forwards, trigram_backwards),
    ]
