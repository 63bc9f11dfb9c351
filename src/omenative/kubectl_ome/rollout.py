"""`kubectl ome rollout status`, and the alpha `pause`, `resume`, `promote` and `rollback`, as OME's
reference/kubectl-ome/rollout.md describes them.

`status` reads the InferenceService's spec.rollout and the status the controller wrote (rolloutCoordination, each
component's canary, rolloutPhase and traffic). The actions follow the guarded flow of every mutating command: check,
preview on stderr, confirm (or `--yes`), read again, and send one JSON patch that tests the UID and resourceVersion
of the preview, so nothing is stored when the InferenceService changed meanwhile (exit 3).
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from typing import Any

from omenative.api import constants as c
from omenative.api.rollout import IN_FLIGHT, gate_of, plan_digest, primary_of, topology
from omenative.api.rollout_validation import is_sequence, progression, validate_rollout
from omenative.kubectl_ome.cluster import Cluster
from omenative.kubectl_ome.common import (
    ACTION_SECONDS,
    REPORT_VERSION,
    Refused,
    confirm,
    emit,
    print_table,
    print_table_err,
)
from omenative.obj import Obj

PAUSED = c.ANN_ROLLOUT_PAUSED
PROMOTE = c.ANN_ROLLOUT_PROMOTE
ROLLBACK = c.ANN_ROLLOUT_ROLLBACK
MAILBOXES = (PROMOTE, ROLLBACK)
CANARY_IN_FLIGHT = IN_FLIGHT
REPORTED_ORDER = ("Failed", "RollingBack", "RolledBack", "Paused", "Unknown", "InProgress", "Staged", "Succeeded")
STALE = "action refused: controller safety evidence is stale or inconsistent"
NO_WORK = "action refused: no applicable active rollout or lifecycle work was observed"
MAILBOX = "action refused: a rollout promote or rollback mailbox is present"
READ_FAILED = "required Kubernetes API request failed; check access and connectivity"
CONFLICT = "guarded annotation patch rejected; refresh rollout status and retry explicitly"


def groups_of(isvc: Obj) -> list[Obj]:
    return [g for g in (((isvc.get("spec") or {}).get("rollout") or {}).get("groups") or []) if isinstance(g, dict)]


def declared(isvc: Obj) -> list[str]:
    spec = isvc.get("spec") or {}
    return [name for name in c.COMPONENTS if spec.get(name) is not None]


def canary_groups(isvc: Obj) -> list[tuple[int, Obj]]:
    return [(i, g) for i, g in enumerate(groups_of(isvc)) if progression(g) == "Canary"]


def _phase_state(phase: str | None) -> str | None:
    return {"Failed": "Failed", "RollingBack": "RollingBack", "RolledBack": "RolledBack", "Paused": "Paused",
            "Pending": "InProgress", "Canarying": "InProgress", "Promoting": "InProgress", "Surging": "InProgress",
            "Waiting": "InProgress", "Shifting": "InProgress", "Draining": "InProgress", "ScalingDown": "InProgress",
            "Staged": "Staged",
            "Idle": "Succeeded", "Stable": "Succeeded"}.get(phase or "")


def status_report(isvc: Obj) -> Obj:
    """The status view of one InferenceService: the service's state and each component's rollout."""
    status = isvc.get("status") or {}
    components: Obj = status.get("components") or {}
    coordination = {g.get("name"): g for g in (status.get("rolloutCoordination") or {}).get("groups") or []}
    groups = groups_of(isvc)
    sequenced = is_sequence(groups)
    sequence = [i for i, g in enumerate(groups) if progression(g) != "Canary"] if sequenced else []
    rows: dict[str, Obj] = {}
    states: list[str] = []
    issues: dict[str, list[str]] = {"service": []}
    for name in declared(isvc):
        own: Obj = {}
        issues[name] = []
        index = next((i for i, g in enumerate(groups) if name in (g.get("components") or [])), None)
        if index is None:
            own["STRATEGY"] = "Independent"
        else:
            group = groups[index]
            kind = progression(group)
            if kind != "Canary" and index in sequence:
                own["GROUP"] = str(sequence[0])
                own["STRATEGY"] = "Sequential"
                entry = coordination.get("sequence")
            else:
                own["GROUP"] = str(index)
                own["STRATEGY"] = kind
                entry = coordination.get(str(index))
            if kind != "Canary":
                if entry is None:
                    own["GROUP-PHASE"] = "Unknown"
                    issues[name].append(f"GroupStatusMissing(group={index})")
                else:
                    own["GROUP-PHASE"] = str(entry.get("phase") or "Unknown")
                    if entry.get("currentComponent"):
                        own["GROUP-CURRENT"] = str(entry["currentComponent"])
                    if entry.get("previousComponent"):
                        own["GROUP-PREVIOUS"] = str(entry["previousComponent"])
                    states.append(_phase_state(entry.get("phase")) or "Unknown")
            else:
                names = [n for n in (group.get("components") or []) if n in declared(isvc)]
                primary = primary_of(names)
                block: Obj = (components.get(primary) or {})
                phase = block.get("rolloutPhase")
                steps = list((group.get("canary") or {}).get("steps") or [])
                canary: Obj = block.get("canary") or {}
                if phase:
                    own["GROUP-PHASE"] = phase
                if name == primary and phase:
                    own["PHASE"] = phase
                    states.append(_phase_state(phase) or "Unknown")
                    step = int(canary.get("currentStep") or 0)
                    if steps and phase in CANARY_IN_FLIGHT and 0 <= step < len(steps):
                        current = steps[step]
                        own["STEP"] = f"{step + 1}/{len(steps)}"
                        own["GATE"] = gate_of(current)
                        own["CAPACITY"] = str(current.get("capacity"))
                        observed = canary.get("observedTrafficWeight")
                        own["TRAFFIC"] = f"{current.get('traffic')}% -> " + (
                            f"{observed}%" if observed is not None else "-")
                    elif steps and phase in CANARY_IN_FLIGHT:
                        issues[name].append(f"CanaryStepInvalid(group={index})")
                elif name == primary and canary:
                    issues[name].append(f"CanaryStatusMissing(group={index})")
        lifecycle = (components.get(name) or {}).get("lifecycle") or {}
        hold = lifecycle.get("rolloutHold") or {}
        if hold.get("gate"):
            own["HOLD"] = f"{hold['gate']}: {hold.get('reason') or '-'}"
        if name not in components:
            issues[name].append("ComponentStatusMissing")
        rows[name] = own
    annotations = isvc["metadata"].get("annotations") or {}
    if annotations.get(PAUSED) in ("true", "freeze"):
        states.append("Paused")
    if not groups and not states:
        reported = "NotConfigured"
    else:
        reported = next((s for s in REPORTED_ORDER if s in states), "Succeeded")
    cond = next((x for x in status.get("conditions") or [] if x.get("type") == "RolloutCoordinationReady"), None)
    plain = [g for g in groups if progression(g) != "Canary"]
    coordination_value = "NotApplicable" if not plain else (str(cond.get("status")) if cond else "Unobserved")
    service: Obj = {"STATE": "Unknown" if groups or states else reported, "REPORTED": reported,
                    "EVIDENCE": "Reported" if groups or states else "Declared",
                    "EPOCH": "Unverifiable" if groups or states else "NotApplicable",
                    "COORDINATION": coordination_value}
    if groups or states:
        issues["service"].append("EpochUnverifiable")
    return {"service": service, "components": rows, "issues": issues}


def _read(cluster: Cluster, namespace: str, name: str) -> Obj | None:
    """The InferenceService a read command reports on; None (said on stderr) when there is none."""
    isvc = cluster.inference_service(namespace, name)
    if isvc is None:
        print(f'error: InferenceService "{name}" not found in namespace {namespace}', file=sys.stderr)
    return dict(isvc) if isvc is not None else None


def rollout_status(cluster: Cluster, namespace: str, name: str, output: str) -> int:
    isvc = _read(cluster, namespace, name)
    if isvc is None:
        return 1
    report = status_report(isvc)
    if output in ("json", "yaml"):
        emit({"apiVersion": REPORT_VERSION, "kind": "RolloutStatusReport", "inferenceService": name,
              "namespace": namespace, "content": report}, output)
        return 0
    names = ["engine", "decoder", "router"]
    header = ["FIELD", "SERVICE", *[n.upper() for n in names]]
    table = [header]
    for key, value in report["service"].items():
        table.append([key, value, *["-" for _ in names]])
    keys = ("GROUP", "STRATEGY", "GROUP-PHASE", "PHASE", "GROUP-CURRENT", "GROUP-PREVIOUS", "STEP", "GATE",
            "CAPACITY", "TRAFFIC", *(("HOLD",) if output == "wide" else ()))
    for key in keys:
        values = [str((report["components"].get(n) or {}).get(key, "")) for n in names]
        if any(values):
            table.append([key, "-", *[v or "-" for v in values]])
    issues = report["issues"]
    table.append(["ISSUES", ",".join(issues["service"]) or "-",
                  *[",".join(issues.get(n) or []) or "-" for n in names]])
    print_table(table)
    return 0


# ------------------------------------------------------------------------------------------------- actions


def read_target(cluster: Cluster, namespace: str, name: str) -> Obj:
    """The InferenceService an action changes, refused when it can't be read, lacks a safe identity or is being
    deleted (the target checks every action shares)."""
    try:
        isvc = cluster.inference_service(namespace, name)
    except Exception as exc:
        raise Refused(READ_FAILED) from exc
    if isvc is None:
        raise Refused(READ_FAILED)
    meta = isvc["metadata"]
    if not meta.get("uid") or not meta.get("resourceVersion") or not meta.get("generation"):
        raise Refused("action refused: target identity is missing or unsafe")
    if meta.get("deletionTimestamp"):
        raise Refused("action refused: target is being deleted")
    return dict(isvc)


def _check(cluster: Cluster, namespace: str, name: str, action: str,
           override_analysis: bool = False) -> tuple[Obj, str, str | None, list[str]]:
    """Reads the InferenceService and refuses an action that is not safe now. Returns it, the annotation to set
    (or remove), its new value (None: remove) and the preview's extra rows."""
    isvc = read_target(cluster, namespace, name)
    meta = isvc["metadata"]
    annotations: dict[str, str] = meta.get("annotations") or {}
    status = isvc.get("status") or {}
    paused = annotations.get(PAUSED)
    mailbox = any(k in annotations for k in MAILBOXES)
    if not status.get("components"):
        raise Refused("action refused: active runtime is unavailable, inconsistent or unbound")
    if action == "resume":
        if paused not in ("true", "freeze"):
            raise Refused("action refused: service has no recognized pause")
        if mailbox:
            raise Refused(MAILBOX)
        return isvc, PAUSED, None, [f"Pause depth         {paused}", f"Remove annotation   {PAUSED}",
                                    f'Value               "{paused}"']
    if mailbox:
        raise Refused(MAILBOX)
    if action == "pause":
        if paused in ("true", "freeze"):
            raise Refused("action refused: service is already paused; freeze is preserved")
        if not _work_in_progress(status):
            raise Refused(NO_WORK)
        return isvc, PAUSED, "true", [f"Set annotation      {PAUSED}", 'Value               "true"']
    # promote and rollback act on the one canary group of the active run.
    canaries = canary_groups(isvc)
    if len(canaries) > 1:
        raise Refused(STALE)
    if not canaries or not (status.get("rollout") or {}).get("activeRun"):
        raise Refused(NO_WORK)
    _, group = canaries[0]
    names = [n for n in (group.get("components") or []) if n in declared(isvc)]
    block = (status.get("components") or {}).get(primary_of(names)) or {}
    phase, canary = block.get("rolloutPhase"), block.get("canary") or {}
    target = canary.get("canaryRevisionHash")
    if paused in ("true", "freeze"):
        raise Refused("action refused: globally paused canary cannot consume a request")
    if not target or canary.get("rolledBackRevisionHash") == target:
        raise Refused(NO_WORK)
    steps = list((group.get("canary") or {}).get("steps") or [])
    step = int(canary.get("currentStep") or 0)
    if not 0 <= step < len(steps):
        raise Refused(STALE)
    rows = [f"Run                 {(status['rollout']['activeRun']).get('runID')}", f"Phase               {phase}",
            f"Step                {step} of {len(steps)} (zero-based)", f"Gate                {gate_of(steps[step])}",
            f"Canary revision     {target}", f"Stable revision     {canary.get('stableRevisionHash') or '-'}"]
    if action == "rollback":
        if phase not in CANARY_IN_FLIGHT:
            raise Refused(NO_WORK)
        return isvc, ROLLBACK, "true", [*rows, f"Set annotation      {ROLLBACK}", 'Value               "true"']
    if canary.get("preStepHold"):
        raise Refused("action refused: promote requires an active indefinite manual gate; analysis requires "
                      "explicit override")
    last = step == len(steps) - 1
    waiting = (phase == "Promoting" and int(steps[step].get("traffic") or 0) == 100) if last else phase == "Paused"
    wanted = "Analysis" if override_analysis else "Manual"
    if gate_of(steps[step]) != wanted or not waiting or not canary.get("stepReadyTime") or \
            canary.get("observedTrafficWeight") != steps[step].get("traffic"):
        raise Refused("action refused: promote requires an active indefinite manual gate; analysis requires "
                      "explicit override")
    return isvc, PROMOTE, str(target), [*rows, f"Set annotation      {PROMOTE}", f'Value               "{target}"']


