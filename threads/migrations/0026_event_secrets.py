"""Secrets at ingest (docs/event-log.md, "Secrets at ingest"): an event row gains `secrets`, the
flags its append found ([{"type", "field"}], NULL for none), and a thread counts its events that
hold one (`events_with_secrets`), with a partial index of the list's order for the `has_secrets`
filter; a partial index of the flagged events' times serves the Operations page.

No existing row's content is rewritten. The event column is nullable with no default: PostgreSQL
adds it to the catalogue only, SQLite by ALTER TABLE ADD COLUMN, so the event table is not remade
and keeps its append-only and search-index triggers; existing events read NULL (not scanned, no
flag). The thread's count: PostgreSQL adds a column with a constant default without rewriting the
table; SQLite adds it by remaking the thread table, which its side-effect triggers
(threads/database/unknown_counts.py) name: they are dropped before and created again after, on
SQLite only, as in 0023. Existing threads count 0: their events were never scanned."""

from django.db import migrations, models

from threads.database import unknown_counts as unknown_counts


def sqlite_triggers_drop(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in unknown_counts.SQLITE_REVERSE:
            schema_editor.execute(statement)


def sqlite_triggers_create(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in unknown_counts.SQLITE_SQL:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("threads", "0025_integrations_move_out")]

    operations = [
        migrations.AddField(
            model_name="event",
            name="secrets",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(
                condition=models.Q(("secrets__isnull", False)),
                fields=["created_at"],
                name="event_secrets",
            ),
        ),
        migrations.RunPython(sqlite_triggers_drop, sqlite_triggers_create),
        migrations.AddField(
            model_name="thread",
            name="events_with_secrets",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddIndex(
            model_name="thread",
            index=models.Index(
                condition=models.Q(("events_with_secrets__gt", 0)),
                fields=["workspace", "-updated_at", "id"],
                name="thread_list_secrets",
            ),
        ),
        migrations.RunPython(sqlite_triggers_create, sqlite_triggers_drop),
    ]
