"""Signed heads lines and what a published head says about a log (threads/domain/heads.py)."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from threads.domain.heads import PublishedHead, head_parse, head_sign, heads_check, public_key_id


def _head(key: Ed25519PrivateKey, seq: int, chain_head: str) -> PublishedHead:
    return head_sign(
        key,
        thread="t",
        workspace="w",
        seq=seq,
        chain_head=chain_head,
        algorithm="sha256",
        published_at="2026-12-01T00:00:00.000000Z",
    )


def test_a_signed_line_parses_and_an_edited_one_does_not() -> None:
    key = Ed25519PrivateKey.generate()
    keys = {public_key_id(key.public_key()): key.public_key()}
    line = _head(key, 3, "a" * 64).line()
    parsed_ok = head_parse(line, keys)[0]
    assert parsed_ok is not None and parsed_ok.line() == line
    parsed, reason = head_parse({**line, "seq": 2}, keys)
    assert parsed is None and reason == "the signature does not verify"
    other = Ed25519PrivateKey.generate()
    assert head_parse(_head(other, 3, "a" * 64).line(), keys)[1].startswith("signed with an")
    assert head_parse({"seq": 1}, keys) == (None, "not a heads line")


def test_heads_check_names_truncation_and_rewrite() -> None:
    key = Ed25519PrivateKey.generate()
    heads = [_head(key, 4, "h4"), _head(key, 8, "h8")]
    assert heads_check(heads, last_seq=9, stored_hashes={4: "h4", 8: "h8"}).ok
    cut = heads_check(heads, last_seq=6, stored_hashes={4: "h4"})
    assert (cut.ok, cut.first_bad_seq, cut.verified_until) == (False, 7, 6)
    rewritten = heads_check(heads, last_seq=9, stored_hashes={4: "h4", 8: "x"})
    assert (rewritten.first_bad_seq, rewritten.verified_until) == (8, 4)
