"""Token counting offline: the bundled BPE files, loaded once per process even under threads."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threads.domain import tokens


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty tiktoken cache and no encoding loaded yet in this process."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tokens, "_encodings", {})
    return tmp_path


def test_threads_that_load_an_encoding_first_share_one_load(fresh_cache: Path) -> None:
    barrier = threading.Barrier(8)
    counts: list[int] = []
    errors: list[BaseException] = []

    def count() -> None:
        barrier.wait()
        try:
            counts.append(tokens.count_text("hello offline world", "o200k_base"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=count) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert len(set(counts)) == 1 and counts[0] > 0
    assert [p.name for p in fresh_cache.iterdir() if p.name.endswith(".tmp")] == []


def test_special_token_text_counts_as_ordinary_text(fresh_cache: Path) -> None:
    text = "before <|endoftext|> after"
    encoding = tokens.get_encoding("cl100k_base")
    assert tokens.count_text(text, "cl100k_base") == len(
        encoding.encode(text, disallowed_special=())
    )
    assert tokens.count_text(text, "cl100k_base") > len(encoding.encode("before  after"))


def test_an_encoding_that_is_not_bundled_is_a_clear_error(fresh_cache: Path) -> None:
    with pytest.raises(tokens.EncodingUnavailable, match="not available offline"):
        tokens.count_text("x", "p50k_base")


special_heavy_text = st.lists(
    st.sampled_from(["<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>", "<|", "|>", " ", "\n"])
    | st.text(max_size=30),
    max_size=6,
).map("".join)


@settings(max_examples=60, deadline=None)
@given(st.lists(special_heavy_text, max_size=12), st.sampled_from(tokens.SUPPORTED_ENCODINGS))
def test_counting_many_texts_at_once_counts_each_as_alone(texts: list[str], encoding: str) -> None:
    assert tokens.count_texts(texts, encoding) == [tokens.count_text(t, encoding) for t in texts]


def test_counting_many_texts_keeps_their_boundaries() -> None:
    # Joined without a hard boundary, "ab" + "cd" could merge into fewer tokens than apart.
    texts = ["hello", " world", "", "<|endoftext|>", "Ünïcödé 数据", '{"a":[1,2]}' * 20]
    assert tokens.count_texts(texts, "cl100k_base") == [
        tokens.count_text(t, "cl100k_base") for t in texts
    ]
