"""TraceImport, taken over from the core app (threads 0025): state only. The table was made by
threads 0004 and 0024 and keeps its name and rows."""

import uuid

import django.db.models.deletion
import django.db.models.expressions
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("threads", "0025_integrations_move_out"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="TraceImport",
                    fields=[
                        (
                            "id",
                            models.UUIDField(
                                default=uuid.uuid4,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("actor_label", models.CharField(max_length=200)),
                        ("format", models.CharField(max_length=32)),
                        ("file_name", models.CharField(blank=True, default="", max_length=255)),
                        ("size", models.PositiveBigIntegerField()),
                        ("sha256", models.CharField(max_length=64)),
                        ("content", models.BinaryField()),
                        ("side_effect_tools", models.JSONField(blank=True, null=True)),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("pending", "Pending"),
                                    ("running", "Running"),
                                    ("succeeded", "Succeeded"),
                                    ("failed", "Failed"),
                                    ("cancelled", "Cancelled"),
                                ],
                                default="pending",
                                max_length=16,
                            ),
                        ),
                        ("conversations_total", models.PositiveIntegerField(default=0)),
                        ("conversations_done", models.PositiveIntegerField(default=0)),
                        ("created_count", models.PositiveIntegerField(default=0)),
                        ("updated_count", models.PositiveIntegerField(default=0)),
                        ("skipped_count", models.PositiveIntegerField(default=0)),
                        ("refused_count", models.PositiveIntegerField(default=0)),
                        ("events_appended", models.PositiveBigIntegerField(default=0)),
                        ("report", models.JSONField(default=list)),
                        ("error", models.TextField(blank=True, default="")),
                        ("cancel_requested_at", models.DateTimeField(blank=True, null=True)),
                        ("cancelled_by", models.CharField(blank=True, default="", max_length=200)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "task_run",
                            models.OneToOneField(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="trace_import",
                                to="threads.taskrun",
                            ),
                        ),
                        (
                            "workspace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="imports",
                                to="threads.workspace",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "threads_traceimport",
                        "indexes": [
                            models.Index(
                                fields=["workspace", "-created_at"],
                                name="threads_tra_workspa_ddfb76_idx",
                            )
                        ],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(
                                    (
                                        "state__in",
                                        ["pending", "running", "succeeded", "failed", "cancelled"],
                                    )
                                ),
                                name="trace_import_state_valid",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("conversations_done__lte", models.F("conversations_total"))
                                ),
                                name="trace_import_done_within_total",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    (
                                        "conversations_done",
                                        django.db.models.expressions.CombinedExpression(
                                            django.db.models.expressions.CombinedExpression(
                                                django.db.models.expressions.CombinedExpression(
                                                    models.F("created_count"),
                                                    "+",
                                                    models.F("updated_count"),
                                                ),
                                                "+",
                                                models.F("skipped_count"),
                                            ),
                                            "+",
                                            models.F("refused_count"),
                                        ),
                                    )
                                ),
                                name="trace_import_outcomes_counted",
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
