from django.db import migrations, models

from threads.database import guard as dbguard

KINDS = [
    ("message", "Message"),
    ("tool_call", "Tool Call"),
    ("tool_result", "Tool Result"),
    ("annotation", "Annotation"),
    ("approval_request", "Approval Request"),
    ("approval_decision", "Approval Decision"),
    ("side_effect_resolution", "Side Effect Resolution"),
    ("retraction", "Retraction"),
    ("reset", "Reset"),
]


def reseal_sqlite(apps, schema_editor):
    # Changing a constraint remakes the table on SQLite, which drops its triggers: the
    # append-only guard of 0002 is installed again on the new table.
    if schema_editor.connection.vendor == "sqlite":
        for statement in dbguard.SQLITE_REVERSE + dbguard.SQLITE_SQL:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("threads", "0007_thread_fully_verified_at"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="event", name="event_kind_valid"),
        migrations.AlterField(
            model_name="event",
            name="kind",
            field=models.CharField(choices=KINDS, max_length=32),
        ),
        migrations.AddConstraint(
            model_name="event",
            constraint=models.CheckConstraint(
                condition=models.Q(kind__in=[value for value, _ in KINDS]),
                name="event_kind_valid",
            ),
        ),
        migrations.RunPython(reseal_sqlite, reseal_sqlite),
    ]
