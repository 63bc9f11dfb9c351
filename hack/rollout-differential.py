"""Differential check of the rollout planner: random multi-pass scenarios (canary, blue-green, rolling update with
ratio, sequence; promote, rollback, pause, repin, analysis samples, progress deadline), one JSON line per pass.
Run it under two source trees and compare the output, to show a reshape changed no decision:

    git worktree add /tmp/base <commit>
    PYTHONPATH=/tmp/base/src .venv/bin/python hack/rollout-differential.py 0 3000 > /tmp/base.jsonl
    PYTHONPATH=src .venv/bin/python hack/rollout-differential.py 0 3000 > /tmp/head.jsonl
    cmp /tmp/base.jsonl /tmp/head.jsonl
"""
import json
import random
import sys

import attrs

from omenative.controllers.inferenceservice import rollout as r

REVS = ["aaaa1111", "bbbb2222", "cccc3333"]

def carry(outcome, previous):
    out = dict(previous or {})
    out.update(outcome.status)
    for key in ("rollout", "rolloutCoordination"):
        if key not in outcome.status:
            out.pop(key, None)
    components = dict(out.get("components") or {})
    for name, fields in outcome.components.items():
        components[name] = {**components.get(name, {}), **fields}
    out["components"] = components
    return out

def step(rng):
    s = {"capacity": rng.choice(["25%", "50%", 1, 2, "100%"]), "traffic": rng.choice([0, 10, 50, 100])}
    kind = rng.random()
    if kind < 0.25:
        s["pause"] = {}
    elif kind < 0.5:
        s["pause"] = {"duration": rng.choice(["10s", "1m"])}
    elif kind < 0.75:
        s["analysis"] = {"initialDelay": rng.choice(["0s", "30s"]), "interval": "20s",
                         "failureLimit": rng.choice([1, 2]),
                         "onInconclusive": rng.choice(["Rollback", "RollbackOnStall", "Wait"]),
                         "metrics": [{"name": "err", "query": "sum(x{ns=\"{{.Namespace}}\",r=\"{{.CanaryRevision}}\"})",
                                      "operator": rng.choice(["LT", "GT"]), "threshold": "0.5"}]}
    return s

def groups(rng, names):
    kind = rng.random()
    if kind < 0.55:
        canary = {"steps": [step(rng) for _ in range(rng.randint(1, 3))]}
        if rng.random() < 0.3:
            canary["readyTimeout"] = rng.choice(["30s", "2m"])
        if rng.random() < 0.3:
            canary["scaleDownDelaySeconds"] = rng.choice([0, 30])
        return [{"components": names, "progression": "Canary", "canary": canary}]
    if kind < 0.7:
        return [{"components": names}]
    if kind < 0.85:
        return [{"components": names, "progression": "RollingUpdate", "rollingUpdate": {"maxSurge": 1},
                 "maintainRatio": {"tolerance": rng.choice([5, 50])}}]
    return [{"components": [n], "order": [n], "soak": rng.choice(["0s", "30s"])} for n in names]

def scenario(seed):
    rng = random.Random(seed)
    names = rng.choice([["engine"], ["engine", "decoder"], ["router", "engine", "decoder"]])
    grp = groups(rng, names)
    desired = {n: rng.randint(1, 4) for n in names}
    stable = dict.fromkeys(names, REVS[0])
    target = dict.fromkeys(names, REVS[1])
    on_new = dict.fromkeys(names, 0)
    previous = {}
    now = 1_000_000.0
    lines = []
    for i in range(rng.randint(3, 12)):
        if rng.random() < 0.08:
            target = {n: rng.choice(REVS) for n in names}
        for n in names:
            on_new[n] = max(0, min(desired[n], on_new[n] + rng.choice([-1, 0, 1, 1, 2])))
        members = {}
        for n in names:
            rows = [(target[n], rng.random() < 0.8, rng.random() < 0.05) for _ in range(on_new[n])]
            rows += [(stable[n], True, False) for _ in range(desired[n] - on_new[n])]
            members[n] = r.Member(name=n, desired=desired[n], target=target[n], stable=stable[n],
                                  revisions=tuple(rows), pairing=rng.choice([None, "p1"]),
                                  pairings={target[n]: None, stable[n]: rng.choice([None, "p1"])})
        ann = {}
        x = rng.random()
        if x < 0.15:
            ann[r.PROMOTE_ANNOTATION] = target[names[0]]
        elif x < 0.22:
            ann[r.ROLLBACK_ANNOTATION] = "true"
        elif x < 0.3:
            ann[r.PAUSED_ANNOTATION] = rng.choice(["true", "freeze"])
        elif x < 0.34:
            ann[r.REPIN_ANNOTATION] = "now"
        if rng.random() < 0.1:
            ann[r.READY_TIMEOUT_ANNOTATION] = "45s"
        inputs = r.Inputs(groups=grp, members=members, annotations=ann, previous=previous, now=now,
                          progress_deadline=rng.choice([None, 60.0]), default_prometheus="http://p")
        reqs = r.analysis_requests(inputs, "svc", "ns")
        samples = {}
        for q in reqs:
            samples[q.group] = [r.judge(m, rng.choice([None, [0.1], [0.9], [float("nan")]]), None, now)
                                for m in q.metrics]
        if samples:
            inputs = attrs.evolve(inputs, samples=samples)
        out = r.plan(inputs, "svc")
        lines.append(json.dumps({
            "seed": seed, "pass": i, "req": [[q.group, q.component, q.address, q.metrics] for q in reqs],
            "directives": {k: [v.partition, v.max_unavailable, v.rollback_to, v.paused, v.freeze, v.hold]
                           for k, v in sorted(out.directives.items())},
            "status": out.status, "components": out.components, "conditions": out.conditions,
            "events": [list(e) for e in out.events], "consume": out.consume, "wake": out.wake_in,
            "rollbacks": out.rollbacks}, sort_keys=True, default=str))
        previous = carry(out, previous)
        if rng.random() < 0.3 and all(on_new[n] == desired[n] for n in names):
            stable = dict(target)
        now += rng.choice([1, 5, 15, 30, 61, 120])
    return lines

lo, hi = int(sys.argv[1]), int(sys.argv[2])
for seed in range(lo, hi):
    for line in scenario(seed):
        print(line)
