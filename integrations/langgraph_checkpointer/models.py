"""The LangGraph checkpointer's storage: what ctxadmin_client.langgraph.CtxadminSaver sends,
stored as sent (docs/langgraph.md, "Agent frameworks").

Channel values and pending writes are opaque bytes (never decoded here), checkpoint and metadata
are JSON. The `messages` channel is not stored here at all: its messages are mirrored into the
thread's event log, and a version row refers to them there. The tables keep the names they had
when these models lived in the core app (`threads_langgraph*`).
"""

from __future__ import annotations

from typing import Any

from django.db import models

from integrations.langgraph_checkpointer.domain.messages import checkpoint_pack, checkpoint_unpack
from integrations.langgraph_checkpointer.domain.packing import (
    Carried,
    PackedWrite,
    TaskWrites,
    tasks_pack,
    tasks_unpack,
    values_pack,
    values_unpack,
    writes_pack,
    writes_unpack,
)
from threads.models import Checkpoint, Thread


class LanggraphContent(models.Model):
    """The bytes of a channel value, once per content: keyed by their SHA-256."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    data = models.BinaryField()
    size = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "threads_langgraphcontent"

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} bytes)"


class LanggraphChannelVersion(models.Model):
    """One version of one channel: serialised bytes in a shared `content` row, or for a
    mirrored `messages` channel a reference to the log: every mirrored message up to
    `messages_until_seq`, or the explicit `message_seqs` (the seqs of the events carrying each
    message, in order), `message_count` of them. A small value (up to SMALL_VALUE_BYTES) of a
    checkpoint's own channel version has no row: the checkpoint row carries it (`values_z`);
    only one put for a version that is not its checkpoint's keeps it here, in `data`."""

    # Below this size a content row, its key and its index cost more than the bytes themselves,
    # and a version row of its own more than carrying the bytes in each checkpoint row.
    SMALL_VALUE_BYTES = 64

    # db_index=False: the unique constraint below starts with the thread.
    thread = models.ForeignKey(
        Thread, on_delete=models.PROTECT, related_name="lg_versions", db_index=False
    )
    checkpoint_ns = models.CharField(max_length=255, blank=True, default="")
    channel = models.CharField(max_length=255)
    version = models.CharField(max_length=255)
    type = models.CharField(max_length=64)
    data = models.BinaryField(null=True, blank=True)
    content = models.ForeignKey(
        LanggraphContent,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
    )
    messages_until_seq = models.PositiveBigIntegerField(null=True, blank=True)
    message_seqs = models.JSONField(null=True, blank=True)
    message_count = models.PositiveIntegerField(null=True, blank=True)
    cursor = models.PositiveBigIntegerField(default=0)  # the last mirrored seq it refers to

    class Meta:
        db_table = "threads_langgraphchannelversion"
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "channel", "version"],
                name="lg_version_unique",
            ),
        ]
        # Only the rows that have a content row: most versions are small or mirrored.
        indexes = [
            models.Index(
                fields=["content"],
                condition=models.Q(content__isnull=False),
                name="lg_version_content",
            )
        ]

    def __str__(self) -> str:
        return f"{self.thread_id} {self.checkpoint_ns}/{self.channel}@{self.version}"


class LanggraphMessage(models.Model):
    """Where a mirrored LangChain message is in the log: the event carrying it (`seq`) and its
    last event (`last_seq`, after its tool calls). An index of the log, never a copy."""

    # db_index=False: the unique constraint below starts with the thread.
    thread = models.ForeignKey(
        Thread, on_delete=models.PROTECT, related_name="lg_messages", db_index=False
    )
    message_id = models.CharField(max_length=200)
    digest = models.CharField(max_length=64)  # of the message's JSON form
    seq = models.PositiveBigIntegerField()
    last_seq = models.PositiveBigIntegerField()

    class Meta:
        db_table = "threads_langgraphmessage"
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "message_id", "digest"], name="lg_message_unique"
            ),
        ]
        indexes = [models.Index(fields=["thread", "last_seq"])]

    def __str__(self) -> str:
        return f"{self.thread_id} {self.message_id} @{self.seq}"


