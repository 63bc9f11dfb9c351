"""Small value formats of the API: Go durations, Kubernetes quantities, model sizes, int-or-percent budgets."""

from __future__ import annotations

import math
import re

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class InvalidValue(ValueError):
    pass


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (30m, 1h30m, 45s, 1.5h)."""
    text = text.strip()
    if not text:
        raise InvalidValue("empty duration")
    pos = 0
    total = 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text):
        raise InvalidValue(f"invalid duration {text!r}: use a number and a unit, such as 30m or 1h30m")
    return total


def optional_duration(text: str | None) -> float | None:
    """Seconds in an optional setting: unset, empty or invalid reads as None (admission and the CLI report invalid
    values; a controller pass must not fail on one)."""
    try:
        return parse_duration(str(text)) if text else None
    except InvalidValue:
        return None


def format_duration(seconds: float) -> str:
    """A Go-style duration (1h0m0s), as Go prints them in messages."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_QUANTITY_FACTOR = {
    None: 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}


def parse_quantity(value: str | int | float) -> float:
    """A Kubernetes resource quantity (1, 500m, 30Gi) as a number."""
    if isinstance(value, (int, float)):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise InvalidValue(f"invalid quantity {value!r}")
    return float(match.group(1)) * _QUANTITY_FACTOR[match.group(2)]


_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([KMBT])?$", re.IGNORECASE)
_SIZE_FACTOR = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


def parse_model_size(text: str) -> float:
    """Parameters in a model size (500M, 7B, 8.03B, 1T)."""
    match = _SIZE.match(text.strip())
    if not match:
        raise InvalidValue(f"invalid model size {text!r}: use a number and M, B or T, such as 7B")
    unit = (match.group(2) or "").upper()
    return float(match.group(1)) * _SIZE_FACTOR.get(unit, 1.0)


def resolve_int_or_percent(value: int | str | None, total: int, *, round_up: bool = True) -> int | None:
    """An absolute count, or a percentage of `total` (rounded up by default); None stays None."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError as exc:
            raise InvalidValue(f"invalid percentage {value!r}") from exc
        raw = total * percent / 100
        return math.ceil(raw) if round_up else math.floor(raw)
    try:
        return int(text)
    except ValueError as exc:
        raise InvalidValue(f"invalid value {value!r}: use a whole number or a percentage such as 25%") from exc
