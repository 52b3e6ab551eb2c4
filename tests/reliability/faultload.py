"""The load-with-faults program (docs/reliability.md, "Load with faults"), shared by
bench/faults.py and its smoke version in tests/reliability/test_load_with_faults.py.

Clients of the Python client append interaction units through a proxy that drops a share of
the answers after the server committed them (tests/client/proxy.py), so the client retries
with the same client_event_ids; folds are triggered throughout (by the threads' capacity
policy, and by explicit fold requests); meanwhile Celery workers are SIGKILLed and restarted
and Redis is restarted. Then the state is checked from the database: nothing lost or
duplicated, seq gapless, every chain verifies from genesis, every summary head catches up,
every fold's task run ends, no two versions fork from one parent, no 5xx answer.

The caller has Django set up on the deployment's database (the checks read it directly).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctxadmin_client import Client
from django.db import connection
from django.db.models import Count

from tests.client.proxy import DroppingProxy
from tests.stack import Gunicorn, Redis, Worker, run_manage
from threads.models import SummaryPhase, SummaryVersion, TaskRun, TaskState, Thread
from threads.services.fold_recovery import ORPHANED
from threads.services.integrity import integrity_check

EVENTS_PER_UNIT = 4
GATE_SLACK = 0.02
OPEN_STATES = (TaskState.PENDING, TaskState.STARTED, TaskState.PROGRESS)


@dataclass
class Plan:
    clients: int = 16
    events_per_client: int = 500
    threads: int = 8
    worker_kills: int = 20
    redis_restarts: int = 2
    drop_rate: float = 0.05
    fold_every: int = 8  # an explicit fold request after every this many units of a client
    seed: int = 20261201
    # Small enough that the capacity policy folds several times per thread during the run.
    context_window: int = 6000
    settle_timeout: float = 240.0
    sweep_every: float = 10.0  # seconds between `recover` sweeps while settling
    worker_min_up: float = 3.0  # a worker is killed only after this many seconds ready


@dataclass
class Deployment:
    gunicorn: Gunicorn
    workers: list[Worker]
    redis: Redis
    env: dict[str, str]  # the processes' environment, for manage.py commands
    api_key: str


class CountingProxy(DroppingProxy):
    """The dropping proxy, also counting the upstream's answers by status class."""

    def __post_init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        super().__post_init__()

    def _forward(self, request: bytes) -> bytes:
        answer = super()._forward(request)
        status = answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/") else b"0"
        with self._lock:
            self.statuses[int(status) if status.isdigit() else 0] += 1
        return answer

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500 or status == 0)


@dataclass
class Outcome:
    plan: Plan
    seconds: float = 0.0
    sent: int = 0
    stored: int = 0
    lost: int = 0
    duplicated: int = 0
    seq_gaps: int = 0
    chains_ok: int = 0
    chains_total: int = 0
    heads_caught_up: int = 0
    forks: int = 0
    versions_committed: int = 0
    versions_discarded: int = 0
    versions_rejected: int = 0
    recovered: int = 0
    recover_sweeps: int = 0
    fold_runs: int = 0
    fold_runs_open: int = 0
    fold_runs_failed: int = 0
    fold_runs_superseded: int = 0
    fold_runs_orphaned: int = 0
    explicit_folds: int = 0
    answers_dropped: int = 0
    answers_forwarded: int = 0
    answers_5xx: int = 0
    client_errors: list[str] = field(default_factory=list)
    worker_kills: int = 0
    kills_during_load: int = 0
    redis_restarts: int = 0
    restarts_during_load: int = 0
    statuses: dict[int, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            self.lost == 0
            and self.duplicated == 0
            and self.seq_gaps == 0
            and self.chains_ok == self.chains_total
            and self.heads_caught_up == self.chains_total
            and self.forks == 0
            and self.fold_runs_open == 0
            and self.fold_runs_failed == 0
            and self.answers_5xx == 0
            and not self.client_errors
        )