def _work_in_progress(status: Obj) -> bool:
    if (status.get("rollout") or {}).get("activeRun"):
        return True
    for block in (status.get("components") or {}).values():
        lifecycle = block.get("lifecycle") or {}
        if block.get("rolloutPhase") in CANARY_IN_FLIGHT:
            return True
        if lifecycle.get("currentRevision") != lifecycle.get("updateRevision") or \
                int(lifecycle.get("updatedReplicas") or 0) < int(lifecycle.get("replicas") or 0):
            return True
    return False


def _send(cluster: Cluster, namespace: str, name: str, meta: Obj, annotation: str, value: str | None, *, yes: bool,
          dry_run: str, deadline: float, recheck: Any, unknown: str) -> tuple[bool, bool, str]:
    """The guarded flow after the preview: the prompt (or --yes), a second read that must find the same
    resourceVersion, then one JSON patch testing the UID and resourceVersion. Returns (accepted, applied, message)."""
    if not yes:
        confirm(deadline)
    try:
        again = recheck()
    except Refused as exc:
        raise Refused(CONFLICT, 3) from exc
    if again["metadata"].get("resourceVersion") != meta.get("resourceVersion"):
        raise Refused(CONFLICT, 3)
    if dry_run == "client":
        return False, False, "Validated locally; no patch sent."
    path = "/metadata/annotations/" + annotation.replace("~", "~0").replace("/", "~1")
    patch: list[Obj] = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
                        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")}]
    if value is None:
        patch.append({"op": "remove", "path": path})
    elif not meta.get("annotations"):
        patch.append({"op": "add", "path": "/metadata/annotations", "value": {annotation: value}})
    else:
        patch.append({"op": "add", "path": path, "value": value})
    try:
        cluster.patch_service(namespace, name, patch, dry_run=dry_run == "server")
    except Exception as exc:
        if getattr(exc, "status", None) in (409, 422):
            raise Refused(CONFLICT, 3) from exc
        raise Refused(unknown) from exc
    applied = dry_run == "none"
    return True, applied, ("API accepted annotation request; convergence not observed." if applied else
                           "API dry-run accepted; no changes persisted.")


