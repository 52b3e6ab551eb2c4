"""Signed chain heads published outside the database (docs/repairs.md, "Published chain heads"): the
publication, its files, the checks a verify makes against them, the task, the command and the
export."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

from tests import factories as f
from tests.services.chain_heads_setup import fill, heads_dir, rehash_from, truncate
from threads.domain.heads import public_key_id, signed_bytes
from threads.keys.heads import (
    heads_signing_key,
    public_key_load,
    public_key_pem,
    signing_key_generate,
)
from threads.models import Thread
from threads.selectors.published_heads import thread_published_heads
from threads.services.chain_heads import chain_heads_publish
from threads.services.integrity import integrity_check
from threads.tasks import publish_chain_heads_task

pytestmark = pytest.mark.django_db

__all__ = ["heads_dir"]


def _lines(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(directory.glob("heads-*.jsonl"))
        for line in path.read_text("utf-8").splitlines()
    ]


def test_a_publication_signs_one_line_per_moved_head(heads_dir: Path, thread: Thread) -> None:
    quiet = f.make_thread(thread.workspace, "quiet")  # no events: nothing to publish
    fill(thread, 3)
    publication = chain_heads_publish()
    thread.refresh_from_db()
    [line] = _lines(heads_dir)
    assert Path(publication.file).name.startswith("heads-")
    assert str(quiet.pk) not in {line["thread"] for line in _lines(heads_dir)}
    assert set(line) == {
        "thread",
        "workspace",
        "seq",
        "chain_head",
        "algorithm",
        "published_at",
        "key_id",
        "signature",
    }
    assert (line["thread"], line["workspace"], line["seq"], line["chain_head"]) == (
        str(thread.pk),
        "acme",
        3,
        thread.chain_head,
    )
    assert line["algorithm"] == "sha256"
    public = public_key_load(heads_dir / "heads.pub")
    assert line["key_id"] == public_key_id(public)
    public.verify(bytes.fromhex(line["signature"]), signed_bytes(line))  # raises if not
    # Nothing moved: nothing appended. A moved head: one more line, the first untouched.
    assert chain_heads_publish().published == []
    first = (heads_dir / Path(publication.file).name).read_bytes()
    fill(thread, 2)
    chain_heads_publish()
    assert (heads_dir / Path(publication.file).name).read_bytes().startswith(first)
    assert [h.seq for h in thread_published_heads(thread_id=thread.pk)[0]] == [3, 5]


def test_an_edited_heads_line_is_reported_by_verify(heads_dir: Path, thread: Thread) -> None:
    fill(thread, 6)
    path = Path(chain_heads_publish().file)
    line = json.loads(path.read_text("utf-8"))
    path.write_text(json.dumps({**line, "seq": 4}) + "\n", encoding="utf-8")
    thread.refresh_from_db()
    verdict = integrity_check(thread=thread, full=True)
    assert not verdict.ok and verdict.first_bad_seq == 4
    assert "not to be trusted: the signature does not verify" in verdict.detail


def test_a_head_that_does_not_extend_the_published_one_is_refused(
    heads_dir: Path, thread: Thread
) -> None:
    fill(thread, 6)
    chain_heads_publish()
    truncate(thread, keep=4)
    publication = chain_heads_publish()
    assert publication.published == []
    [(refused, reason)] = publication.refused
    assert refused == str(thread.pk) and "before the published seq 6" in reason
    # A forged extension is refused too: the chain from the published head does not recompute.
    other = f.make_thread(thread.workspace, "other")
    fill(other, 4)
    chain_heads_publish()
    fill(other, 2)
    rehash_from(other, 2, content="forged")
    assert {t for t, _ in chain_heads_publish().refused} == {str(thread.pk), str(other.pk)}
    assert [h.seq for h in thread_published_heads(thread_id=other.pk)[0]] == [4]


def test_the_keyed_chain_is_published_as_hmac(
    heads_dir: Path, workspace: Any, settings: Any
) -> None:
    settings.CTXADMIN_CHAIN_KEY = "s3cret"
    fill(f.make_thread(workspace, "keyed"), 2)
    chain_heads_publish()
    assert [line["algorithm"] for line in _lines(heads_dir)] == ["hmac-sha256"]


def test_without_a_signing_key_nothing_is_published(settings: Any, tmp_path: Path) -> None:
    settings.CTXADMIN_HEADS_DIR = tmp_path / "heads"
    settings.CTXADMIN_HEADS_SIGNING_KEY = ""
    settings.DEBUG = False
    with pytest.raises(ImproperlyConfigured):
        chain_heads_publish()
    with pytest.raises(CommandError):
        call_command("publish_chain_heads", stdout=io.StringIO())


def test_debug_generates_a_signing_key_beside_the_heads(
    settings: Any, tmp_path: Path, thread: Thread, caplog: Any
) -> None:
    settings.CTXADMIN_HEADS_DIR = tmp_path / "var" / "chain-heads"
    settings.CTXADMIN_HEADS_SIGNING_KEY = ""
    settings.DEBUG = True
    fill(thread, 1)
    chain_heads_publish()
    assert (tmp_path / "var" / "chain-heads-signing-key.pem").exists()
    assert "generated a chain heads signing key" in caplog.text
    assert heads_signing_key() is not None


def test_the_task_and_the_command_publish(heads_dir: Path, thread: Thread) -> None:
    fill(thread, 2)
    answer = publish_chain_heads_task.apply().get()
    assert answer["published"] == [{"thread": str(thread.pk), "seq": 2}]
    fill(thread, 1)
    out = io.StringIO()
    call_command("publish_chain_heads", stdout=out)
    assert out.getvalue().startswith("Published 1 head(s)")
    schedule = django_settings.CELERY_BEAT_SCHEDULE["publish-chain-heads"]
    assert schedule["task"] == "ctxadmin.publish_chain_heads"
    assert schedule["schedule"] == django_settings.CTXADMIN_HEADS_PERIOD


def test_verify_chains_names_a_truncation(heads_dir: Path, thread: Thread) -> None:
    fill(thread, 5)
    chain_heads_publish()
    truncate(thread, keep=3)
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("verify_chains", "--full", stdout=out)
    assert "first bad seq 4" in out.getvalue() and "truncated" in out.getvalue()


def _export(thread: Thread, path: Path) -> dict[str, Any]:
    call_command("export_thread", str(thread.pk), str(path), stdout=io.StringIO())
    header: dict[str, Any] = json.loads(path.read_text("utf-8").splitlines()[0])
    return header


def _verify_export(path: Path, *extra: str) -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command("verify_export", str(path), *extra, stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        return out.getvalue(), exc.returncode
    return out.getvalue(), 0


def test_the_export_carries_the_published_head_and_verify_export_checks_it(
    heads_dir: Path, thread: Thread, tmp_path: Path
) -> None:
    fill(thread, 5)
    chain_heads_publish()
    path = tmp_path / "thread.jsonl"
    header = _export(thread, path)
    assert header["published_head"]["seq"] == 5 and header["chain_key_id"] == ""
    key = str(heads_dir / "heads.pub")
    assert _verify_export(path, "--heads-key", key)[1] == 0
    # Another signing key does not vouch for the head.
    other = signing_key_generate(tmp_path / "other.pem")
    (tmp_path / "other.pub").write_bytes(public_key_pem(other.public_key()))
    output, code = _verify_export(path, "--heads-key", str(tmp_path / "other.pub"))
    assert code == 1 and "unknown key" in output


def test_an_export_of_a_truncated_log_fails_against_its_published_head(
    heads_dir: Path, thread: Thread, tmp_path: Path
) -> None:
    fill(thread, 5)
    chain_heads_publish()
    truncate(thread, keep=3)
    path = tmp_path / "thread.jsonl"
    _export(thread, path)
    output, code = _verify_export(path)
    assert code == 1 and "first bad seq 4" in output and "seq 5 was published" in output


def test_an_export_whose_published_head_was_removed_fails_with_the_heads_key(
    heads_dir: Path, thread: Thread, tmp_path: Path
) -> None:
    fill(thread, 3)
    chain_heads_publish()
    path = tmp_path / "thread.jsonl"
    _export(thread, path)
    lines = path.read_text("utf-8").splitlines()
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "published_head": None})
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _verify_export(path)[1] == 0  # without the key there is nothing to hold it to
    output, code = _verify_export(path, "--heads-key", str(heads_dir / "heads.pub"))
    assert code == 1 and "no published head" in output
