"""How `kubectl ome` prints: aligned tables, or whole reports as JSON or YAML."""

from __future__ import annotations

import json
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
