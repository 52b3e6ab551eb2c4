"""The event table's indexes hold only what a read probes (docs/scale.md,
"What one database holds").

- `(thread, tool_call_id, seq)` becomes partial, over the events with a tool call id: the
  messages between calls and results, about half of a log, never are looked up by one.
- The thread foreign key's own index goes: the `(thread, seq)` constraint's index leads with
  the thread and serves every lookup by it. Only the database changes (Django would remake the
  whole table on SQLite to change `db_index`, dropping the table's triggers with it).

Both ways: backwards restores both indexes as Django created them."""

from django.db import migrations, models
from django.db.models import Q


def _fk_indexes(schema_editor, table):
    """Names of the plain indexes over thread_id alone (Django names them itself)."""
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, table)
    return [
        name
        for name, c in constraints.items()
        if c["index"] and not c["unique"] and not c["primary_key"] and c["columns"] == ["thread_id"]
    ]


def drop_thread_index(apps, schema_editor):
    event = apps.get_model("threads", "Event")
    for name in _fk_indexes(schema_editor, event._meta.db_table):
        schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


def create_thread_index(apps, schema_editor):
    event = apps.get_model("threads", "Event")
    if not _fk_indexes(schema_editor, event._meta.db_table):
        field = event._meta.get_field("thread")
        schema_editor.execute(schema_editor._create_index_sql(event, fields=[field]))


class Migration(migrations.Migration):
    dependencies = [("threads", "0018_event_retraction_index")]

    operations = [
        migrations.RemoveIndex(model_name="event", name="threads_eve_thread__02e8e2_idx"),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(
                fields=["thread", "tool_call_id", "seq"],
                condition=~Q(tool_call_id=""),
                name="event_tool_call",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="event",
                    name="thread",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=models.deletion.PROTECT,
                        related_name="events",
                        to="threads.thread",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(drop_thread_index, create_thread_index)],
        ),
    ]