def rollout_action(cluster: Cluster, namespace: str, name: str, action: str, *, dry_run: str, yes: bool, output: str,
                   context: str | None, override_analysis: bool = False) -> int:
    deadline = time.monotonic() + ACTION_SECONDS
    try:
        if override_analysis and (action != "promote" or not yes):
            raise Refused("--override-analysis applies to promote only and requires --yes")
        isvc, annotation, value, extra = _check(cluster, namespace, name, action, override_analysis)
        meta = isvc["metadata"]
        affected = ",".join(sorted((isvc.get("status") or {}).get("components") or {})) or "-"
        print("ALPHA guarded action preview (not controller convergence)", file=sys.stderr)
        print_table_err([["FIELD", "VALUE"], ["Action", f"rollout {action}"], ["Context", context or "-"],
                         ["Workload NS", namespace], ["Target", f"InferenceService/{name}"],
                         ["UID", str(meta.get("uid"))], ["ResourceVersion", str(meta.get("resourceVersion"))],
                         ["Dry-run", dry_run], ["Affected", affected]])
        for row in extra:
            print(row, file=sys.stderr)
        accepted, applied, message = _send(
            cluster, namespace, name, meta, annotation, value, yes=yes, dry_run=dry_run, deadline=deadline,
            recheck=lambda: _check(cluster, namespace, name, action, override_analysis)[0],
            unknown="annotation request outcome unknown; check rollout status before another explicit request")
        if accepted and override_analysis:
            message = "Analysis override: " + message
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    follow = f"kubectl ome rollout status {name} -n {namespace}" + (f" --context={context}" if context else "")
    revision = value if action == "promote" else None
    result = {
        "apiVersion": REPORT_VERSION, "kind": "ActionResult",
        "collectedAt": dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z"),
        "action": f"rollout {action}",
        "target": {"kind": "InferenceService", "namespace": namespace, "name": name, "uid": meta.get("uid"),
                   "resourceVersion": meta.get("resourceVersion")},
        "dryRun": dry_run, "revisionHash": revision, "accepted": accepted, "applied": applied, "message": message,
        "followUp": follow,
    }
    if output in ("json", "yaml"):
        emit(result, output)
        return 0
    fields = [["FIELD", "VALUE"], ["action", f"rollout {action}"], ["target", f"InferenceService/{namespace}/{name}"],
              ["dry-run", dry_run], ["accepted", "Yes" if accepted else "No"],
              ["applied", "Yes" if applied else "No"], ["request-id", "-"], ["revision-hash", revision or "-"],
              ["message", message], ["follow-up", follow], ["hint", "Use -o json or -o yaml for full values."]]
    width = 56 if output != "wide" else 200
    print_table([[k, v if len(v) <= width else v[:width - 3] + "..."] for k, v in fields])
    return 0


