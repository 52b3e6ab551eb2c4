"""The timeline finds the retractions after a page by a partial index of them (docs/scale.md,
"What one database holds"), instead of reading every event of the thread after the page."""

from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    dependencies = [("threads", "0017_thread_list_indexes")]

    operations = [
        migrations.AddIndex(
            model_name="event",
            index=models.Index(
                fields=["thread", "seq"], condition=Q(kind="retraction"), name="event_retraction"
            ),
        ),
    ]
