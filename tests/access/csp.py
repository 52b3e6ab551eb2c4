"""Reading a response's Content Security Policy."""

from __future__ import annotations

from django.http import HttpResponseBase


def directives(header: str) -> dict[str, list[str]]:
    parsed = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            parsed[words[0]] = words[1:]
    return parsed


def csp_script_problem(response: HttpResponseBase) -> str:
    """Why the page's policy would let an injected script run, or "" when it would not."""
    header = response.get("Content-Security-Policy", "")
    if not header:
        return "no Content-Security-Policy header"
    policy = directives(header)
    scripts = policy.get("script-src", policy.get("default-src", []))
    for word in ("'unsafe-inline'", "'unsafe-eval'", "*", "data:", "http:", "https:"):
        if word in scripts:
            return f"script-src allows {word}: {header}"
    return ""
