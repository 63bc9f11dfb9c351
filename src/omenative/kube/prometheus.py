"""Instant queries against a Prometheus HTTP API, for canary analysis: the numbers of the result, or why there are
none."""

from __future__ import annotations

import math
from typing import Any

import aiohttp

QUERY_TIMEOUT = 5.0


async def instant_query(address: str, promql: str, headers: dict[str, str] | None = None,
                        timeout: float = QUERY_TIMEOUT) -> tuple[list[float] | None, str | None]:
    """(the sample values of an instant vector or scalar, None) or (None, the error)."""
    url = address.rstrip("/") + "/api/v1/query"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout), trust_env=False) as session, \
                session.get(url, params={"query": promql}, headers=headers or {}) as response:
            body: Any = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return None, f"query failed: {type(exc).__name__}: {exc}"[:300]
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, dict) else None
        return None, f"query failed: {error or 'unexpected answer'}"[:300]
    data = body.get("data") or {}
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar" and isinstance(result, list) and len(result) == 2:
        return [_number(result[1])], None
    if kind == "vector" and isinstance(result, list):
        return [_number((item.get("value") or [0, "NaN"])[1]) for item in result if isinstance(item, dict)], None
    return None, f"query returned a {kind or 'malformed'} result, not an instant vector"


def _number(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan
