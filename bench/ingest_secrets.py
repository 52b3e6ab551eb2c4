"""What secret detection at ingest costs: the API's append with CTXADMIN_DETECT_SECRETS on and
off, side by side in one run, on PostgreSQL (docs/benchmarks.md,
"Secret detection at ingest — `bench/ingest_secrets.py`").

    uv run python bench/ingest_secrets.py              # starts its own throwaway PostgreSQL 15
    uv run python bench/ingest_secrets.py --dsn postgres://user@host:5432/db
    uv run python bench/ingest_secrets.py --profile    # also cProfile the scan-on side

The events are bench/ingest.py's (the tau-bench conversations as agents post them), with a real-
looking key planted in one tool result in every 200 (AWS's documented example key id, a GitHub
token, a private key block, a password in a URL, in turn), so that the flagged path runs too.
Two comparisons, each interleaved request by request so that both sides share whatever else the
machine is doing, the order of the two sides swapped every round:
- batch ingest: 500 events a request, detection off to one thread, then on to another;
- single-event ingest: one event a request, off then on.
Also the scan alone (threads.domain.secrets, no database), per event, in batches of 500 and
one by one. Prints a table with the ratios (on over off) against the floor, writes
bench/results/secrets.json and the table into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from docblock import replace_block  # noqa: E402
from ingest import (  # noqa: E402
    BATCH,
    Bench,
    median_rate,
    settle,
    setup_django,
    tau_events,
    throwaway_cluster,
    timed,
)

RESULTS = ROOT / "bench" / "results" / "ingest-secrets.json"
DOCS = ROOT / "docs" / "benchmarks.md"
FLOOR = 0.9
PLANT_EVERY = 200
PLANTED = (
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "R2d2C3po" * 4 + "bb8x",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0t\n"
    "-----END RSA PRIVATE KEY-----",
    "postgres://app:s3cr3t-pw@db.internal:5432/prod",
)


def planted_events() -> tuple[list[dict[str, Any]], int]:
    """bench/ingest.py's events, one tool result in PLANT_EVERY carrying a secret; and how many."""
    events = tau_events()
    planted = 0
    results = [e for e in events if e["kind"] == "tool_result"]
    for n, event in enumerate(results[::PLANT_EVERY]):
        event["result"] = {"output": event.get("result"), "config": PLANTED[n % len(PLANTED)]}
        planted += 1
    return events, planted


def detecting(on: bool) -> None:
    from django.conf import settings

    settings.CTXADMIN_DETECT_SECRETS = on


class SideBySide:
    def __init__(self, bench: Bench) -> None:
        self.bench = bench

    def _post(self, thread: Any, body: bytes, on: bool) -> float:
        detecting(on)
        return timed(partial(self.bench.post, thread, body))

    def batch_round(self, events: list[dict[str, Any]], on_first: bool) -> dict[bool, float]:
        threads = {False: self.bench.new_thread(), True: self.bench.new_thread()}
        seconds = {False: 0.0, True: 0.0}
        for first in range(0, len(events), BATCH):
            body = json.dumps({"events": events[first : first + BATCH]}).encode()
            for on in (on_first, not on_first):
                seconds[on] += self._post(threads[on], body, on)
        return seconds

    def single_round(self, events: list[dict[str, Any]], on_first: bool) -> dict[bool, float]:
        threads = {False: self.bench.new_thread(), True: self.bench.new_thread()}
        seconds = {False: 0.0, True: 0.0}
        for event in events:
            body = json.dumps(event).encode()
            for on in (on_first, not on_first):
                seconds[on] += self._post(threads[on], body, on)
        return seconds


def scan_alone(events: list[dict[str, Any]]) -> dict[str, float]:
    """µs per event of the scan itself (no database), in batches of BATCH and one by one."""
    from threads.domain.events import normalize_event
    from threads.services.event_secrets import event_secret_flags

    detecting(True)
    new = [normalize_event(e, max_bytes=1 << 24) for e in events]
    out = {}
    for label, size in (("batch", BATCH), ("single", 1)):
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            for first in range(0, len(new), size):
                event_secret_flags(new[first : first + size])
            runs.append(time.perf_counter() - started)
        out[label] = statistics.median(runs) / len(new) * 1e6
    return out


def table(results: dict[str, Any]) -> str:
    rows = [
        "| comparison | detection on | detection off | ratio (on / off) | floor | verdict |",
        "|---|---|---|---|---|---|",
    ]
    labels = {
        "batch": "API batch ingest, 500/request",
        "single": "API single-event ingest",
    }
    for name, label in labels.items():
        r = results["comparisons"][name]
        verdict = "meets" if r["ratio"] >= FLOOR else "MISSES"
        rows.append(
            f"| {label} | {r['on_per_s']:,.0f} ev/s | {r['off_per_s']:,.0f} ev/s | "
            f"{r['ratio']:.3f}× | ≥ {FLOOR:.2f}× | {verdict} |"
        )
    return "\n".join(rows)


