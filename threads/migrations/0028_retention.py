"""Retention (docs/operations.md, "Retention"): a workspace's policy (`retention_days`,
`keep_checkpoints`, both NULL: keep everything, as before), the signed tombstones of deleted
threads, and the events' DELETE guard opened to retention's delete of one whole thread
(threads/database/guard.py). Only the DELETE side of the guard changes: on PostgreSQL the
append-only trigger, which 0027 left for DELETE alone, gives way to a DELETE trigger of its own;
on SQLite the DELETE trigger is made again. No table is remade."""

import django.db.models.deletion
from django.db import migrations, models

from threads.database import guard as dbguard


def guard_forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # params=None: the SQL holds plpgsql's own % placeholders, not query parameters.
        schema_editor.execute(dbguard.POSTGRES_RETENTION_SQL, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in dbguard.SQLITE_RETENTION_SQL:
            schema_editor.execute(statement)


def guard_backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(dbguard.POSTGRES_RETENTION_REVERSE, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in dbguard.SQLITE_RETENTION_REVERSE:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("threads", "0027_redaction")]

    operations = [
        migrations.AddField(
            model_name="workspace",
            name="keep_checkpoints",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="workspace",
            name="retention_days",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="ThreadTombstone",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("thread_uid", models.UUIDField(unique=True)),
                ("external_id_sha256", models.CharField(max_length=64)),
                ("last_seq", models.PositiveBigIntegerField()),
                ("chain_head", models.CharField(max_length=64)),
                ("chain_key_id", models.CharField(blank=True, default="", max_length=32)),
                ("published_hashes", models.JSONField(default=dict)),
                ("deleted_by", models.CharField(max_length=200)),
                ("reason", models.TextField()),
                ("deleted_at", models.DateTimeField()),
                ("signature", models.CharField(max_length=64)),
                (
                    "workspace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="tombstones",
                        to="threads.workspace",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        fields=["workspace", "-deleted_at"], name="tombstone_workspace_time"
                    )
                ],
            },
        ),
        migrations.RunPython(guard_forwards, guard_backwards),
    ]
