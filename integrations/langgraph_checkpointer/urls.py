"""The LangGraph checkpointer's API (docs/api.md, "LangGraph checkpointer"), under /api/v1/."""

from django.urls import path

from integrations.langgraph_checkpointer.api import batch
from integrations.langgraph_checkpointer.api import views as langgraph

urlpatterns = [
    path(
        "threads/<str:id>/langgraph/",
        langgraph.ThreadLanggraphApi.as_view(),
        name="thread-langgraph",
    ),
    path(
        "threads/<str:id>/langgraph/checkpoints/",
        langgraph.ThreadLanggraphCheckpointsApi.as_view(),
        name="thread-langgraph-checkpoints",
    ),
    path(
        "threads/<str:id>/langgraph/checkpoints/<str:checkpoint_id>/",
        langgraph.ThreadLanggraphCheckpointApi.as_view(),
        name="thread-langgraph-checkpoint",
    ),
    path(
        "threads/<str:id>/langgraph/writes/",
        langgraph.ThreadLanggraphWritesApi.as_view(),
        name="thread-langgraph-writes",
    ),
    path(
        "threads/<str:id>/langgraph/batch/",
        batch.ThreadLanggraphBatchApi.as_view(),
        name="thread-langgraph-batch",
    ),
    path(
        "threads/<str:id>/langgraph/copy/",
        langgraph.ThreadLanggraphCopyApi.as_view(),
        name="thread-langgraph-copy",
    ),
    path(
        "langgraph/checkpoints/",
        langgraph.LanggraphCheckpointsApi.as_view(),
        name="langgraph-checkpoints",
    ),
    path("langgraph/prune/", langgraph.LanggraphPruneApi.as_view(), name="langgraph-prune"),
    path(
        "langgraph/delete-for-runs/",
        langgraph.LanggraphDeleteForRunsApi.as_view(),
        name="langgraph-delete-for-runs",
    ),
]
