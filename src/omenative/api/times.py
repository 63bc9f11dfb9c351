"""Timestamps as the API writes them (RFC 3339, UTC, whole seconds) and reads them. Defined once for the planners,
the controllers and `kubectl ome`."""

from __future__ import annotations

import datetime as dt


def parse_time(text: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp; None for none (a malformed one raises ValueError)."""
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def parse_datetime(text: str | None) -> dt.datetime | None:
    """An RFC 3339 timestamp as a datetime, for display; None for none or a malformed one."""
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def format_time(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
