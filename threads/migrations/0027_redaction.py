"""Redaction (docs/event-log.md, "Redaction"): chain v2's salt and content digest on each event
(NULL on every existing row: chain v1, nothing rewritten; both columns are nullable with no
default, so PostgreSQL adds them to the catalogue only and SQLite by ALTER TABLE ADD COLUMN, and
the event table keeps its triggers), the chained redaction records, the workspace setting
`redaction_needs_second_admin`, and the append-only guard's UPDATE side, which now lets exactly
a redacting update through (threads/database/guard.py). The DELETE side is unchanged."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from threads.database import guard as dbguard


def refuse_to_unapply(apps, schema_editor):
    """Unapplying would drop the salts and digests that every event chained since is verified
    with: refused while there is one."""
    Event = apps.get_model("threads", "Event")
    chained = Event.objects.filter(content_digest__isnull=False).count()
    if chained:
        raise RuntimeError(
            f"0027_redaction cannot be unapplied: {chained} events are chained through their "
            "salted content digests (docs/event-log.md, \"Hash chain and canonical JSON\")"
        )


def guard_forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # params=None: the SQL holds plpgsql's own % placeholders, not query parameters.
        schema_editor.execute(dbguard.POSTGRES_REDACTION_SQL, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in dbguard.SQLITE_REDACTION_SQL:
            schema_editor.execute(statement)


def guard_backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(dbguard.POSTGRES_REDACTION_REVERSE, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in dbguard.SQLITE_REDACTION_REVERSE:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("threads", "0026_event_secrets"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="event",
            name="content_digest",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="event",
            name="content_salt",
            field=models.CharField(blank=True, max_length=32, null=True),
        ),
        migrations.AddField(
            model_name="workspace",
            name="redaction_needs_second_admin",
            field=models.BooleanField(default=False),
        ),
        migrations.CreateModel(
            name="Redaction",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("number", models.PositiveIntegerField()),
                ("seq", models.PositiveBigIntegerField()),
                ("by_label", models.CharField(max_length=200)),
                ("at", models.DateTimeField()),
                ("reason", models.TextField()),
                ("event_hash", models.CharField(max_length=64)),
                ("previous_hash", models.CharField(max_length=64)),
                ("remains_digest", models.CharField(max_length=64)),
                ("record_hash", models.CharField(max_length=64)),
                (
                    "by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "thread",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="redactions",
                        to="threads.thread",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("thread", "seq"), name="redaction_seq_unique"),
                    models.UniqueConstraint(
                        fields=("thread", "number"), name="redaction_number_unique"
                    ),
                ],
            },
        ),
        migrations.RunPython(guard_forwards, guard_backwards),
        # Last, so that it runs first when unapplied.
        migrations.RunPython(migrations.RunPython.noop, refuse_to_unapply),
    ]
