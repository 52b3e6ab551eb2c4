"""Token counts of new events, counted once, at ingest, with tiktoken (offline: see
threads.domain.tokens).

A large batch is counted beside the rest of its append: tiktoken releases the GIL while it
encodes, so a helper thread counts while the request thread locks the thread and hashes the
chain.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from threads.domain import tokens
from threads.domain.events import NewEvent
from threads.domain.markers import MARKER_KINDS
from threads.domain.render import render_event


def event_token_counts(
    events: Sequence[tuple[dict[str, Any], Mapping[str, str] | None]], encoding: str
) -> list[int]:
    """Tokens of each event as a model reads it, from one call into tiktoken. Each event is
    (its stored form, or kind and fields; the canonical texts of its fields when known, see
    render_event). A retraction or a reset counts 0: markers are never shown to a model
    (docs/event-log.md, "Token counts")."""
    texts = [render_event(event, known) for event, known in events]
    counts = tokens.count_texts(texts, encoding)
    return [
        0 if event["kind"] in MARKER_KINDS else n + tokens.MESSAGE_OVERHEAD_TOKENS
        for (event, _), n in zip(events, counts, strict=True)
    ]


def event_token_count(
    stored: dict[str, Any], encoding: str, texts: Mapping[str, str] | None = None
) -> int:
    return event_token_counts([(stored, texts)], encoding)[0]


# From this many events, a batch's tokens are counted on a helper thread (tiktoken releases the
# GIL while it encodes) while this one locks the thread and hashes the chain.
TOKENS_ASIDE_MIN = 32
TOKEN_CHUNKS = 4
_token_pool: tuple[int, ThreadPoolExecutor] | None = None


class TokenCounts:
    """Each event's token count (event_token_count) in one encoding, in order. A large batch is
    counted in a few chunks, each in one call into tiktoken that runs without the GIL: a helper
    thread starts on them at once, beside this thread's work, and result() counts the chunks
    the helper has not reached yet, then waits for it."""

    def __init__(self, new_events: Sequence[NewEvent], encoding: str) -> None:
        self.encoding = encoding
        self._events = new_events
        self._counts = [0] * len(new_events)
        self._helper: Future[None] | None = None
        size = max(TOKENS_ASIDE_MIN, -(-len(new_events) // TOKEN_CHUNKS))
        # next() on the iterator is atomic under the GIL: each chunk is counted once.
        self._chunks = iter(range(0, len(new_events), size))
        self._size = size
        if len(new_events) >= TOKENS_ASIDE_MIN:
            self._helper = _token_helper().submit(self._count)

    def _count(self) -> None:
        for start in self._chunks:
            chunk = self._events[start : start + self._size]
            self._counts[start : start + len(chunk)] = event_token_counts(
                [({"kind": new.kind, **new.data}, new.data_texts) for new in chunk], self.encoding
            )

    def result(self) -> list[int]:
        self._count()
        if self._helper is not None:
            self._helper.result()  # the chunk it was counting, and any error it met
        return self._counts

    def cancel(self) -> None:
        """Not needed after all: the helper finishes the chunk it is on and takes no other."""
        for _ in self._chunks:
            pass


def _token_helper() -> ThreadPoolExecutor:
    global _token_pool
    if _token_pool is None or _token_pool[0] != os.getpid():
        # One per process: a pool inherited through fork has no thread behind it.
        _token_pool = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="ctxadmin-tokens"))
    return _token_pool[1]


# The encoding each thread had at its last append in this process, by (workspace, the id the
# agent uses): an append starts counting in it before it has read the thread. Only a guess:
# counted in another encoding than the thread's, the events are counted again.
_encoding_guesses: dict[tuple[Any, str], str] = {}
_ENCODING_GUESSES_MAX = 10_000


def encoding_guess(key: tuple[Any, str]) -> str:
    """The encoding to start counting in for the thread `key` names: its encoding at its last
    append in this process, else the default one."""
    return _encoding_guesses.get(key, tokens.DEFAULT_ENCODING)


def remember_encoding(key: tuple[Any, str], encoding: str) -> None:
    if len(_encoding_guesses) >= _ENCODING_GUESSES_MAX:
        _encoding_guesses.clear()
    _encoding_guesses[key] = encoding