# --------------------------------------------------------------------------------------------- read commands


def _short(text: str | None) -> str:
    """A timestamp as MM-DDTHH:MM (UTC), as the reference prints TIME."""
    return text[5:16] if text and len(text) >= 16 else "-"


def _group_line(group: Obj) -> str:
    kind = progression(group)
    source = "Declared/Inline" if any(group.get(k) is not None for k in ("canary", "blueGreen", "rollingUpdate")) \
        else "Declared/Defaulted"
    return f"{kind}; components={','.join(group.get('components') or [])}; source={source}"


def _plan_rows(view: str, groups: list[Obj], head: str) -> list[list[str]]:
    rows = [[view, "PLAN", head]]
    for i, group in enumerate(groups):
        rows.append(["", f"GROUP {i}", _group_line(group)])
        config = []
        if group.get("soak") is not None:
            config.append(f"soak={group['soak']}(Configured)")
        if group.get("rollingUpdate") is not None:
            rolling = group["rollingUpdate"]
            for key, name in (("maxSurge", "surge"), ("maxUnavailable", "unavailable")):
                value = rolling.get(key)
                config.append(f"{name}={value}(Configured)" if value is not None else f"{name}=25%(Defaulted)")
        if group.get("maintainRatio") is not None:
            tolerance = (group.get("maintainRatio") or {}).get("tolerance")
            config.append(f"ratio={tolerance}(Configured)" if tolerance is not None else "ratio=Unresolved")
        for j, line in enumerate(config):
            rows.append(["", "CONFIG" if j == 0 else "", line])
        steps = list((group.get("canary") or {}).get("steps") or [])
        for k, step in enumerate(steps):
            rows.append(["", f"STEP {k + 1}/{len(steps)}",
                         f"capacity={step.get('capacity')}; traffic={step.get('traffic')}%; gate={gate_of(step)}"])
    return rows


