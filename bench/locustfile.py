"""A bounded locust load on ctxadmin's API, run headless on loopback by bench/faults.py
(`--locust SECONDS`), or by hand:

    LOCUST_API_KEY=<key> uv run locust -f bench/locustfile.py --headless -u 16 -r 8 -t 40s \
        --host http://127.0.0.1:8000

Each simulated agent owns a thread and, in proportion 4 : 2 : 1, appends a closed interaction
unit (a question, a tool call and its result, a reply; one request of four events), reads its
working context, and reads its events. Every append carries client_event_ids, as an agent's
client sends them.
"""

from __future__ import annotations

import itertools
import os
import uuid
from typing import Any

from locust import HttpUser, between, task

API_KEY = os.environ.get("LOCUST_API_KEY", "")
_agents = itertools.count()


class Agent(HttpUser):
    wait_time = between(0.0, 0.05)

    def on_start(self) -> None:
        self.client.headers.update({"Authorization": f"Bearer {API_KEY}"})
        self.no = next(_agents)
        self.units = 0
        created = self.client.post(
            "/api/v1/threads/",
            json={"external_id": f"locust-{uuid.uuid4().hex[:12]}", "context_window": 16000},
            name="/api/v1/threads/",
        )
        self.thread = created.json()["id"]

    @task(4)
    def append_unit(self) -> None:
        n, self.units = self.units, self.units + 1
        call = f"a{self.no}-{n}"
        events: list[dict[str, Any]] = [
            {"kind": "message", "role": "user", "content": f"question {n} from agent {self.no}"},
            {
                "kind": "tool_call",
                "tool_call_id": call,
                "tool_name": "lookup",
                "arguments": {"n": n},
            },
            {
                "kind": "tool_result",
                "tool_call_id": call,
                "status": "succeeded",
                "result": {"n": n},
            },
            {"kind": "message", "role": "assistant", "content": f"answer {n}"},
        ]
        for k, event in enumerate(events):
            event["client_event_id"] = f"{call}-{k}"
        self.client.post(
            f"/api/v1/threads/{self.thread}/events/",
            json={"events": events},
            name="POST /threads/{id}/events/",
        )

    @task(2)
    def read_context(self) -> None:
        self.client.get(
            f"/api/v1/threads/{self.thread}/context/", name="GET /threads/{id}/context/"
        )

    @task(1)
    def read_events(self) -> None:
        self.client.get(
            f"/api/v1/threads/{self.thread}/events/?after=0&limit=100",
            name="GET /threads/{id}/events/",
        )
