"""A key remembers the one-time token of the dashboard form that issued it, unique among the
keys that have one: a form sent twice, even at the same instant, issues one key (docs/api.md,
"Dashboard URLs"). Keys issued before, or otherwise, have none ("")."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('threads', '0019_event_index_diet'),
    ]

    operations = [
        migrations.AddField(
            model_name='apikey',
            name='form_token',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AddConstraint(
            model_name='apikey',
            constraint=models.UniqueConstraint(condition=models.Q(('form_token', ''), _negated=True), fields=('form_token',), name='api_key_form_token_unique'),
        ),
    ]