def explain(cluster: Cluster, namespace: str, name: str, output: str) -> int:
    isvc = _read(cluster, namespace, name)
    if isvc is None:
        return 1
    status = isvc.get("status") or {}
    declared_groups = groups_of(isvc)
    run = (status.get("rollout") or {}).get("activeRun")
    pinned = [g.get("group") or {} for g in ((run or {}).get("plan") or {}).get("groups") or []]
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    rows = _plan_rows("Declared", declared_groups, f"groups={len(declared_groups)}")
    rows += _plan_rows("Live", declared_groups, f"mode=Live; groups={len(declared_groups)}")
    effective = pinned if run else declared_groups
    mode = "mode=Pinned; evidence=Reported" if run else "mode=Live; evidence=Declared"
    rows += _plan_rows("Effective", effective, f"{mode}; groups={len(effective)}")[:1]
    for key, kind in (("READY", "RolloutPlanReady"), ("DRIFT", "RolloutPlanDrift")):
        cond = conditions.get(kind)
        rows.append(["", key, f"{cond.get('status')}/{cond.get('reason')}; evidence=Reported" if cond
                     else "Unobserved; evidence=Unavailable"])
    if (isvc["metadata"].get("annotations") or {}).get(PAUSED) in ("true", "freeze"):
        rows.append(["", "HOLD", "GlobalPause; evidence=Declared"])
    components: Obj = status.get("components") or {}
    coordination = {g.get("name"): g for g in (status.get("rolloutCoordination") or {}).get("groups") or []}
    for i, group in enumerate(effective):
        rows.append(["", f"GROUP {i}", _group_line(group)])
        names = [n for n in group.get("components") or [] if n in declared(isvc)]
        if progression(group) == "Canary" and names:
            block = components.get(primary_of(names)) or {}
            canary = block.get("canary") or {}
            if canary.get("preStepHold"):
                rows.append(["", "HOLD", "CanaryPreStep; evidence=Reported"])
            if block.get("rolloutPhase"):
                rows.append(["", "PHASE", str(block["rolloutPhase"])])
                if block["rolloutPhase"] == "Paused" and not canary.get("preStepHold"):
                    rows.append(["", "HOLD", "ObservedPaused; evidence=Reported"])
            revisions = [f"{k}={canary[v]}" for k, v in (("stable", "stableRevisionHash"),
                                                         ("target", "canaryRevisionHash"),
                                                         ("rejected", "rolledBackRevisionHash")) if canary.get(v)]
            if revisions:
                rows.append(["", "REVISIONS", ",".join(revisions)])
            traffic = [f"{primary_of(names)}:{t.get('revisionName', '').rsplit('-', 1)[-1]}={t.get('percent')}%"
                       for t in block.get("traffic") or []]
            if traffic:
                rows.append(["", "TRAFFIC", ",".join(traffic)])
        else:
            entry = coordination.get(str(i)) or coordination.get("sequence") or {}
            if entry.get("phase"):
                rows.append(["", "PHASE", str(entry["phase"])])
            if entry.get("currentComponent") or entry.get("previousComponent"):
                rows.append(["", "SEQUENCE", f"current={entry.get('currentComponent') or '-'},"
                                             f"previous={entry.get('previousComponent') or '-'}"])
        for member in names:
            hold = ((components.get(member) or {}).get("lifecycle") or {}).get("rolloutHold") or {}
            if hold.get("gate"):
                rows.append(["", "HOLD", f"{member}: {hold['gate']}: {hold.get('reason') or '-'}"])
    if output in ("json", "yaml"):
        emit({"apiVersion": REPORT_VERSION, "kind": "RolloutExplainReport", "inferenceService": name,
              "namespace": namespace, "content": {"declared": declared_groups, "pinned": pinned,
                                                  "rows": [dict(zip(("view", "item", "detail"), r, strict=True))
                                                           for r in rows]}}, output)
        return 0
    print_table([["VIEW", "ITEM", "DETAIL"], *rows])
    return 0


