"""Where a bench writes its latest run: between its marker comments in a document."""

from __future__ import annotations

from pathlib import Path


def replace_block(path: Path, block: str, begin: str, end: str) -> None:
    """Put `block` (which starts with `begin` and ends with `end`) where the last run's block
    stands in `path`, or, the first time, at the end of it."""
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        text = text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)
