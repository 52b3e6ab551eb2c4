from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("threads", "0008_event_kind_retraction_reset"),
    ]

    operations = [
        migrations.AddField(
            model_name="thread",
            name="chain_key_id",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
    ]