def history(cluster: Cluster, namespace: str, name: str, output: str) -> int:
    isvc = _read(cluster, namespace, name)
    if isvc is None:
        return 1
    status = isvc.get("status") or {}
    rollout: Obj = status.get("rollout") or {}
    run, last = rollout.get("activeRun"), rollout.get("lastRun")
    report = status_report(isvc)
    records: list[list[str]] = []
    kept = bool(run or last)
    records.append(["WINDOW", "Partial" if kept else ("Empty" if status else "Unavailable"), "-", "-", "-",
                    "bounded"])
    records.append(["CURR", report["service"]["STATE"], "-", report["service"]["EVIDENCE"], "-",
                    "Unverified" if report["service"]["EPOCH"] == "Unverifiable" else "N/A"])
    if run:
        targets = run.get("targetRevisions") or []
        groups = (run.get("plan") or {}).get("groups") or []
        records.append(["ACTIVE", "Active", "-", str(run.get("runID", "-")).rsplit("-", 1)[-1],
                        _short(run.get("openedAt")), f"G:{len(groups)} T:{len(targets)}"])
        for target in targets:
            records.append(["TARGET", "Reported", str(target.get("component")), str(target.get("revision")), "-",
                            "run-target"])
        for i, group in enumerate(groups):
            records.append(["PROV-A", str(group.get("source") or "Inline"), f"g{i}",
                            plan_digest([group.get("group") or {}])[4:], _short(run.get("pinnedAt")), "-"])
    if last:
        records.append(["LAST", str(last.get("outcome", "-")), "-", "-", _short(last.get("closedAt")), "-"])
    for i, group in enumerate(groups_of(isvc)):
        records.append(["PROV-C", "Inline", f"g{i}", plan_digest([group])[4:], "-", "-"])
    for comp, block in (status.get("components") or {}).items():
        lifecycle = block.get("lifecycle") or {}
        for role, key in (("Current", "currentRevision"), ("Ready", "updateRevision")):
            if lifecycle.get(key):
                records.append(["REV", str(block.get("rolloutPhase") or "Unknown"), comp,
                                str(lifecycle[key]).rsplit("-", 1)[-1], "-", role])
    issues = sum(len(v) for v in report["issues"].values())
    if output in ("json", "yaml"):
        emit({"apiVersion": REPORT_VERSION, "kind": "RolloutHistoryReport", "inferenceService": name,
              "namespace": namespace, "content": {"activeRun": run, "lastRun": last, "records": [
                  dict(zip(("type", "state", "comp", "ident", "time", "detail"), r, strict=True)) for r in records]}},
             output)
        return 0
    print_table([["TYPE", "STATE", "COMP", "IDENT", "TIME", "DETAIL", "ISS"],
                 *[[*r[:2], r[2], r[3], r[4], r[5], str(issues)] for r in records]])
    return 0


