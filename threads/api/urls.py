from django.urls import path  # noqa: F401

from threads.api import events, integrity, tasks
from threads.api import threads as threads_api
from threads.api import tools as tools_api

# Threads, events and task status.
urlpatterns: list = [
    path("threads/", threads_api.ThreadListCreateApi.as_view(), name="threads"),
    path("threads/<str:id>/", threads_api.ThreadDetailApi.as_view(), name="thread-detail"),
    path("threads/<str:id>/events/", events.ThreadEventsApi.as_view(), name="thread-events"),
    path("threads/<str:id>/tools/", tools_api.ThreadToolsApi.as_view(), name="thread-tools"),
    path("tasks/<str:task_id>/", tasks.TaskDetailApi.as_view(), name="task-detail"),
]

# Chain verification.
urlpatterns += [
    path("threads/<str:id>/verify/", integrity.ThreadVerifyApi.as_view(), name="thread-verify"),
    path(
        "threads/<str:id>/integrity/",
        integrity.ThreadIntegrityApi.as_view(),
        name="thread-integrity",
    ),
]

# Working context, folding and summaries.
from threads.api import context, summaries  # noqa: E402

urlpatterns += [
    path("threads/<str:id>/context/", context.ThreadContextApi.as_view(), name="thread-context"),
    path("threads/<str:id>/fold/", summaries.ThreadFoldApi.as_view(), name="thread-fold"),
    path(
        "threads/<str:id>/summaries/",
        summaries.ThreadSummaryListApi.as_view(),
        name="thread-summaries",
    ),
    path(
        "threads/<str:id>/summaries/<int:version>/",
        summaries.ThreadSummaryDetailApi.as_view(),
        name="thread-summary",
    ),
]

# Checkpoints, rollback, fork, side effects and approvals.
from threads.api import approvals, checkpoints, side_effects  # noqa: E402

urlpatterns += [
    path(
        "threads/<str:id>/checkpoints/",
        checkpoints.ThreadCheckpointsApi.as_view(),
        name="thread-checkpoints",
    ),
    path(
        "threads/<str:id>/checkpoints/<int:checkpoint_id>/preview/",
        checkpoints.CheckpointPreviewApi.as_view(),
        name="thread-checkpoint-preview",
    ),
    path(
        "threads/<str:id>/rollback/",
        checkpoints.ThreadRollbackApi.as_view(),
        name="thread-rollback",
    ),
    path("threads/<str:id>/fork/", checkpoints.ThreadForkApi.as_view(), name="thread-fork"),
    path("threads/<str:id>/unpin/", checkpoints.ThreadUnpinApi.as_view(), name="thread-unpin"),
    path(
        "threads/<str:id>/approvals/",
        approvals.ThreadApprovalsApi.as_view(),
        name="thread-approvals",
    ),
    path("side-effects/", side_effects.SideEffectListApi.as_view(), name="side-effects"),
    path(
        "side-effects/<int:id>/resolve/",
        side_effects.SideEffectResolveApi.as_view(),
        name="side-effect-resolve",
    ),
    path(
        "side-effects/<int:id>/check/",
        side_effects.SideEffectCheckApi.as_view(),
        name="side-effect-check",
    ),
    path("approvals/", approvals.ApprovalListApi.as_view(), name="approvals"),
    path(
        "approvals/<int:id>/decide/",
        approvals.ApprovalDecideApi.as_view(),
        name="approval-decide",
    ),
]

# Redaction (docs/event-log.md, "Redaction").
from threads.api import redaction  # noqa: E402

urlpatterns += [
    path(
        "threads/<str:id>/events/<int:seq>/redact/",
        redaction.EventRedactApi.as_view(),
        name="thread-event-redact",
    )
]

# Message search (docs/api.md, "Message search — `GET /api/v1/search/`").
from threads.api import redactions, search  # noqa: E402

urlpatterns += [
    path("search/", search.SearchApi.as_view(), name="search"),
    path("redactions/", redactions.RedactionsApi.as_view(), name="redactions"),
]
