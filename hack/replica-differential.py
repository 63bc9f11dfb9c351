"""Differential check of the InferenceReplica planner: random multi-pass runs of a small simulated world (pods that
come up, serve, crash, wedge, go unschedulable or vanish; refused creates, stopped nodes; resets and releases;
revision changes, partitions, pauses, scale changes, strategies and restart policies), one JSON line per pass.
Run it under two source trees and compare the output, to show a reshape changed no decision:

    git worktree add /tmp/base <commit>
    PYTHONHASHSEED=0 PYTHONPATH=/tmp/base/src .venv/bin/python hack/replica-differential.py 0 2000 > /tmp/base.jsonl
    PYTHONHASHSEED=0 PYTHONPATH=src .venv/bin/python hack/replica-differential.py 0 2000 > /tmp/head.jsonl
    cmp /tmp/base.jsonl /tmp/head.jsonl
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import attrs

from omenative.api.config import ControllerConfig
from omenative.api.instance_status import encode_rows
from omenative.api.types import RetryBlock
from omenative.controllers.inferencereplica import plan as replica
from omenative.observe.pods import ContainerRestart, PodFacts
from omenative.observe.refusals import Refusal

REVISIONS = ["rev1", "rev2", "rev3"]


def pod(rng: random.Random, index: int, incarnation: int, ordinal: int, revision: str, now: float) -> PodFacts:
    kind = rng.random()
    ready = kind < 0.7
    return PodFacts(
        name=f"s-engine-{index}-{ordinal}-{incarnation}", uid=f"u{index}-{ordinal}-{incarnation}-{now}",
        runner="leader" if ordinal == 0 else "worker", incarnation=incarnation, orphan=False, revision=revision,
        node=rng.choice(["n1", "n2", "n3"]), phase="Running" if kind < 0.9 else "Pending", terminating=False,
        deletion_at=None, scheduled=kind < 0.9, unschedulable_since=now if 0.9 <= kind < 0.95 else None,
        unschedulable_message="0/4 nodes" if 0.9 <= kind < 0.95 else None, containers_ready=ready, ready=ready,
        ready_since=now if ready else None, serving_gate=ready if rng.random() < 0.8 else None, restarts=(),
        wedged=("ome-container", "CrashLoopBackOff", "boom") if 0.7 <= kind < 0.8 else None, created=now,
        has_ip=kind < 0.9, reason="", message="",
        gates=("kueue.x-k8s.io/admission",) if 0.95 <= kind < 0.97 else ())


def world_step(rng: random.Random, out: replica.ReplicaPlan, pods: dict[int, list[PodFacts]], per: int,
               now: float) -> dict[int, list[PodFacts]]:
    """The cluster's answer to the plan: pods made for each row's incarnation, drained ones going, random faults."""
    rows = {r.index: r for r in out.rows}
    nxt: dict[int, list[PodFacts]] = {}
    for index, row in rows.items():
        have = [p for p in pods.get(index or 0, []) if not (p.terminating and rng.random() < 0.6)]
        have = [attrs.evolve(p, terminating=True, deletion_at=now + 30) if
                (p.incarnation != row.incarnation or row.phase == "Deleting") and rng.random() < 0.7 else p
                for p in have]
        if row.phase != "Deleting":
            live = {p.name for p in have if p.incarnation == row.incarnation and not p.terminating}
            for ordinal in range(per):
                candidate = pod(rng, index or 0, row.incarnation or 1, ordinal,
                                row.target_revision or "rev1", now)
                if candidate.name not in live and rng.random() < 0.8:
                    have.append(candidate)
        faults = []
        for p in have:
            x = rng.random()
            if x < 0.03:
                p = attrs.evolve(p, phase="Failed", containers_ready=False, ready=False, reason="Error")
            elif x < 0.05:
                p = attrs.evolve(p, restarts=(ContainerRestart("ome-container", 1, "OOMKilled", 137, None),))
            elif x < 0.25 and not p.terminating:
                p = attrs.evolve(p, containers_ready=True, ready=True, serving_gate=True, wedged=None,
                                 ready_since=p.ready_since or now, unschedulable_since=None, has_ip=True,
                                 phase="Running", gates=())
            faults.append(p)
        if rng.random() < 0.03:
            faults = faults[1:]  # a pod vanished
        if faults:
            nxt[index or 0] = faults
    return nxt


def run(seed: int) -> list[str]:
    rng = random.Random(seed)
    multi = rng.random() < 0.6
    per = 2 if multi else 1
    policy = rng.choice([replica.RECREATE, "None"]) if multi else rng.choice(["None", replica.RECREATE])
    strategy = rng.choice(["SurgeThenDrain", "RecreatePod", "InPlaceIfPossible", "InPlaceOnly"])
    view_fields: dict[str, Any] = {
        "component": "engine", "replicas": rng.randint(0, 5), "pods_per_instance": per, "update_revision": "rev1",
        "restart_policy": policy, "ready_timeout": rng.choice([None, 120.0, 600.0]),
        "min_ready_seconds": rng.choice([0, 0, 10]), "max_unavailable": rng.choice([None, 1, "50%", 0]),
        "multi_pod": multi, "podgroup_crd": rng.random() < 0.8, "update_strategy": strategy,
        "max_surge": rng.choice([None, 1, "25%", 0]), "revision_prefix": "s-engine-",
        "who": "InferenceReplica ns/s-engine component=engine",
        "config": ControllerConfig(stuck_pod_grace_period=rng.choice(["60s", None]),
                                   unschedulable_grace_period=rng.choice(["5m", None])),
    }
    rows: list[Any] = []
    pods: dict[int, list[PodFacts]] = {}
    blocks: list[RetryBlock] = []
    hold = None
    migrations: list[Any] = []
    now = 1_000_000.0
    lines = []
    was_ready = False
    for i in range(rng.randint(4, 14)):
        x = rng.random()
        if x < 0.12:
            view_fields["update_revision"] = rng.choice(REVISIONS)
        elif x < 0.18:
            view_fields["replicas"] = rng.randint(0, 6)
        extra: dict[str, Any] = {
            "partition": rng.choice([0, 0, 1, 2]), "pacing_budget": rng.choice([None, None, 1]),
            "paused": rng.random() < 0.1, "deleting": rng.random() < 0.04, "was_ready": was_ready,
            "reset_request": rng.choice([None] * 8 + ["0", "all", "1,2", "x"]),
            "release_request": rng.choice([None] * 9 + ["rev2", "s-engine-rev1"]),
        }
        extra["freeze"] = extra["paused"] and rng.random() < 0.5
        if rng.random() < 0.1 and rows:
            target = rng.choice(rows)
            extra["refusals"] = {target.index or 0: Refusal(
                cause=rng.choice(["QuotaExceeded", "InvalidPodSpec", "Forbidden"]), verb="create", kind="Pod",
                name="p", message='pods "p" is forbidden: exceeded quota: q', at=now, since=now - 5,
                incarnation=target.incarnation or 1)}
        if rng.random() < 0.05:
            extra["podgroups_terminating"] = frozenset({0})
        if rng.random() < 0.05:
            extra["unknown_nodes"] = frozenset({"n2"})
        view = replica.ReplicaView(**view_fields, **extra, rows=rows, pods=pods, now=now, retry_blocks=blocks,
                                   rollout_hold=hold, migrations=migrations)
        out = replica.plan(view)
        lines.append(json.dumps({
            "seed": seed, "pass": i, "rows": encode_rows(out.rows), "counts": attrs.asdict(out.counts),
            "current": out.current_revision, "conditions": [attrs.asdict(c) for c in out.conditions],
            "events": [[e.type, e.reason, e.message] for e in out.events], "wake": out.wake_in,
            "blocks": [attrs.asdict(b) for b in out.retry_blocks],
            "hold": attrs.asdict(out.rollout_hold) if out.rollout_hold else None, "answered": list(out.answered),
            "migrations": [attrs.asdict(m) for m in out.migrations], "audit": out.audit}, sort_keys=True,
            default=str))
        rows, blocks, hold, migrations = out.rows, out.retry_blocks, out.rollout_hold, out.migrations
        was_ready = any(c.type == "Ready" and c.status == "True" for c in out.conditions)
        now += rng.choice([1, 5, 15, 30, 61, 130, 700])
        pods = world_step(rng, out, pods, per, now)
    return lines


if __name__ == "__main__":
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    for seed in range(lo, hi):
        for line in run(seed):
            print(line)
