"""Filters of the server's log (settings.LOGGING)."""

from __future__ import annotations

import logging


class RefusalsWithoutTraceback(logging.Filter):
    """A refused request (a 4xx: permission denied, not found...) is one line, not a
    traceback: Django logs some of them with the exception that made them, which says nothing
    an operator needs and buries the errors. A 5xx keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
