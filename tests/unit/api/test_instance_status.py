"""Instance rows stay small: 5,000 Instances under upstream OME's 825,000-byte bar, 20,000 under etcd's 1.5 MiB."""

from __future__ import annotations

import json
import random

import pytest

from omenative.api.instance_status import (
    MAX_STATUS_BYTES,
    decode_rows,
    encode_rows,
    format_index_set,
    parse_index_set,
    progress_only,
)
from omenative.api.types import InstanceOperation, InstanceStatus, LastFailure

ETCD_LIMIT = 1_572_864  # 1.5 MiB


def fleet(size: int, *, failure_share: float = 0.05, seed: int = 7) -> list[InstanceStatus]:
    """A realistic fleet in the middle of a rollout: most Instances Ready, some updating, a few failed."""
    rng = random.Random(seed)
    old, new = "llama-pd-engine-5d8f9c7a4b", "llama-pd-engine-a1b2c3d4e5"
    rows = []
    for index in range(size):
        roll = rng.random()
        phase = "Ready" if roll > 0.06 else ("Updating" if roll > 0.02 else "Failed")
        row = InstanceStatus(
            index=index, incarnation=rng.choice([1, 1, 1, 2, 3]), phase=phase,
            running_revision=old if index % 3 else new, target_revision=new,
            pod_count=2, serving_pod_count=2 if phase == "Ready" else 0,
            available_pod_count=2 if phase == "Ready" else 0)
        if rng.random() < failure_share or phase == "Failed":
            row.last_failure = LastFailure(
                pod_name=f"llama-pd-engine-{index}-worker-0", container_name="ome-container", reason="OOMKilled",
                exit_code=137, message="container ome-container was OOM-killed (limit 30Gi)",
                time="2026-11-30T10:15:00Z")
        if phase == "Updating":
            row.operation = InstanceOperation(type="Update", step="Surge", started_at="2026-11-30T10:20:00Z",
                                              deadline="2026-11-30T10:50:00Z", target_revision=new)
        rows.append(row)
    return rows


def size_of(fields: dict[str, object]) -> int:
    return len(json.dumps(fields, separators=(",", ":")))


@pytest.mark.parametrize(("instances", "limit"), [(5_000, 825_000), (20_000, ETCD_LIMIT)])
def test_status_rows_stay_under_the_size_bars(instances: int, limit: int) -> None:
    rows = fleet(instances)
    encoded = encode_rows(rows)
    size = size_of(encoded)
    print(f"{instances} Instances: {size} bytes ({encoded.get('instanceStatusEncoding', 'DenseV1')})")
    assert size < limit
    assert [r.to_dict() for r in decode_rows(encoded)] == [r.to_dict() for r in rows]


def test_a_fleet_where_every_instance_failed_differently_is_summarised_not_refused() -> None:
    rows = fleet(20_000, failure_share=1.0)
    for row in rows:
        assert row.last_failure is not None
        row.last_failure.message = f"instance {row.index}: " + "x" * 600
    encoded = encode_rows(rows)
    assert size_of(encoded) < ETCD_LIMIT
    columns = encoded["instanceStatusColumns"]
    assert isinstance(columns, dict) and columns.get("omittedEntries", 0) > 0
    decoded = decode_rows(encoded)
    # Phases, revisions and counts stay exact for every Instance; only old failure detail goes.
    assert [(r.index, r.phase, r.running_revision, r.pod_count) for r in decoded] == \
        [(r.index, r.phase, r.running_revision, r.pod_count) for r in rows]
    assert size_of(encoded) <= MAX_STATUS_BYTES + 1_000


def test_a_small_fleet_keeps_the_readable_dense_rows() -> None:
    encoded = encode_rows(fleet(3))
    assert "instanceStatuses" in encoded and "instanceStatusEncoding" not in encoded


@pytest.mark.parametrize(("indexes", "text"), [([], ""), ([0], "0"), ([0, 1, 2, 3, 5], "0-3,5"),
                                               ([9, 2, 3, 10, 12], "2-3,9-10,12"), ([4, 4], "4")])
def test_index_sets(indexes: list[int], text: str) -> None:
    assert format_index_set(indexes) == text
    assert parse_index_set(text) == sorted(set(indexes))


@pytest.mark.parametrize("instances", [1, 200])  # the dense encoding, then the columnar one
def test_only_pod_counts_moving_is_progress(instances: int) -> None:
    """Pods created or put in rotation move only the counts (written later, with the next change that matters); a
    phase or a replica count moving is never progress only."""
    def status(phase: str, pods: int, ready: int = 0) -> dict:
        rows = [InstanceStatus(index=i, incarnation=1, phase=phase, pod_count=pods, serving_pod_count=0,
                               available_pod_count=0) for i in range(instances)]
        return {"readyReplicas": ready, **encode_rows(rows)}

    creating = status("Creating", 0)
    assert ("instanceStatuses" in creating) is (instances == 1)
    assert progress_only(creating, status("Creating", 2))
    assert not progress_only(creating, creating)  # nothing to write at all
    assert not progress_only(creating, status("Ready", 2))
    assert not progress_only(creating, status("Creating", 2, ready=1))
