"""Load with faults, on the production stack (docs/reliability.md, "Load with faults").

    uv run python bench/faults.py                 # the full program, then a 40 s locust run
    uv run python bench/faults.py --locust 0      # the fault program only
    uv run python bench/faults.py --clients 4 --events 100 --kills 4   # a shorter one

Everything is started here on loopback, in a temporary folder: a PostgreSQL 15 cluster
(bench/ingest.py's throwaway cluster), Redis with an append-only file, gunicorn with two
workers and ctxadmin's config (docs/operations.md), and two Celery worker processes (prefork,
two children each). Then tests/reliability/faultload.py runs: 16 clients × 500 events on 8
threads through the Python client and a proxy that drops 5% of the answers after commit,
folds throughout, a worker SIGKILLed 20 times (restarted each time) and Redis restarted twice;
then it checks the state from the database. Prints the table and puts it into
docs/reliability.md between its markers.

`--locust SECONDS` then runs locust headless (bench/locustfile.py, 16 users) against the same
gunicorn, without faults, and reports requests/s and the error rate.
"""

from __future__ import annotations

import argparse
import csv
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ingest import throwaway_cluster  # noqa: E402 - bench/ is the script's own folder

from tests.stack import Gunicorn, Redis, Worker, process_env, run_manage  # noqa: E402

DOCS = ROOT / "docs" / "reliability.md"


def _setup_django(dsn: str, var_dir: Path) -> None:
    os.environ.update(
        DATABASE_URL=dsn,
        DJANGO_SETTINGS_MODULE="ctxadmin.settings",
        CTXADMIN_VAR_DIR=str(var_dir),
        CTXADMIN_LOG_LEVEL="ERROR",
    )
    os.environ.pop("CELERY_BROKER_URL", None)
    import django

    django.setup()


def _replace(text: str, marker: str) -> None:
    doc = DOCS.read_text()
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    if begin not in doc:
        raise SystemExit(f"{DOCS} has no {begin} marker")
    head, _, rest = doc.partition(begin)
    _, _, tail = rest.partition(end)
    DOCS.write_text(f"{head}{begin}\n{text}\n{end}{tail}")


def _markdown(rows: list[tuple[str, str]], command: str) -> str:
    lines = ["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)]
    return "\n".join([f"`{command}`", "", *lines])


def _locust(url: str, api_key: str, seconds: int, work: Path) -> list[tuple[str, str]]:
    prefix = work / "locust"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(ROOT / "bench" / "locustfile.py"),
            "--headless",
            "--users",
            "16",
            "--spawn-rate",
            "8",
            "--run-time",
            f"{seconds}s",
            "--host",
            url,
            "--csv",
            str(prefix),
            "--only-summary",
            "--loglevel",
            "WARNING",
        ],
        cwd=ROOT,
        env={**os.environ, "LOCUST_API_KEY": api_key},
        check=False,
        timeout=seconds + 120,
    )
    with open(f"{prefix}_stats.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    rows_out: list[tuple[str, str]] = [("users, run time", f"16, {seconds} s")]
    for row in rows:
        requests, failures = int(row["Request Count"]), int(row["Failure Count"])
        rate = 100.0 * failures / requests if requests else 0.0
        rows_out.append(
            (
                f"{row['Name']}" if row["Name"] != "Aggregated" else "**all requests**",
                f"{requests} requests, {float(row['Requests/s']):.1f}/s, "
                f"errors {failures} ({rate:.2f}%), p50 {row['50%']} ms, p95 {row['95%']} ms",
            )
        )
    return rows_out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--events", type=int, default=500, help="events per client")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--kills", type=int, default=20, help="worker SIGKILLs")
    parser.add_argument("--redis-restarts", type=int, default=2)
    parser.add_argument("--locust", type=int, default=40, metavar="SECONDS", help="0: none")
    parser.add_argument("--no-docs", action="store_true", help="do not touch docs/reliability.md")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ctxadmin-faults-"))
    (work / "var").mkdir()
    with throwaway_cluster() as dsn:
        env = process_env(
            dsn,
            "",
            work / "var",
            DJANGO_DEBUG="0",
            DJANGO_SECRET_KEY=secrets.token_urlsafe(48),
            DJANGO_SECURE_SSL_REDIRECT="0",
            CTXADMIN_API_RATE="",
            # A killed worker's fold comes back after 15 s instead of an hour, and an
            # in-flight marker of a dead worker is replaced after 15 s (docs/reliability.md).
            CTXADMIN_BROKER_VISIBILITY_TIMEOUT="15",
            CTXADMIN_PREPARED_TIMEOUT="15",
        )
        run_manage(env, "migrate", "--noinput")
        api_key = run_manage(env, "create_workspace", "faults").strip().splitlines()[-1]
        redis = Redis(work / "redis").start()
        env["CELERY_BROKER_URL"] = redis.url
        web = Gunicorn(env=env, log=work / "gunicorn.log")
        workers = [Worker(env=env, log=work / f"worker{n}.log", name=f"w{n}") for n in (1, 2)]
        try:
            web.start()
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.wait_ready()
            _setup_django(dsn, work / "var")
            from tests.reliability import faultload

            plan = faultload.Plan(
                clients=args.clients,
                events_per_client=args.events,
                threads=args.threads,
                worker_kills=args.kills,
                redis_restarts=args.redis_restarts,
            )
            deployment = faultload.Deployment(
                gunicorn=web, workers=workers, redis=redis, env=env, api_key=api_key
            )
            outcome = faultload.run(plan, deployment)
            rows = faultload.table(outcome)
            width = max(len(k) for k, _ in rows)
            for k, v in rows:
                print(f"{k:<{width}}  {v}")
            for error in outcome.client_errors[:20]:
                print("  ", error)
            print("verdict:", "all checks hold" if outcome.ok else "CHECKS FAILED")
            command = "uv run python bench/faults.py" + (
                ""
                if (args.clients, args.events, args.threads, args.kills) == (16, 500, 8, 20)
                else f" --clients {args.clients} --events {args.events} "
                f"--threads {args.threads} --kills {args.kills}"
            )
            rows.append(("verdict", "all checks hold" if outcome.ok else "**checks failed**"))
            if not args.no_docs:
                _replace(_markdown(rows, command), "faults")
            if args.locust:
                loc = _locust(web.url, api_key, args.locust, work)
                for k, v in loc:
                    print(f"{k}  {v}")
                if not args.no_docs:
                    cmd = f"uv run python bench/faults.py (its --locust {args.locust} part)"
                    _replace(_markdown(loc, cmd), "locust")
        finally:
            for worker in workers:
                worker.stop()
            web.stop()
            redis.stop()
    print(f"logs in {work}")


if __name__ == "__main__":
    main()
