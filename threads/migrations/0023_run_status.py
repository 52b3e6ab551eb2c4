"""Run status (docs/dashboard.md, "Run status"): the thread row keeps when its agent last
appended and read, and what a person changed that the agent has not picked up yet; a workspace
says after how long a thread waiting for its agent is stalled.

SQLite adds a column by remaking the thread table, which its side-effect triggers
(threads/database/unknown_counts.py) name: they are dropped before and created again after, on SQLite
only, as in 0022."""

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
        ('threads', '0022_thread_pin'),
    ]

    operations = [
        migrations.RunPython(sqlite_triggers_drop, sqlite_triggers_create),
        migrations.AddField(
            model_name='thread',
            name='agent_appended_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='thread',
            name='agent_owed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='thread',
            name='agent_owed_since',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='thread',
            name='agent_read_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='workspace',
            name='stall_after_seconds',
            field=models.PositiveIntegerField(default=900),
        ),
        migrations.AddIndex(
            model_name='thread',
            index=models.Index(condition=models.Q(('agent_owed_since__isnull', False)), fields=['workspace', 'agent_owed_since'], name='thread_waiting_for_agent'),
        ),
        migrations.RunPython(sqlite_triggers_create, sqlite_triggers_drop),
    ]