class LanggraphCheckpoint(models.Model):
    """A LangGraph checkpoint: its JSON without channel values (stored compressed: its
    `channel_versions` and `versions_seen` repeat the same version strings), the small values
    of its channels at the versions it names (`values_z`) and the pending writes of its tasks
    (`writes_z`; both compressed: a row per value or per write cost more than the value), its
    metadata, and the ctxadmin Checkpoint (label `langgraph:<checkpoint_id>`) that lists it
    among the thread's. `checkpoint` reads and writes the JSON, `small_values` the values,
    `task_writes` the writes."""

    # db_index=False: the unique constraint below starts with the thread.
    thread = models.ForeignKey(
        Thread, on_delete=models.PROTECT, related_name="lg_checkpoints", db_index=False
    )
    checkpoint_ns = models.CharField(max_length=255, blank=True, default="")
    checkpoint_id = models.CharField(max_length=64)
    parent_checkpoint_id = models.CharField(max_length=64, blank=True, default="")
    checkpoint_z = models.BinaryField()  # zlib of the compact JSON
    values_z = models.BinaryField(blank=True, default=b"")  # values_pack; b"": none
    writes_z = models.BinaryField(blank=True, default=b"")  # tasks_pack; b"": none
    metadata = models.JSONField(default=dict)
    run_id = models.CharField(max_length=200, blank=True, default="")
    cursor = models.PositiveBigIntegerField(default=0)  # the last mirrored seq it stands on
    ctxadmin_checkpoint = models.OneToOneField(
        Checkpoint, on_delete=models.PROTECT, related_name="langgraph"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "threads_langgraphcheckpoint"
        # The unique constraint also serves "the namespace's latest" (read backwards).
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id"], name="lg_checkpoint_unique"
            ),
        ]
        # Only checkpoints of a run: most have no run_id.
        indexes = [
            models.Index(
                fields=["run_id"], condition=~models.Q(run_id=""), name="lg_checkpoint_run"
            )
        ]

    def __str__(self) -> str:
        return f"langgraph:{self.checkpoint_id}"

    @property
    def checkpoint(self) -> dict[str, Any]:
        cached = self.__dict__.get("_checkpoint")
        if cached is None:
            cached = checkpoint_unpack(bytes(self.checkpoint_z))
            self.__dict__["_checkpoint"] = cached
        return cached

    @checkpoint.setter
    def checkpoint(self, value: dict[str, Any]) -> None:
        self.checkpoint_z = checkpoint_pack(value)
        self.__dict__["_checkpoint"] = value

    @property
    def small_values(self) -> dict[str, Carried]:
        """Channel -> (type, bytes) of the small values it carries, each at the version its
        `channel_versions` names (None: a version row holds that version)."""
        return values_unpack(bytes(self.values_z or b""))

    @small_values.setter
    def small_values(self, values: dict[str, Carried]) -> None:
        self.values_z = values_pack(values)

    @property
    def task_writes(self) -> list[TaskWrites]:
        return tasks_unpack(bytes(self.writes_z or b""))

    @task_writes.setter
    def task_writes(self, tasks: list[TaskWrites]) -> None:
        self.writes_z = tasks_pack(tasks)


class LanggraphWrite(models.Model):
    """The pending writes of one task after checkpoint `checkpoint_id` that came before the
    checkpoint was stored (LangGraph sends both from background threads), packed into one row
    (`writes_z`, compressed): each write's idx, channel and serialised bytes, or for a write of
    LangChain messages to the mirrored channel the seqs of the events carrying them, and the
    task's interrupts waiting for that put to open their approval requests. Writes after a
    stored checkpoint go into its row (`LanggraphCheckpoint.writes_z`), not here. `writes`
    reads and writes them, in idx order."""

    # db_index=False: the unique constraint below starts with the thread.
    thread = models.ForeignKey(
        Thread, on_delete=models.PROTECT, related_name="lg_writes", db_index=False
    )
    checkpoint_ns = models.CharField(max_length=255, blank=True, default="")
    checkpoint_id = models.CharField(max_length=64)
    task_id = models.CharField(max_length=200)
    task_path = models.CharField(max_length=500, blank=True, default="")
    writes_z = models.BinaryField()  # writes_pack
    # The task's interrupts ([{"id", "value"}]) whose approval requests wait for the put of the
    # checkpoint, so that they follow its messages in the log; None once opened, or none.
    interrupts = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "threads_langgraphwrite"
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id", "task_id"],
                name="lg_write_task_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.checkpoint_id} {self.task_id} {self.task_path}"

    @property
    def writes(self) -> list[PackedWrite]:
        return writes_unpack(bytes(self.writes_z))

    @writes.setter
    def writes(self, value: list[PackedWrite]) -> None:
        self.writes_z = writes_pack(value)
