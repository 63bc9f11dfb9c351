"""The per-Instance rows of an InferenceReplica's status, kept small however large the fleet.

Two encodings, the smaller one written:
- DenseV1: `instanceStatuses`, one row per Instance (what a small fleet shows best);
- ColumnarV2: `instanceStatusColumns`, where a value many Instances share (phase, incarnation, revisions, pod
  counts) is written once with the Instances' indexes as ranges ("0-8,10-114,116"), and fields only some Instances
  have (an operation, a last failure, conditions) are listed per Instance under `entries`.

A fleet of 5,000 similar Instances takes a few kilobytes. If the entries alone would push the status past
`MAX_STATUS_BYTES` (far below etcd's 1.5 MiB request limit), failure messages are shortened, and then entries of
Instances that are Ready with nothing in flight are dropped first, counted in `omittedEntries`: their phase,
revisions and counts stay exact, only the detail of an old failure goes. `kubectl get irep` and `kubectl ome`
read both encodings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from omenative.api.types import InstanceStatus

ENCODING = "ColumnarV2"
MAX_STATUS_BYTES = 1_000_000
MAX_MESSAGE = 256

JSONDict = dict[str, Any]
_GROUPED = (  # (column, row field)
    ("phases", "phase"),
    ("incarnations", "incarnation"),
    ("runningRevisions", "runningRevision"),
    ("targetRevisions", "targetRevision"),
    ("podCounts", "podCount"),
    ("servingPodCounts", "servingPodCount"),
    ("availablePodCounts", "availablePodCount"),
)
# Index sets of the Instances whose field has one value (the other being the default), as OME's ColumnarV2 keeps
# `activeOrdinalOne`: (column, row field, the value it marks).
_FLAGGED = (("activeOrdinalOne", "activeOrdinal", 1),)
_GROUPED_FIELDS = {f for _, f in _GROUPED} | {f for _, f, _ in _FLAGGED} | {"index"}


def format_index_set(indexes: Iterable[int]) -> str:
    """Sorted indexes as ranges: [0,1,2,3,5] -> "0-3,5"."""
    values = sorted(set(indexes))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)


def parse_index_set(text: str) -> list[int]:
    out: list[int] = []
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def _dense(rows: list[InstanceStatus]) -> list[JSONDict]:
    return [row.to_dict() for row in sorted(rows, key=lambda r: r.index or 0)]


def encode_columnar(rows: list[InstanceStatus]) -> JSONDict:
    dense = _dense(rows)
    columns: JSONDict = {"members": format_index_set(r["index"] for r in dense)}
    for column, fieldname in _GROUPED:
        groups: dict[str, tuple[Any, list[int]]] = {}
        for row in dense:
            if fieldname in row:
                key = json.dumps(row[fieldname], sort_keys=True)
                groups.setdefault(key, (row[fieldname], []))[1].append(row["index"])
        if groups:
            columns[column] = [{"value": value, "indexes": format_index_set(idx)}
                               for value, idx in sorted(groups.values(), key=lambda g: min(g[1]))]
    for column, fieldname, value in _FLAGGED:
        if flagged := [row["index"] for row in dense if row.get(fieldname) == value]:
            columns[column] = format_index_set(flagged)
    entries = []
    for row in dense:
        sparse = {k: v for k, v in row.items() if k not in _GROUPED_FIELDS}
        if sparse:
            entries.append({"index": row["index"], **sparse})
    if entries:
        columns["entries"] = entries
    return columns


def decode_columnar(columns: JSONDict) -> list[InstanceStatus]:
    rows: dict[int, JSONDict] = {i: {"index": i} for i in parse_index_set(columns.get("members", ""))}
    for column, fieldname in _GROUPED:
        for group in columns.get(column) or []:
            for index in parse_index_set(group.get("indexes", "")):
                rows.setdefault(index, {"index": index})[fieldname] = group.get("value")
    for column, fieldname, value in _FLAGGED:
        for index in parse_index_set(columns.get(column) or ""):
            rows.setdefault(index, {"index": index})[fieldname] = value
    for entry in columns.get("entries") or []:
        index = int(entry["index"])
        rows.setdefault(index, {"index": index}).update({k: v for k, v in entry.items() if k != "index"})
    return [InstanceStatus.from_dict(rows[i]) for i in sorted(rows)]


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def _shrink(columns: JSONDict) -> JSONDict:
    """Keeps the columnar encoding under MAX_STATUS_BYTES by shortening, then dropping, sparse entries."""
    entries: list[JSONDict] = columns.get("entries") or []
    total = _size(columns)
    if total <= MAX_STATUS_BYTES:
        return columns
    for entry in entries:
        failure = entry.get("lastFailure")
        if failure and len(failure.get("message") or "") > MAX_MESSAGE:
            failure["message"] = failure["message"][: MAX_MESSAGE - 3] + "..."
    sizes = [_size(e) + 1 for e in entries]  # +1 for the separating comma
    total = _size(columns)
    # Drop what matters least first: Ready Instances with nothing in flight, the oldest failures, highest index.
    order = sorted(range(len(entries)), key=lambda i: (
        "operation" in entries[i], entries[i].get("lastFailure", {}).get("time", ""), -entries[i]["index"]))
    dropped: set[int] = set()
    budget = MAX_STATUS_BYTES - 40  # room for the omittedEntries count
    for i in order:
        if total <= budget:
            break
        dropped.add(i)
        total -= sizes[i]
    if dropped:
        columns["entries"] = [e for i, e in enumerate(entries) if i not in dropped]
        columns["omittedEntries"] = len(dropped)
    return columns


def encode_rows(rows: list[InstanceStatus]) -> JSONDict:
    """Status fields carrying the rows, in whichever encoding is smaller (and always under the size budget)."""
    columns = encode_columnar(rows)
    # A dense row is at least `{"index":N}` and a comma: when that alone outweighs the columns, the dense encoding
    # is not built (for thousands of rows, building and measuring it was most of a status write's cost).
    if sum(len(str(r.index)) + 11 for r in rows) <= _size(columns):
        dense = _dense(rows)
        if _size(dense) <= _size(columns) and _size(dense) <= MAX_STATUS_BYTES:
            return {"instanceStatuses": dense}
    return {"instanceStatusEncoding": ENCODING, "instanceStatusColumns": _shrink(columns)}


POD_COUNT_FIELDS = ("podCount", "servingPodCount", "availablePodCount")
POD_COUNT_COLUMNS = ("podCounts", "servingPodCounts", "availablePodCounts")


def without_pod_counts(status: JSONDict) -> JSONDict:
    """A status with its rows' pod counts left out, in either encoding."""
    out = dict(status)
    rows = out.get("instanceStatuses")
    if isinstance(rows, list):
        out["instanceStatuses"] = [{k: v for k, v in row.items() if k not in POD_COUNT_FIELDS}
                                   if isinstance(row, dict) else row for row in rows]
    columns = out.get("instanceStatusColumns")
    if isinstance(columns, dict):
        out["instanceStatusColumns"] = {k: v for k, v in columns.items() if k not in POD_COUNT_COLUMNS}
    return out


def progress_only(old: JSONDict, new: JSONDict) -> bool:
    """Whether a new status differs from the old one only in its rows' pod counts (routine progress: pods created,
    scheduled, put in rotation) and not in any phase, condition, revision or replica count."""
    return old != new and without_pod_counts(old) == without_pod_counts(new)


def decode_rows(status: JSONDict | None) -> list[InstanceStatus]:
    status = status or {}
    if status.get("instanceStatusEncoding") == ENCODING:
        return decode_columnar(status.get("instanceStatusColumns") or {})
    return [InstanceStatus.from_dict(r) for r in status.get("instanceStatuses") or []]
