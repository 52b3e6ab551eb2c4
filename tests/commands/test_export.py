"""export_thread writes a file anyone can re-verify; verify_export checks it offline."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from tests import factories as f
from threads.models import Thread
from threads.services.redaction import event_redact

pytestmark = pytest.mark.django_db


COMMON = ("seq", "kind", "created_at", "client_event_id", "metadata", "hash")


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def independent_verify(path: Path) -> int:
    """A re-verifier written from docs/api.md, "Canonical forms and checksums" alone (chain v2:
    the link commits to a salted digest of the content; v1: to the event itself): no ctxadmin
    import. Returns the last seq."""
    header, *events = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    h = hashlib.sha256(f"ctxadmin/v1/{header['thread']}".encode()).hexdigest()
    for expected_seq, event in enumerate(events, start=1):
        assert event["seq"] == expected_seq
        if "content_digest" in event:
            salt = event.pop("content_salt")
            data = {k: v for k, v in event.items() if k not in COMMON and k != "content_digest"}
            content = _canonical({"data": data, "metadata": event["metadata"]})
            digest = hashlib.sha256(bytes.fromhex(salt) + content).hexdigest()
            assert digest == event["content_digest"], expected_seq
            names = ("seq", "kind", "created_at", "client_event_id", "content_digest")
            body = {"v": 2, **{k: event[k] for k in names if k in event}}
        else:
            body = {k: v for k, v in event.items() if k != "hash"}
        h = hashlib.sha256(h.encode() + _canonical(body)).hexdigest()
        assert h == event["hash"], expected_seq
    assert h == header["chain_head"]
    return len(events)


@pytest.fixture
def exported(thread: Thread, tmp_path: Path) -> Path:
    f.append(
        thread,
        {
            **f.user("Change the delivery address of order 10086 to Rue de l'Été 5"),
            "client_event_id": "u-1",
            "metadata": {"channel": "chat"},
        },
        f.annotation("constraint", "user", {"text": "keep express shipping"}),
        f.call("c1", "lookup_order", {"order_id": "10086"}),
        f.result("c1", value={"status": "processing"}),
        f.call("c2", "update_address", {"order_id": "10086"}, side_effect_key="o-10086-a"),
        f.result("c2", request_id="req-1", verified_facts=[{"key": "address", "value": "x"}]),
        f.assistant("Done ✓"),
    )
    path = tmp_path / "thread.jsonl"
    call_command("export_thread", thread.external_id, str(path), stdout=io.StringIO())
    return path


def _verify(path: Path) -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command("verify_export", str(path), stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        return out.getvalue(), exc.returncode
    return out.getvalue(), 0


def test_export_is_reverified_by_a_ten_line_verifier(exported: Path, thread: Thread) -> None:
    assert independent_verify(exported) == 7
    header, first, *_ = [json.loads(line) for line in exported.read_text().splitlines()]
    assert header["thread"] == str(thread.pk) and header["last_seq"] == 7
    assert first["client_event_id"] == "u-1" and first["metadata"] == {"channel": "chat"}
    assert "token_count" not in first
    lines = [json.loads(line) for line in exported.read_text().splitlines()[1:]]
    assert lines[3]["call_seq"] == 3 and lines[4]["idempotency_key"] == "o-10086-a"


def test_verify_export_accepts_an_intact_file_without_queries(
    exported: Path, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(0):
        output, code = _verify(exported)
    assert code == 0 and output.startswith("OK 7 events")


def _rewrite(path: Path, change: Any) -> None:
    lines = path.read_text("utf-8").splitlines()
    path.write_text("\n".join(change(lines)) + "\n", "utf-8")


def _modify(lines: list[str]) -> list[str]:
    event = json.loads(lines[4])
    event["tool_call_id"] = "c9"
    return lines[:4] + [json.dumps(event)] + lines[5:]


def _insert(lines: list[str]) -> list[str]:
    forged = {**json.loads(lines[5]), "kind": "message", "role": "assistant", "content": "hi"}
    return lines[:5] + [json.dumps(forged)] + lines[5:]


@pytest.mark.parametrize(
    ("change", "bad_seq"),
    [
        (_modify, 4),  # line 4 = seq 4 (header is line 0)
        (lambda lines: lines[:3] + lines[4:], 3),  # delete seq 3
        (lambda lines: lines[:2] + [lines[3], lines[2]] + lines[4:], 2),  # swap seqs 2 and 3
        (_insert, 5),  # a forged seq 5 before the real one
        (lambda lines: lines[:-2], 6),  # cut short
        (lambda lines: lines[:3] + ["not json"] + lines[4:], 3),
    ],
)
def test_verify_export_names_the_first_bad_seq(exported: Path, change: Any, bad_seq: int) -> None:
    _rewrite(exported, change)
    output, code = _verify(exported)
    assert code == 1
    assert f"first bad seq {bad_seq}:" in output


def test_verify_export_runs_with_the_database_unavailable(exported: Path) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": "postgres://nobody@127.0.0.1:9/unreachable",
        "PYTHONPATH": str(settings.BASE_DIR),
    }
    manage = [sys.executable, str(settings.BASE_DIR / "manage.py"), "verify_export"]
    intact = subprocess.run(
        [*manage, str(exported)], env=env, capture_output=True, text=True, timeout=120
    )
    assert intact.returncode == 0, intact.stderr
    assert "OK 7 events" in intact.stdout
    _rewrite(exported, _modify)
    broken = subprocess.run(
        [*manage, str(exported)], env=env, capture_output=True, text=True, timeout=120
    )
    assert broken.returncode == 1 and "first bad seq 4" in broken.stdout


def test_keyed_export_needs_the_key(thread: Thread, tmp_path: Path, settings: Any) -> None:
    settings.CTXADMIN_CHAIN_KEY = "s3cret"
    keyed = f.make_thread(thread.workspace, "keyed")
    f.append(keyed, f.user("hello"), f.assistant("hi"))
    path = tmp_path / "keyed.jsonl"
    call_command("export_thread", "keyed", str(path), stdout=io.StringIO())
    settings.CTXADMIN_CHAIN_KEY = ""
    output, code = _verify(path)
    assert code == 2
    out = io.StringIO()
    call_command("verify_export", str(path), "--key", "s3cret", stdout=out)
    assert out.getvalue().startswith("OK 2 events")
    with pytest.raises(CommandError):
        call_command("verify_export", str(path), "--key", "wrong", stdout=io.StringIO())


def test_an_export_carries_a_redaction_and_verify_export_reports_it(
    exported: Path, thread: Thread, tmp_path: Path
) -> None:
    admin = f.make_person(thread.workspace, "ada", "admin")
    event_redact(thread=thread, seq=1, actor=admin, reason="the customer's address")
    path = tmp_path / "redacted.jsonl"
    call_command("export_thread", thread.external_id, str(path), stdout=io.StringIO())
    text = path.read_text("utf-8")
    assert "Rue de l" not in text and '"channel"' not in text
    header, first, *_ = [json.loads(line) for line in text.splitlines()]
    assert "content_salt" not in first and len(first["content_digest"]) == 64
    assert first["redacted"]["reason"] == "the customer's address"
    assert [r["seq"] for r in header["redactions"]] == [1]
    output, code = _verify(path)
    assert code == 0 and output.startswith("OK 7 events") and "redacted at seq 1" in output

    def reasoned(lines: list[str]) -> list[str]:
        event = json.loads(lines[1])
        event["redacted"]["reason"] = "another reason"
        return lines[:1] + [json.dumps(event)] + lines[2:]

    def unrecorded(lines: list[str]) -> list[str]:
        head = json.loads(lines[0])
        head["redactions"] = []
        return [json.dumps(head), *lines[1:]]

    original = path.read_text("utf-8")
    for change in (reasoned, unrecorded):
        path.write_text(original, "utf-8")
        _rewrite(path, change)
        output, code = _verify(path)
        assert code == 1 and "first bad seq 1:" in output, output
