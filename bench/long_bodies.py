"""Pages with long bodies: thirty events of 1 MiB each, cut to a preview, next to the same
pages carrying every body whole (as they did before bodies were cut), in one run.

    uv run python bench/long_bodies.py              # the embedded default: a fresh SQLite file
    uv run python bench/long_bodies.py --dsn postgres://user@host:5432/db
    uv run python bench/long_bodies.py --requests 5

One thread holds 14 user messages and 14 tool results of about 1 MiB each, a side-effecting
call whose arguments are 1 MiB and an approval request whose arguments are 1 MiB (30 long
bodies, 46 events), appended through the append service. Logged in as an operator (Django's
test client, the whole middleware stack), each page is requested `--requests` times with
bodies cut (BODY_SHOWN_CHARS, 4096 characters) and with the cut lifted (every body whole, the
old behaviour); then one event's body route. Reports the bytes of HTML and the median server
time of each, and the ratios. Writes bench/results/long_bodies.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pages import setup_django  # bench/ is the script's folder

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "long_bodies.json"
MIB = 1 << 20
BODY_CHARS = MIB - 512  # an event's JSON must fit in CTXADMIN_MAX_EVENT_BYTES (1 MiB)


def big_text(n: int) -> str:
    words = " ".join(f"e{n}w{i}" for i in range(BODY_CHARS // 4))
    return f"START-{n} " + words[: BODY_CHARS - 20] + f" END-{n}"


def seed() -> tuple[Any, Any]:
    from threads.domain.events import normalize_event
    from threads.services.events import event_append_batch
    from threads.services.threads import thread_get_or_create
    from threads.services.workspaces import member_add, workspace_create

    workspace, _ = workspace_create(name="bench")
    person = member_add(workspace=workspace, username="olga", role="operator", password="x" * 20)
    thread, _ = thread_get_or_create(
        workspace=workspace, external_id="long-bodies", context_window=100_000_000
    )

    def append(body: dict[str, Any]) -> None:
        event_append_batch(thread=thread, new_events=[normalize_event(body, max_bytes=MIB)])

    def call(call_id: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "kind": "tool_call",
            "tool_call_id": call_id,
            "tool_name": "t",
            "arguments": arguments,
            **extra,
        }

    for n in range(1, 29, 2):
        append({"kind": "message", "role": "user", "content": big_text(n)})
        append(call(f"c{n}", {"url": f"/{n}"}))
        append(
            {
                "kind": "tool_result",
                "tool_call_id": f"c{n}",
                "status": "succeeded",
                "result": big_text(n + 1),
            }
        )
    append(call("pay", {"blob": big_text(29)}, side_effect=True, idempotency_key="r-1"))
    append({"kind": "tool_result", "tool_call_id": "pay", "status": "timeout"})
    append({"kind": "approval_request", "action": "refund", "arguments": {"blob": big_text(30)}})
    thread.refresh_from_db()
    return thread, person


def measure(client: Any, url: str, requests: int) -> dict[str, Any]:
    times, size = [], 0
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - started)
        assert response.status_code == 200, (url, response.status_code)
        size = len(response.content)
    return {"bytes": size, "median_ms": round(statistics.median(times) * 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="a PostgreSQL database to migrate and write into")
    parser.add_argument("--requests", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as var_dir:
        setup_django(args.dsn, var_dir)
        from django.test import Client

        from threads.views import present

        thread, person = seed()
        client = Client()
        client.force_login(person)
        base = f"/threads/{thread.pk}/"
        pages = {
            "timeline": f"{base}?from=1",
            "context": f"{base}context/",
            "side effects": "/side-effects/",
            "approvals": "/approvals/",
        }
        rows: dict[str, Any] = {}
        cut_at = present.BODY_SHOWN_CHARS
        for label, url in pages.items():
            present.BODY_SHOWN_CHARS = cut_at
            cut = measure(client, url, args.requests)
            present.BODY_SHOWN_CHARS = 10**12  # every body whole: the pages before the cut
            whole = measure(client, url, args.requests)
            present.BODY_SHOWN_CHARS = cut_at
            rows[label] = {"cut": cut, "whole": whole}
        body = measure(client, f"{base}events/1/body/", args.requests)
    print(
        f"{'page':<14}{'cut bytes':>12}{'whole bytes':>14}{'ratio':>8}{'cut ms':>9}{'whole ms':>10}"
    )
    for label, row in rows.items():
        cut, whole = row["cut"], row["whole"]
        print(
            f"{label:<14}{cut['bytes']:>12,}{whole['bytes']:>14,}"
            f"{cut['bytes'] / whole['bytes']:>8.3f}{cut['median_ms']:>9}{whole['median_ms']:>10}"
        )
    print(f"body route, one 1 MiB body: {body['bytes']:,} bytes in {body['median_ms']} ms")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    database = "postgresql" if args.dsn else "sqlite"
    RESULTS.write_text(
        json.dumps({"database": database, "pages": rows, "body_route": body}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
