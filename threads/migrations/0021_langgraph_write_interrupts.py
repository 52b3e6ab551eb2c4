"""A LangGraph task's writes that come before their checkpoint is stored keep its interrupts
until that checkpoint's put, which opens their approval requests after its messages
(docs/langgraph.md, "Agent frameworks")."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('threads', '0020_api_key_form_token'),
    ]

    operations = [
        migrations.AddField(
            model_name='langgraphwrite',
            name='interrupts',
            field=models.JSONField(blank=True, null=True),
        ),
    ]
