"""Dashboard URLs (docs/api.md, "Dashboard URLs"): people bookmark and share them."""

from django.urls import path

from threads.views import (
    checkpoints,
    context,
    forget,
    operations,
    oversight,
    queues,
    summaries,
    thread_settings,
    threads,
    workspaces,
)

urlpatterns = [
    path("", threads.home, name="home"),
    path("threads/", threads.thread_list, name="thread-list"),
    path("threads/<str:id>/", threads.thread_timeline, name="thread-timeline"),
    path("threads/<str:id>/events/<int:seq>/", threads.thread_event, name="thread-event"),
    path(
        "threads/<str:id>/events/<int:seq>/redact/",
        thread_settings.event_redact_view,
        name="event-redact",
    ),
    path(
        "threads/<str:id>/events/<int:seq>/body/",
        threads.thread_event_body,
        name="thread-event-body",
    ),
    path("threads/<str:id>/context/", context.thread_context, name="thread-context"),
    path("threads/<str:id>/summaries/", summaries.summary_list, name="summary-list"),
    path(
        "threads/<str:id>/summaries/<int:version>/",
        summaries.summary_detail,
        name="summary-detail",
    ),
    path("threads/<str:id>/fold/", summaries.fold_now, name="fold-now"),
    path("threads/<str:id>/checkpoints/", checkpoints.checkpoint_list, name="checkpoint-list"),
    path("threads/<str:id>/checkpoints/new/", checkpoints.checkpoint_new, name="checkpoint-new"),
    path(
        "threads/<str:id>/checkpoints/<int:checkpoint>/rollback-preview/",
        checkpoints.rollback_preview_view,
        name="rollback-preview",
    ),
    path("threads/<str:id>/rollback/", checkpoints.rollback, name="rollback"),
    path("threads/<str:id>/fork/", checkpoints.fork, name="fork"),
    path("threads/<str:id>/settings/", thread_settings.thread_settings, name="thread-settings"),
    path("threads/<str:id>/unpin/", thread_settings.thread_unpin_view, name="thread-unpin"),
    path("threads/<str:id>/pause/", thread_settings.thread_pause_view, name="thread-pause"),
    path("threads/<str:id>/verify/", oversight.integrity_verify, name="integrity-verify"),
    path("tasks/<str:task_id>/progress/", summaries.task_progress, name="task-progress"),
    path("side-effects/", queues.side_effect_list, name="side-effect-list"),
    path(
        "side-effects/<int:pk>/resolve/",
        queues.side_effect_resolve_view,
        name="side-effect-resolve",
    ),
    path("side-effects/<int:pk>/check/", queues.side_effect_check_view, name="side-effect-check"),
    path("approvals/", queues.approval_list, name="approval-list"),
    path("approvals/<int:pk>/decide/", queues.approval_decide_view, name="approval-decide"),
    path("integrity/", oversight.integrity, name="integrity"),
    path("audit/", oversight.audit, name="audit"),
    path("operations/", operations.operations, name="operations"),
    path("workspace/", workspaces.workspace_switch, name="workspace-switch"),
    # Erasure by subject and the retention policy (admins).
    path("forget/", forget.forget, name="forget"),
    path("forget/erase/", forget.forget_erase, name="forget-erase"),
    path("forget/erasures/<str:task_id>/", forget.forget_erasure, name="forget-erasure"),
    path("forget/retention/", forget.forget_retention, name="forget-retention"),
    path(
        "forget/retention/dry-run/",
        forget.forget_retention_preview,
        name="forget-retention-preview",
    ),
    path(
        "forget/retention/dry-runs/<str:task_id>/",
        forget.forget_retention_report,
        name="forget-retention-report",
    ),
]

# Agents' API keys (admins).
from threads.views import keys  # noqa: E402

urlpatterns += [
    path("keys/", keys.api_key_list, name="api-key-list"),
    path("keys/new/", keys.api_key_new, name="api-key-new"),
    path("keys/<int:pk>/revoke/", keys.api_key_revoke_view, name="api-key-revoke"),
    path("keys/<int:pk>/expiry/", keys.api_key_expiry_view, name="api-key-expiry"),
]
