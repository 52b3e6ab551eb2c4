"""A check's result and a verification's report (threads.domain.verify).

Each check is named, passes or fails, and its detail names at most MAX_DETAIL_ITEMS of the
offending entries or seqs, each labelled by its section and position.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

MAX_DETAIL_ITEMS = 5


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class Verification:
    ok: bool
    checks: list[Check] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
        }

    def failed(self) -> list[str]:
        return [c.name for c in self.checks if not c.ok]


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _label(section: str, index: int, entry: Mapping[str, Any]) -> str:
    for name in ("key", "tool_call_id", "ref", "text"):
        value = entry.get(name)
        if isinstance(value, str) and value:
            return f"{section}[{index}] ({name}={value[:40]!r})"
    return f"{section}[{index}]"


def _summarise(problems: list[str]) -> str:
    if not problems:
        return ""
    more = len(problems) - MAX_DETAIL_ITEMS
    head = "; ".join(problems[:MAX_DETAIL_ITEMS])
    return head + (f"; and {more} more" if more > 0 else "")


def _result(name: str, problems: list[str], ok_detail: str) -> Check:
    return Check(name=name, ok=not problems, detail=_summarise(problems) or ok_detail)