def validate(cluster: Cluster, namespace: str, name: str, output: str) -> int:
    """The rollout checks of `validate`: the spec against admission's rules, and whether the controller resolved
    the plan. Exit 0 when OVERALL is Valid, 2 when Invalid or Unverifiable."""
    isvc = _read(cluster, namespace, name)
    if isvc is None:
        return 1
    spec = isvc.get("spec") or {}
    errors, _ = validate_rollout(spec, dict(isvc["metadata"].get("annotations") or {}))
    refs = [e for e in errors if "(RolloutPolicyRefUnsupported)" in e]
    order = [e for e in errors if "(OrderNotHonored)" in e or "(GroupOrderingNotHonored)" in e]
    rest = [e for e in errors if e not in refs and e not in order]
    groups = groups_of(isvc)
    run = ((isvc.get("status") or {}).get("rollout") or {}).get("activeRun")
    checks = [("ROLLOUT-REFS", "Invalid" if refs else "Valid", refs),
              ("ROLLOUT-PLAN", "Invalid" if rest else "Valid", rest),
              ("ROLLOUT-ORDER", "Invalid" if order else "Valid", order),
              ("ROLLOUT-RESOLVE", "Unverifiable" if groups or run else "NotApplicable", [])]
    results = [c[1] for c in checks]
    overall = "Invalid" if "Invalid" in results else "Unverifiable" if "Unverifiable" in results else "Valid"
    if output in ("json", "yaml"):
        emit({"apiVersion": REPORT_VERSION, "kind": "RolloutValidateReport", "inferenceService": name,
              "namespace": namespace, "content": {"overall": overall, "checks": [
                  {"check": c, "result": res, "issues": issues} for c, res, issues in checks]}}, output)
    else:
        fresh = {"NotApplicable": "Computed/NotApplicable", "Unverifiable": "Reported/Unverifiable"}
        table = [["CHECK", "COMP", "RESULT", "SOURCE"], ["OVERALL", "-", overall, "Computed/Current"]]
        table += [[c, "-", res, fresh.get(res, "Computed/Current")] for c, res, _ in checks]
        print_table(table)
        if output == "wide":
            for check, _, issues in checks:
                for issue in issues:
                    print(f"{check}: {issue}")
    if overall == "Invalid":
        print("error: rollout validation found invalid configuration", file=sys.stderr)
        return 2
    if overall == "Unverifiable":
        print("error: rollout validation could not verify all prerequisites", file=sys.stderr)
        return 2
    return 0


