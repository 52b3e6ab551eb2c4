"""A thread can be pinned by a rollback: folds pause until someone releases it, and the
thread records who pinned it, when and why (docs/repairs.md, "Rollback").

SQLite adds a column with a default by remaking the thread table (a copy, then a rename),
which its side-effect triggers (threads/database/unknown_counts.py) name: they are dropped before and
created again after, on SQLite only. The counts they keep are copied with the rows."""

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

    dependencies = [
        ('threads', '0021_langgraph_write_interrupts'),
    ]

    operations = [
        migrations.RunPython(sqlite_triggers_drop, sqlite_triggers_create),
        migrations.AddField(
            model_name='thread',
            name='pin_reason',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.AddField(
            model_name='thread',
            name='pinned_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='thread',
            name='pinned_by',
            field=models.CharField(blank=True, default='', max_length=200),
        ),
        migrations.RunPython(sqlite_triggers_create, sqlite_triggers_drop),
    ]
