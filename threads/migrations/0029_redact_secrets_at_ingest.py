"""A workspace may take secrets out of its events at ingest (docs/event-log.md, "Secrets
redacted at ingest"); off for every existing workspace."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("threads", "0028_retention")]

    operations = [
        migrations.AddField(
            model_name="workspace",
            name="redact_secrets_at_ingest",
            field=models.BooleanField(default=False),
        ),
    ]