# ---------------------------------------------------------------------------------------------------- repin

REPIN = c.ANN_ROLLOUT_REPIN


def repin(cluster: Cluster, namespace: str, name: str, *, dry_run: str, yes: bool, output: str,
          context: str | None) -> int:
    deadline = time.monotonic() + ACTION_SECONDS

    def check() -> tuple[Obj, Obj, str, str]:
        isvc = read_target(cluster, namespace, name)
        meta = isvc["metadata"]
        status = isvc.get("status") or {}
        run = (status.get("rollout") or {}).get("activeRun")
        if not run:
            raise Refused("rollout repin refused: no active pinned run")
        live = groups_of(isvc)
        if not live:
            raise Refused("rollout repin refused: empty live plans are not supported by this command")
        if any(k in (meta.get("annotations") or {}) for k in (REPIN, PROMOTE, ROLLBACK)):
            raise Refused("rollout repin refused: a rollout action mailbox is already present")
        if len(canary_groups(isvc)) > 1:
            raise Refused("rollout repin refused: this command supports at most one canary group")
        errors, _ = validate_rollout(isvc.get("spec") or {}, dict(meta.get("annotations") or {}))
        if errors:
            raise Refused("rollout repin refused: controller plan evidence is missing, stale or inconsistent")
        pinned = [g.get("group") or {} for g in (run.get("plan") or {}).get("groups") or []]
        if pinned == live:
            raise Refused("rollout repin refused: the current plan is already pinned")
        if topology(pinned) != topology(live):
            raise Refused("rollout repin refused: live and pinned rollout topology differ")
        return isvc, run, plan_digest(pinned), plan_digest(live)

    try:
        isvc, run, pinned_digest, live_digest = check()
        meta = isvc["metadata"]
        print("ALPHA guarded action preview (not controller convergence)", file=sys.stderr)
        print_table_err([["FIELD", "VALUE"], ["Action", "rollout repin"], ["Context", context or "-"],
                         ["Workload NS", namespace], ["Target", f"InferenceService/{name}"],
                         ["UID", str(meta.get("uid"))], ["ResourceVersion", str(meta.get("resourceVersion"))],
                         ["Dry-run", dry_run], ["Run", str(run.get("runID"))], ["Pinned plan", pinned_digest],
                         ["Requested plan", live_digest], ["Set annotation", f"{REPIN}={live_digest}"]])
        accepted, applied, message = _send(
            cluster, namespace, name, meta, REPIN, live_digest, yes=yes, dry_run=dry_run, deadline=deadline,
            recheck=lambda: check()[0],
            unknown="rollout repin request outcome unknown; do not replay, check rollout explain")
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    follow = f"kubectl ome rollout explain {name} -n {namespace}" + (f" --context={context}" if context else "")
    groups = len(groups_of(isvc))
    result = {"apiVersion": REPORT_VERSION, "kind": "ActionResult", "action": "rollout repin",
              "target": {"kind": "InferenceService", "namespace": namespace, "name": name, "uid": meta.get("uid"),
                         "resourceVersion": meta.get("resourceVersion")},
              "dryRun": dry_run, "accepted": accepted, "applied": applied, "runID": run.get("runID"),
              "pinnedPlanDigest": pinned_digest, "requestedPlanDigest": live_digest, "groupCount": groups,
              "message": message, "followUp": follow}
    if output in ("json", "yaml"):
        emit(result, output)
        return 0
    fields = [["FIELD", "VALUE"], ["action", "rollout repin"], ["target", f"InferenceService/{namespace}/{name}"],
              ["dry-run", dry_run], ["accepted", "Yes" if accepted else "No"],
              ["applied", "Yes" if applied else "No"], ["run-id", str(run.get("runID"))],
              ["pinned-plan-digest", pinned_digest], ["requested-plan-digest", live_digest],
              ["group-count", str(groups)], ["message", message], ["follow-up", follow],
              ["hint", "Use -o json or -o yaml for full values."]]
    print_table([[k, v if len(v) <= 56 else v[:53] + "..."] for k, v in fields])
    return 0
