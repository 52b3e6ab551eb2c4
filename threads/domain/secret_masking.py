"""Secrets taken out of an event before it is stored, where its workspace redacts them at
ingest (docs/event-log.md, "Secrets redacted at ingest").

Pure. The same plugins that flag an event (threads.domain.secrets) say what to take out: each
match of a plugin's expression that the plugin accepts gives way to a placeholder naming its
type, so the rest of the text reads as the agent wrote it. The matches are found here with
their spans (`analyze_string` yields only an expression's groups where it has some, which may be
a literal prefix such as `ghp`): see `_secret_span` for which part of a match goes. A private
key's plugin finds only the block's first line (`BEGIN RSA PRIVATE KEY`): a string holding one
is replaced whole, key material and all. Keys of objects are read too (a secret used as a key
is replaced by its placeholder, made unique within its object).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from threads.domain.secrets import SecretScanner, secret_scanner

# The type whose match is only a marker of what follows: its whole string goes.
WHOLE_STRING_TYPES = frozenset({"Private Key"})
# A group of an expression's match this long or longer is the secret itself (see _secret_span).
MIN_GROUP_SECRET = 8


def placeholder(secret_type: str) -> str:
    return f"[secret removed at ingest: {secret_type}]"


def masked_text(text: str, scanner: SecretScanner | None = None) -> str:
    """`text` with every secret the plugins find in it replaced by its placeholder."""
    scanner = scanner or secret_scanner()
    spans: list[tuple[int, int, str]] = []  # (start, end, type)
    for probe in scanner.probes:
        if not probe.may_match(text):
            continue
        for expression in probe.plugin.denylist:
            for match in expression.finditer(text):
                # The plugin's own checks of a match (a JWT must decode) still decide.
                if not any(True for _ in probe.plugin.analyze_string(match.group(0))):
                    continue
                if probe.secret_type in WHOLE_STRING_TYPES:
                    return placeholder(probe.secret_type)
                spans.append((*_secret_span(match), probe.secret_type))
    if not spans:
        return text
    out, at = [], 0
    for start, end, secret_type in sorted(spans):
        if end <= at:
            continue  # inside a span already replaced
        if start < at:  # overlaps the one before: that placeholder covers it
            at = end
            continue
        out.append(text[at:start] + placeholder(secret_type))
        at = end
    out.append(text[at:])
    return "".join(out)


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    """Where the secret is in a plugin's match. An expression's group holds either the secret
    (`aws…key = '(…40 characters…)'`, a URL's `:(password)@`) or a literal part of its shape
    (`(ghp|gho|…)_…`): the longest group is the secret when it is at least MIN_GROUP_SECRET
    characters, and the whole match otherwise (a short password takes its URL's `://user:`
    with it: more goes than the secret, never less)."""
    groups = [
        match.span(index)
        for index in range(1, (match.re.groups or 0) + 1)
        if match.start(index) != -1
    ]
    if groups:
        start, end = max(groups, key=lambda span: span[1] - span[0])
        if end - start >= MIN_GROUP_SECRET:
            return start, end
    return match.span()


def masked_value(value: Any, scanner: SecretScanner | None = None) -> Any:
    """A JSON value with the secrets of each of its strings (and keys) replaced; the same
    object when it holds none, so that an event without one is not copied."""
    scanner = scanner or secret_scanner()
    if isinstance(value, str):
        masked = masked_text(value, scanner)
        return value if masked == value else masked
    if isinstance(value, Mapping):
        items = []
        changed = False
        for key, item in value.items():
            new_key = masked_text(key, scanner) if isinstance(key, str) else key
            new_item = masked_value(item, scanner)
            changed = changed or new_key != key or new_item is not item
            items.append((new_key, new_item))
        if not changed:
            return value
        out: dict[Any, Any] = {}
        for key, item in items:
            unique, n = key, 1
            while unique in out:
                n += 1
                unique = f"{key} #{n}"
            out[unique] = item
        return out
    if isinstance(value, list):
        new_items = [masked_value(item, scanner) for item in value]
        if all(new is old for new, old in zip(new_items, value, strict=True)):
            return value
        return new_items
    return value
