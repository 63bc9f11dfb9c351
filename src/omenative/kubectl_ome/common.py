"""What every `kubectl ome` command shares: how it prints (aligned tables, or whole reports as JSON or YAML), how it
refuses and asks for confirmation, and the time."""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from typing import Any

import yaml

REPORT_VERSION = "cli.ome.io/v1alpha1"


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("   ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())


def emit(report: dict[str, Any], output: str) -> None:
    if output == "json":
        print(json.dumps(report, indent=2))
    else:
        print(yaml.safe_dump(report, sort_keys=False), end="")


class Refused(Exception):
    """The action refuses; nothing was sent."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


ACTION_SECONDS = 45.0


def short_time(text: str | None) -> str:
    if not text:
        return "-"
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC)
    return when.strftime("%y-%m-%dT%H:%MZ")


def confirm(deadline: float) -> None:
    if not sys.stdin.isatty():
        raise Refused("action not confirmed; noninteractive input requires --yes")
    print("Confirm this exact action? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    if time.monotonic() > deadline:
        raise Refused("action timed out before it was confirmed")
    if answer not in ("y", "yes"):
        raise Refused("action not confirmed")


def print_table_err(rows: list[list[str]]) -> None:
    width = max(len(r[0]) for r in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}   {value}".rstrip(), file=sys.stderr)


class CommandError(Exception):
    """A command's refusal, printed as `error: <message>` with exit code 1."""


def print_rows(rows: list[tuple[str, str]], wide: bool) -> None:
    """FIELD/VALUE rows, long values cut unless `wide`; a refusal is never cut, since its end (the quota's figures,
    the policy that refused) is what a user acts on."""
    width = None if wide else 64
    print_table([["FIELD", "VALUE"]] + [[k, v if width is None or len(v) <= width or k.endswith("refused")
                                         else v[: width - 3] + "..."] for k, v in rows])


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
