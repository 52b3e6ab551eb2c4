"""Tombstones of threads deleted by retention (docs/event-log.md, "Tombstones"): what proves a
deleted thread's log without its content. Written once, with the deletion, never edited."""

from __future__ import annotations

from django.db import models

from threads.models.workspaces import Workspace


class ThreadTombstone(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="tombstones")
    # The deleted thread's uid: not a foreign key, the thread is gone.
    thread_uid = models.UUIDField(unique=True)
    external_id_sha256 = models.CharField(max_length=64)  # SHA-256 of the external id
    last_seq = models.PositiveBigIntegerField()
    chain_head = models.CharField(max_length=64)
    chain_key_id = models.CharField(max_length=32, blank=True, default="")
    # {"<seq>": chain hash} at each seq a published head named (docs/repairs.md,
    # "Published chain heads"), read from the log before it was deleted.
    published_hashes = models.JSONField(default=dict)
    deleted_by = models.CharField(max_length=200)  # "retention policy" or a person
    reason = models.TextField()
    deleted_at = models.DateTimeField()
    # HMAC-SHA256 with the thread's chain key over every field above (SHA-256 without one).
    signature = models.CharField(max_length=64)

    class Meta:
        indexes = [
            models.Index(fields=["workspace", "-deleted_at"], name="tombstone_workspace_time")
        ]

    def __str__(self) -> str:
        return f"tombstone {self.thread_uid} @{self.last_seq}"