def unit(client: int, n: int) -> list[dict[str, Any]]:
    """One closed interaction unit: a question, a tool call and its result, a reply."""
    call_id = f"c{client}-{n}"
    filler = " ".join(f"word{(client * 31 + n * 7 + k) % 97}" for k in range(40))
    bodies: list[dict[str, Any]] = [
        {"kind": "message", "role": "user", "content": f"client {client} asks {n}: {filler}"},
        {
            "kind": "tool_call",
            "tool_call_id": call_id,
            "tool_name": "lookup_order",
            "arguments": {"order": n, "client": client},
        },
        {
            "kind": "tool_result",
            "tool_call_id": call_id,
            "status": "succeeded",
            "result": {"order": n, "state": "shipped", "notes": filler[:120]},
        },
        {"kind": "message", "role": "assistant", "content": f"order {n} shipped. {filler}"},
    ]
    for k, body in enumerate(bodies):
        body["client_event_id"] = f"c{client}-e{n * EVENTS_PER_UNIT + k}"
    return bodies


class Faults:
    """Kills workers and restarts Redis as the load progresses, evenly over it."""

    def __init__(self, plan: Plan, deployment: Deployment, progress: Callable[[], float]):
        self.plan, self.deployment, self.progress = plan, deployment, progress
        self.load_done = threading.Event()
        self.next_at = 0.0  # the share of the load at which the next fault is due
        self.finished = threading.Event()
        self.kills_during_load = 0
        self.restarts_during_load = 0
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join()

    def _schedule(self) -> list[tuple[float, str]]:
        kills = self.plan.worker_kills
        restarts = self.plan.redis_restarts
        plan = [((k + 0.5) / (kills + 0.5), "kill") for k in range(kills)]
        plan += [((r + 1) / (restarts + 1), "redis") for r in range(restarts)]
        return sorted(plan)

    def gate(self) -> None:
        """Clients wait here while the faults lag behind the load (a killed worker takes a
        few seconds to start again), so that every fault falls inside the load."""
        while self.progress() > self.next_at + GATE_SLACK and not self.finished.is_set():
            time.sleep(0.02)

    def _run(self) -> None:
        workers = self.deployment.workers
        turn = 0
        try:
            for at, fault in self._schedule():
                self.next_at = at
                while self.progress() < at and not self.load_done.is_set():
                    time.sleep(0.02)
                during = not self.load_done.is_set()
                if fault == "redis":
                    self.deployment.redis.restart()
                    self.restarts_during_load += during
                    continue
                # The next worker that has been up a while (it has taken tasks); the other
                # may still be starting. Killing each as soon as it is ready would leave no
                # worker alive at all: a start takes seconds on a loaded machine.
                while True:
                    worker = workers[turn % len(workers)]
                    if worker.up_for() >= self.plan.worker_min_up:
                        turn += 1
                        break
                    time.sleep(0.05)
                worker.kill()
                worker.start()
                self.kills_during_load += during
        except Exception as exc:  # reported, never hidden
            self.errors.append(f"fault injection: {type(exc).__name__}: {exc}")
        finally:
            self.finished.set()


def _client_run(
    client_no: int,
    thread_id: str,
    base_url: str,
    plan: Plan,
    api_key: str,
    acked: list[int],
    fold_tasks: list[str],
    errors: list[str],
    lock: threading.Lock,
    gate: Callable[[], None],
) -> None:
    units = plan.events_per_client // EVENTS_PER_UNIT
    with Client(base_url, api_key, retries=12, timeout=60.0) as client:
        thread = client.get_thread(thread_id)
        for n in range(units):
            gate()
            try:
                thread.append(*unit(client_no, n))
            except Exception as exc:
                with lock:
                    errors.append(f"client {client_no} unit {n}: {type(exc).__name__}: {exc}")
                continue
            with lock:
                acked[0] += EVENTS_PER_UNIT
            if (n + 1) % plan.fold_every == 0:
                try:
                    task = thread.fold(reason=f"client {client_no} after unit {n}")
                    with lock:
                        fold_tasks.append(task["task_id"])
                except Exception as exc:
                    with lock:
                        errors.append(f"client {client_no} fold: {type(exc).__name__}: {exc}")