def write_docs(results: dict[str, Any], rendered: str) -> None:
    begin, end = "<!-- secrets:begin -->", "<!-- secrets:end -->"
    env, events, scan = results["environment"], results["events"], results["scan_us_per_event"]
    block = (
        f"{begin}\n"
        f"Measured {results['measured_at']} on {env['cpus']} cores, PostgreSQL "
        f"{env['postgresql']}, Python {env['python']}: {events['batch']} events in the batch "
        f"runs, {events['planted']} of them holding a planted secret, {events['single']} in the "
        f"single-event runs; median of {results['repeat']} runs; load average "
        f"{env['load_average_1min']['before']:.1f} → {env['load_average_1min']['after']:.1f}."
        f"\n\n{rendered}\n\n"
        f"The scan alone (no database): {scan['batch']:.1f} µs an event in batches of {BATCH}, "
        f"{scan['single']:.1f} µs for an event sent alone.\n{end}"
    )
    replace_block(DOCS, block, begin, end)


def profile_on(bench: Bench, events: list[dict[str, Any]], out: Path) -> None:
    side = SideBySide(bench)
    profiler = cProfile.Profile()
    profiler.enable()
    side.batch_round(events, True)
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).strip_dirs()
    stats.sort_stats("cumulative").print_stats(40)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text.getvalue())


def run(args: argparse.Namespace, dsn: str, var_dir: str) -> None:
    # Both sides post with one key, more than the default 1200 requests a minute.
    os.environ["CTXADMIN_API_RATE"] = "0"
    setup_django(dsn, var_dir)
    events, planted = planted_events()
    singles = events[: args.single]
    bench = Bench(dsn)
    side = SideBySide(bench)
    postgres_version = bench.raw.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    # Warm up both sides (imports, tiktoken's tables, the scanner, plan caches).
    side.batch_round(events, True)
    side.single_round(singles[:50], False)
    load_before = os.getloadavg()
    times: dict[str, dict[bool, list[float]]] = {
        "batch": {False: [], True: []},
        "single": {False: [], True: []},
    }
    for round_ in range(args.repeat):
        print(f"round {round_ + 1}/{args.repeat} …", file=sys.stderr)
        on_first = round_ % 2 == 0
        settle()
        for on, seconds in side.batch_round(events, on_first).items():
            times["batch"][on].append(seconds)
        settle()
        for on, seconds in side.single_round(singles, on_first).items():
            times["single"][on].append(seconds)
    load_after = os.getloadavg()
    detecting(True)
    comparisons = {}
    for name, count in (("batch", len(events)), ("single", len(singles))):
        on_rate = median_rate(count, times[name][True])
        off_rate = median_rate(count, times[name][False])
        comparisons[name] = {
            "on_per_s": on_rate,
            "off_per_s": off_rate,
            "ratio": on_rate / off_rate,
            "floor": FLOOR,
            "on_seconds": times[name][True],
            "off_seconds": times[name][False],
        }
    results = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "repeat": args.repeat,
        "events": {"batch": len(events), "single": len(singles), "planted": planted},
        "environment": {
            "cpus": os.cpu_count(),
            "postgresql": postgres_version,
            "python": sys.version.split()[0],
            "load_average_1min": {"before": load_before[0], "after": load_after[0]},
        },
        "comparisons": comparisons,
        "scan_us_per_event": scan_alone(events),
    }
    rendered = table(results)
    print(rendered)
    scan = results["scan_us_per_event"]
    print(f"\nscan alone: {scan['batch']:.1f} µs/event in batches, {scan['single']:.1f} alone")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    if not args.no_docs:
        write_docs(results, rendered)
        print(f"wrote {DOCS.relative_to(ROOT)}")
    if args.profile:
        out = RESULTS.parent / "ingest-secrets-profile.txt"
        profile_on(bench, events, out)
        print(f"wrote {out.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", help="a PostgreSQL database to migrate and write into")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--single", type=int, default=400, help="events in the single runs")
    parser.add_argument("--profile", action="store_true", help="cProfile the scan-on side")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxadmin-bench-var-") as var_dir:
        if args.dsn:
            run(args, args.dsn, var_dir)
        else:
            with throwaway_cluster() as dsn:
                run(args, dsn, var_dir)


if __name__ == "__main__":
    main()
