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
from omenative.controllers.inferenceservice.rollout import gate_of, is_sequence, primary_of, progression
from omenative.kubectl_ome.held import ACTION_SECONDS, Refused, _confirm, print_table_err
from omenative.kubectl_ome.output import REPORT_VERSION, emit, print_table

Obj = dict[str, Any]
PAUSED = "ome.io/rollout-paused"
PROMOTE = "ome.io/rollout-promote"
ROLLBACK = "ome.io/rollout-rollback"
MAILBOXES = (PROMOTE, ROLLBACK)
CANARY_IN_FLIGHT = ("Pending", "Canarying", "Paused", "Promoting", "Failed")
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
            "Waiting": "InProgress", "Shifting": "InProgress", "Draining": "InProgress", "Staged": "Staged",
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


def rollout_status(cluster: Any, namespace: str, name: str, output: str) -> int:
    isvc = cluster.inference_service(namespace, name)
    if isvc is None:
        print(f'error: InferenceService "{name}" not found in namespace {namespace}', file=sys.stderr)
        return 1
    report = status_report(isvc)
    if output in ("json", "yaml"):
        emit({"apiVersion": REPORT_VERSION, "kind": "RolloutStatusReport", "inferenceService": name,
              "namespace": namespace, "content": report}, output)
        return 0
    names = list(report["components"])
    header = ["FIELD", "SERVICE", *[n.upper() for n in names]]
    table = [header]
    for key, value in report["service"].items():
        table.append([key, value, *["" for _ in names]])
    keys = ("GROUP", "STRATEGY", "GROUP-PHASE", "PHASE", "GROUP-CURRENT", "GROUP-PREVIOUS", "STEP", "GATE",
            "CAPACITY", "TRAFFIC", *(("HOLD",) if output == "wide" else ()))
    for key in keys:
        values = [str(report["components"][n].get(key, "")) for n in names]
        if any(values):
            table.append([key, "", *[v or "-" for v in values]])
    issues = report["issues"]
    table.append(["ISSUES", ",".join(issues["service"]) or "-",
                  *[",".join(issues.get(n) or []) or "-" for n in names]])
    print_table(table)
    return 0


# ------------------------------------------------------------------------------------------------- actions


def _check(cluster: Any, namespace: str, name: str, action: str) -> tuple[Obj, str, str | None, list[str]]:
    """Reads the InferenceService and refuses an action that is not safe now. Returns it, the annotation to set
    (or remove), its new value (None: remove) and the preview's extra rows."""
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
    last = step == len(steps) - 1
    waiting = (phase == "Promoting" and int(steps[step].get("traffic") or 0) == 100) if last else phase == "Paused"
    if gate_of(steps[step]) != "Manual" or not waiting or not canary.get("stepReadyTime") or \
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


def rollout_action(cluster: Any, namespace: str, name: str, action: str, *, dry_run: str, yes: bool, output: str,
                   context: str | None) -> int:
    deadline = time.monotonic() + ACTION_SECONDS
    try:
        isvc, annotation, value, extra = _check(cluster, namespace, name, action)
        meta = isvc["metadata"]
        affected = ",".join(sorted((isvc.get("status") or {}).get("components") or {})) or "-"
        print("ALPHA guarded action preview (not controller convergence)", file=sys.stderr)
        print_table_err([["FIELD", "VALUE"], ["Action", f"rollout {action}"], ["Context", context or "-"],
                         ["Workload NS", namespace], ["Target", f"InferenceService/{name}"],
                         ["UID", str(meta.get("uid"))], ["ResourceVersion", str(meta.get("resourceVersion"))],
                         ["Dry-run", dry_run], ["Affected", affected]])
        for row in extra:
            print(row, file=sys.stderr)
        if not yes:
            _confirm(deadline)
        try:
            again, *_ = _check(cluster, namespace, name, action)
        except Refused as exc:
            raise Refused(CONFLICT, 3) from exc
        if again["metadata"].get("resourceVersion") != meta.get("resourceVersion"):
            raise Refused(CONFLICT, 3)
        accepted = applied = False
        message = "Validated locally; no patch sent."
        if dry_run != "client":
            path = "/metadata/annotations/" + annotation.replace("~", "~0").replace("/", "~1")
            patch: list[Obj] = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
                                {"op": "test", "path": "/metadata/resourceVersion",
                                 "value": meta.get("resourceVersion")}]
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
                raise Refused("annotation request outcome unknown; check rollout status before another explicit "
                              "request") from exc
            accepted, applied = True, dry_run == "none"
            message = "API accepted annotation request; convergence not observed." if applied else \
                "API dry-run accepted; no changes persisted."
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