def run(plan: Plan, deployment: Deployment, *, log: Callable[[str], None] = print) -> Outcome:
    outcome = Outcome(plan=plan)
    proxy = CountingProxy("127.0.0.1", deployment.gunicorn.port, plan.drop_rate, plan.seed)
    try:
        thread_ids = _make_threads(plan, deployment, proxy.url)
        total = plan.clients * (plan.events_per_client // EVENTS_PER_UNIT) * EVENTS_PER_UNIT
        acked: list[int] = [0]
        fold_tasks: list[str] = []
        errors: list[str] = []
        lock = threading.Lock()
        faults = Faults(plan, deployment, lambda: acked[0] / total)
        clients = [
            threading.Thread(
                target=_client_run,
                args=(c, thread_ids[c % plan.threads], proxy.url, plan, deployment.api_key),
                kwargs={
                    "acked": acked,
                    "fold_tasks": fold_tasks,
                    "errors": errors,
                    "lock": lock,
                    "gate": faults.gate,
                },
            )
            for c in range(plan.clients)
        ]
        started = time.monotonic()
        faults.start()
        for c in clients:
            c.start()
        for c in clients:
            c.join()
        outcome.seconds = time.monotonic() - started
        faults.load_done.set()
        faults.join()
        log(f"load done in {outcome.seconds:.1f} s; {acked[0]} events acknowledged")
        outcome.sent = total
        outcome.explicit_folds = len(fold_tasks)
        outcome.client_errors = errors + faults.errors
        outcome.kills_during_load = faults.kills_during_load
        outcome.restarts_during_load = faults.restarts_during_load
        outcome.worker_kills = sum(w.kills for w in deployment.workers)
        outcome.redis_restarts = deployment.redis.restarts
        for worker in deployment.workers:
            worker.wait_ready()
        _settle(plan, deployment, thread_ids, outcome, proxy.url, log)
        outcome.answers_dropped, outcome.answers_forwarded = proxy.dropped, proxy.forwarded
        outcome.answers_5xx = proxy.server_errors
        outcome.statuses = dict(sorted(proxy.statuses.items()))
        _check(plan, thread_ids, outcome)
    finally:
        proxy.close()
    return outcome


def _make_threads(plan: Plan, deployment: Deployment, base_url: str) -> list[str]:
    with Client(base_url, deployment.api_key, retries=12, timeout=60.0) as client:
        return [
            client.thread(
                f"faults-{plan.seed}-{t}",
                context_window=plan.context_window,
                reserved_output=500,
                reasoning_reserve=0,
                safety_margin=0,
            ).id
            for t in range(plan.threads)
        ]


def _open_runs(thread_ids: list[str]) -> int:
    return TaskRun.objects.filter(thread_id__in=thread_ids, state__in=OPEN_STATES).count()


def _settle(
    plan: Plan,
    deployment: Deployment,
    thread_ids: list[str],
    outcome: Outcome,
    base_url: str,
    log: Callable[[str], None],
) -> None:
    """After the last fault: wait for the folds in flight (a killed worker's message comes
    back after the broker's visibility timeout), run `recover` as the beat would
    (docs/pipeline.md, "Recovery"), then ask each thread for one more fold and wait for it."""
    deadline = time.monotonic() + plan.settle_timeout
    sweeps = 0
    while True:
        # As the beat would: `recover` with the deployment's CTXADMIN_PREPARED_TIMEOUT.
        report = run_manage(deployment.env, "recover")
        # Its last line: "N prepared version(s) decided".
        outcome.recovered += int(report.strip().splitlines()[-1].split()[0])
        sweeps += 1
        connection.close()
        if not _open_runs(thread_ids) or time.monotonic() > deadline:
            break
        time.sleep(plan.sweep_every)
    outcome.recover_sweeps = sweeps
    log(f"after {sweeps} recover sweeps, {_open_runs(thread_ids)} task runs still open")
    with Client(base_url, deployment.api_key, retries=12, timeout=60.0) as client:
        for thread_id in thread_ids:
            thread = client.get_thread(thread_id)
            for _ in range(5):
                data = thread.refresh()
                if data.get("covered_until") == data.get("last_seq"):
                    break
                task = thread.fold(reason="catch up after the faults")
                client.wait_for_task(task["task_id"], timeout=plan.settle_timeout)
    deadline = time.monotonic() + plan.settle_timeout
    while _open_runs(thread_ids) and time.monotonic() < deadline:
        time.sleep(plan.sweep_every)
        run_manage(deployment.env, "recover")
        connection.close()


def _check(plan: Plan, thread_ids: list[str], outcome: Outcome) -> None:
    connection.close()
    expected: set[str] = set()
    for c in range(plan.clients):
        for n in range(plan.events_per_client // EVENTS_PER_UNIT):
            expected.update(b["client_event_id"] for b in unit(c, n))
    stored: Counter[str] = Counter()
    for thread in Thread.objects.filter(pk__in=thread_ids).select_related("workspace"):
        ids = list(thread.events.order_by("seq").values_list("seq", "client_event_id"))
        seqs = [s for s, _ in ids]
        outcome.seq_gaps += int(
            seqs != list(range(1, len(seqs) + 1)) or thread.last_seq != len(seqs)
        )
        stored.update(cid or "" for _, cid in ids)
        outcome.stored += len(ids)
        outcome.chains_total += 1
        verdict = integrity_check(thread=thread, full=True)
        outcome.chains_ok += int(verdict.ok and verdict.verified_until == thread.last_seq)
        thread.refresh_from_db()
        head = SummaryVersion.objects.filter(thread=thread, version=thread.head_version).first()
        outcome.heads_caught_up += int(
            head is not None
            and head.phase == SummaryPhase.COMMITTED
            and thread.covered_until == thread.last_seq
        )
    outcome.lost = len(expected - set(stored))
    outcome.duplicated = sum(n - 1 for n in stored.values() if n > 1) + len(set(stored) - expected)
    versions = SummaryVersion.objects.filter(thread_id__in=thread_ids)
    by_phase = dict(versions.values_list("phase").annotate(n=Count("id")))
    outcome.versions_committed = by_phase.get(SummaryPhase.COMMITTED, 0)
    outcome.versions_discarded = by_phase.get(SummaryPhase.DISCARDED, 0)
    outcome.versions_rejected = by_phase.get(SummaryPhase.REJECTED, 0)
    outcome.forks = (
        versions.filter(phase=SummaryPhase.COMMITTED)
        .values("thread_id", "base_version")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    runs = TaskRun.objects.filter(thread_id__in=thread_ids, kind="fold")
    outcome.fold_runs = runs.count()
    outcome.fold_runs_open = runs.filter(state__in=OPEN_STATES).count()
    outcome.fold_runs_failed = runs.filter(state=TaskState.FAILURE).count()
    outcome.fold_runs_superseded = runs.filter(result__has_key="superseded_by").count()
    outcome.fold_runs_orphaned = runs.filter(result__reason=ORPHANED).count()


def table(outcome: Outcome) -> list[tuple[str, str]]:
    """The figures as (what, value) rows, for the bench's table and the doc."""
    p = outcome.plan
    return [
        ("clients × events, threads", f"{p.clients} × {p.events_per_client}, {p.threads}"),
        ("load time", f"{outcome.seconds:.1f} s"),
        ("events sent / stored", f"{outcome.sent} / {outcome.stored}"),
        ("lost", str(outcome.lost)),
        ("duplicated (by client_event_id)", str(outcome.duplicated)),
        ("threads with a seq gap", str(outcome.seq_gaps)),
        ("chains verifying from genesis", f"{outcome.chains_ok} / {outcome.chains_total}"),
        ("summary heads caught up", f"{outcome.heads_caught_up} / {outcome.chains_total}"),
        (
            "versions committed / discarded / rejected",
            f"{outcome.versions_committed} / {outcome.versions_discarded} / "
            f"{outcome.versions_rejected}",
        ),
        ("forks (two committed versions on one parent)", str(outcome.forks)),
        (
            "`recover` sweeps after the load / prepared versions they decided",
            f"{outcome.recover_sweeps} / {outcome.recovered}",
        ),
        ("explicit fold requests", str(outcome.explicit_folds)),
        (
            "fold task runs: all / still open / failed",
            f"{outcome.fold_runs} / {outcome.fold_runs_open} / {outcome.fold_runs_failed}",
        ),
        (
            "fold runs ended by `recover`: superseded by a new request / worker died",
            f"{outcome.fold_runs_superseded} / {outcome.fold_runs_orphaned}",
        ),
        (
            "worker SIGKILLs (during the load)",
            f"{outcome.worker_kills} ({outcome.kills_during_load})",
        ),
        (
            "Redis restarts (during the load)",
            f"{outcome.redis_restarts} ({outcome.restarts_during_load})",
        ),
        (
            "answers dropped after commit / forwarded",
            f"{outcome.answers_dropped} / {outcome.answers_forwarded}",
        ),
        ("5xx answers at the proxy", str(outcome.answers_5xx)),
        ("requests the client gave up on", str(len(outcome.client_errors))),
        ("answers by status", ", ".join(f"{s}: {n}" for s, n in outcome.statuses.items())),
    ]
