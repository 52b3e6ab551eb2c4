"""Imports: the workspace switch for agents' imports, the cancelled state and an import's cancel
request (docs/api.md, "Imports — `/api/v1/imports/`")."""


from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('threads', '0023_run_status'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='traceimport',
            name='trace_import_state_valid',
        ),
        migrations.AddField(
            model_name='traceimport',
            name='cancel_requested_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='traceimport',
            name='cancelled_by',
            field=models.CharField(blank=True, default='', max_length=200),
        ),
        migrations.AddField(
            model_name='workspace',
            name='agents_may_import',
            field=models.BooleanField(default=False),
        ),
        migrations.AlterField(
            model_name='traceimport',
            name='state',
            field=models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='pending', max_length=16),
        ),
        migrations.AddConstraint(
            model_name='traceimport',
            constraint=models.CheckConstraint(condition=models.Q(('state__in', ['pending', 'running', 'succeeded', 'failed', 'cancelled'])), name='trace_import_state_valid'),
        ),
    ]
