"""Pure builders of `kubectl ome status`, `wait` and `version` reports from objects already read.

They follow the kubectl-ome reference (reference/kubectl-ome/status.md, wait.md, version.md) for the sections that
omenative has data for: the Ready condition, each component's pods, the Warning events, the InferenceReplicas' counts
and the controller's image. Every value carries how it was got (Declared, Reported, Observed, Computed, Unavailable).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

import attrs

from omenative.api import constants as c
from omenative.api import migration_request
from omenative.api.times import parse_datetime as parse_time
from omenative.obj import Obj

Rows = list[tuple[str, str]]

CONDITION_STATUSES = ("True", "False", "Unknown")
COMPONENT_CONDITIONS = {"engine": "EngineReady", "decoder": "DecoderReady", "router": "RouterReady"}
MAX_CONDITION_BYTES = 32_768
MAX_EVENT_PODS = 15
MAX_EVENTS_PER_OBJECT = 25
MAX_EVENTS = 100
_CREDENTIAL = re.compile(r"(?i)(password|passwd|secret|token|bearer|api[_-]?key|authorization)\s*[:=]?\s*\S+")


def mask(text: str | None) -> str:
    """A reason or message as the report may show it: URLs omitted, credential-like text redacted."""
    if not text:
        return ""
    if "://" in text:
        return "[OMITTED]"
    if _CREDENTIAL.search(text):
        return "[REDACTED]"
    return text


# -- conditions -------------------------------------------------------------------------------------------------------

@attrs.frozen
class ConditionView:
    """One condition type as the CLI trusts it: status (or NotRecorded), validity, and what the inspection found."""

    status: str
    validity: str
    reason: str = ""
    message: str = ""
    inspected: int = 0
    total: int = 0
    warnings: tuple[str, ...] = ()

    @property
    def inspection_state(self) -> str:
        return "Partial" if self.warnings else "Complete"

    def to_dict(self) -> Obj:
        out: Obj = {"status": self.status, "validity": self.validity}
        if self.validity == "Valid" and self.reason:
            out["reason"] = self.reason
        if self.validity == "Valid" and self.message:
            out["message"] = self.message
        out["inspection"] = {"state": self.inspection_state, "total": self.total, "inspected": self.inspected,
                             "warnings": list(self.warnings)}
        return out


def inspect_condition(conditions: Any, kind: str, now: dt.datetime) -> ConditionView:
    """The condition `kind` of a status's conditions, checked as the reference describes: a malformed or
    future-dated record, or two that disagree, make it Invalid; none makes it NotRecorded / Unavailable."""
    records = conditions if isinstance(conditions, list) else []
    warnings: list[str] = []
    found: list[Obj] = []
    invalid = False
    for record in records:
        if not isinstance(record, dict):
            warnings.append("InvalidConditionRecord")
            continue
        if len(str(record)) > MAX_CONDITION_BYTES:
            warnings.append("OversizedConditionRecord")
            continue
        if record.get("type") != kind:
            continue
        if record.get("status") not in CONDITION_STATUSES:
            warnings.append("InvalidConditionRecord")
            invalid = True
            continue
        when = parse_time(record.get("lastTransitionTime"))
        if when is not None and when > now:
            warnings.append("FutureConditionTimestamp")
            invalid = True
        found.append(record)
    statuses = {record["status"] for record in found}
    if len(statuses) > 1:
        warnings.append("ConflictingReadyConditions")
        invalid = True
    elif len(found) > 1:
        warnings.append("DuplicateReadyConditions")
    unique = tuple(dict.fromkeys(warnings))
    total = len(records)
    inspected = total - sum(1 for w in warnings if w == "OversizedConditionRecord")
    if not found:
        return ConditionView("NotRecorded", "Invalid" if invalid else "Unavailable", inspected=inspected,
                             total=total, warnings=unique)
    first = found[0]
    return ConditionView(first["status"], "Invalid" if invalid else "Valid", mask(first.get("reason")),
                         mask(first.get("message")), inspected, total, unique)


# -- status -----------------------------------------------------------------------------------------------------------

@attrs.frozen
class Read:
    """How one list read went: Reported, Partial or Unavailable, with a reason when it did not go well."""

    state: str
    count: int
    truncated: bool = False
    reason: str = ""

    def row(self) -> str:
        text = f"{self.state} count={self.count} truncated={'true' if self.truncated else 'false'}"
        return f"{text} {self.reason}" if self.reason else text

    def to_dict(self) -> Obj:
        out: Obj = {"state": self.state, "count": self.count, "truncated": self.truncated}
        if self.reason:
            out["reason"] = self.reason
        return out


def read_failure(status: int | None) -> str:
    """A failed read's reason, as the report names it."""
    return {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 408: "Timeout", 504: "Timeout",
            429: "Unavailable", 503: "Unavailable"}.get(status or 0, "Unreadable")


def pod_ready(pod: Obj) -> bool:
    return any(x.get("type") == "Ready" and x.get("status") == "True"
               for x in (pod.get("status") or {}).get("conditions") or [])


def pod_restarts(pod: Obj) -> int:
    status = pod.get("status") or {}
    return sum(int(s.get("restartCount") or 0) for key in
               ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
               for s in status.get(key) or [])


def event_targets(pods: list[Obj]) -> tuple[list[Obj], int]:
    """The pods whose events the report reads (at most MAX_EVENT_PODS, those not Ready or being deleted first),
    and how many were left out."""
    ordered = sorted(pods, key=lambda p: (pod_ready(p) and not p["metadata"].get("deletionTimestamp"),
                                          p["metadata"]["name"]))
    return ordered[:MAX_EVENT_PODS], max(0, len(ordered) - MAX_EVENT_PODS)


def _event_time(event: Obj) -> str:
    return str(event.get("lastTimestamp") or (event.get("series") or {}).get("lastObservedTime")
               or event.get("eventTime") or event.get("firstTimestamp") or (event.get("metadata") or {}).get(
                   "creationTimestamp") or "")


def status_report(isvc: Obj, pods: list[Obj] | None, events: list[Obj] | None, *, now: dt.datetime,
                  pod_error: str = "", event_error: str = "", refused: dict[str, str] | None = None) -> Obj:
    """The StatusReport's content: `pods` and `events` are None when their read failed (with the reason);
    `refused`: by component, the refusal that holds its Instances (its InferenceReplica's ReplicaFailure)."""
    meta, spec, status = isvc.get("metadata") or {}, isvc.get("spec") or {}, isvc.get("status") or {}
    name = meta.get("name", "")
    conditions = status.get("conditions")
    ready = inspect_condition(conditions, "Ready", now)
    issues: list[str] = []
    counted: list[Obj] = []
    for pod in pods or []:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(c.LABEL_COMPONENT) not in COMPONENT_CONDITIONS:
            issues.append("UnsupportedComponent")
        elif not isinstance(pod.get("status"), dict):
            issues.append("PodMalformed")
        else:
            counted.append(pod)
    if pods is None:
        pod_read = Read("Unavailable", 0, True, pod_error)
    elif len(counted) < len(pods):
        pod_read = Read("Partial", len(counted), False, "MalformedPayload")
    else:
        pod_read = Read("Reported", len(counted))
    declared = [comp for comp in COMPONENT_CONDITIONS if isinstance(spec.get(comp), dict)]
    present = {(p["metadata"].get("labels") or {}).get(c.LABEL_COMPONENT) for p in counted}
    components: Obj = {}
    for comp in COMPONENT_CONDITIONS:
        if comp not in declared and comp not in present:
            continue
        mine = [p for p in counted if (p["metadata"].get("labels") or {}).get(c.LABEL_COMPONENT) == comp]
        phases = {phase: sum(1 for p in mine if (p.get("status") or {}).get("phase") == phase)
                  for phase in ("Running", "Pending", "Failed", "Succeeded", "Unknown")}
        components[comp] = {
            "ready": inspect_condition(conditions, COMPONENT_CONDITIONS[comp], now).to_dict(),
            "podTotal": len(mine), "podReady": sum(1 for p in mine if pod_ready(p)),
            "restarts": sum(pod_restarts(p) for p in mine), "phases": phases,
            "deleting": sum(1 for p in mine if p["metadata"].get("deletionTimestamp")),
            "evidence": "Unavailable" if pods is None else "Observed",
        }
        if (refused or {}).get(comp):
            components[comp]["refused"] = mask((refused or {})[comp])
    targets, skipped = event_targets(counted)
    wanted = {("InferenceService", name)} | {("Pod", p["metadata"]["name"]) for p in targets}
    kept: list[Obj] = []
    truncated = False
    per_object: dict[tuple[str, str], int] = {}
    for event in sorted(events or [], key=_event_time, reverse=True):
        involved = event.get("involvedObject") or {}
        key = (involved.get("kind", ""), involved.get("name", ""))
        if event.get("type") != "Warning" or key not in wanted:
            continue
        per_object[key] = per_object.get(key, 0) + 1
        if per_object[key] > MAX_EVENTS_PER_OBJECT or len(kept) >= MAX_EVENTS:
            truncated = True
            continue
        kept.append({"kind": key[0], "name": key[1], "reason": mask(event.get("reason")),
                     "message": mask(event.get("message")), "count": int(event.get("count") or 1),
                     "lastSeen": _event_time(event)})
    if events is None:
        event_read = Read("Unavailable", 0, True, event_error)
    elif truncated or skipped:
        event_read = Read("Partial", len(kept), True)
    else:
        event_read = Read("Reported", len(kept))
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    if (isinstance(generation, int) and generation < 0) or (isinstance(observed, int) and observed < 0):
        issues.append("InvalidGeneration")
    return {
        "service": {"name": name, "namespace": meta.get("namespace", "")},
        "ready": ready.to_dict(),
        "declaredRuntime": (spec.get("runtime") or {}).get("name", ""),
        "model": (spec.get("model") or {}).get("name", ""),
        "generation": {"generation": generation, "observedGeneration": observed or 0},
        "pods": {"observation": pod_read.to_dict(), "targetsSkipped": 0, "components": components},
        "events": {"observation": event_read.to_dict(), "targetsSkipped": skipped, "items": kept},
        "issues": sorted(set(issues)),
        "collectedAt": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sourceGeneration": generation,
        "sourceEvidence": "Observed",
    }


def status_rows(content: Obj, wide: bool) -> Rows:
    """The report's FIELD/VALUE rows, in the reference's order, for the sections omenative reports."""
    ready = content["ready"]
    inspection = ready["inspection"]
    gen = content["generation"]
    rows: Rows = [("Name", content["service"]["name"]), ("Namespace", content["service"]["namespace"]),
                  ("Ready", f"{ready['status']} / {ready['validity']}"), ("Ready reason", ready.get("reason", ""))]
    if wide:
        rows.append(("Ready message", ready.get("message", "")))
        rows.append(("Condition inspection",
                     f"{inspection['state']} {inspection['inspected']}/{inspection['total']}"))
        rows += [("Condition warning", warning) for warning in inspection["warnings"]]
    rows += [("Declared runtime", content["declaredRuntime"]), ("Model", content["model"]),
             ("Generation", f"{gen['generation']} observed={gen['observedGeneration']}; advisory Unverifiable"),
             ("Pod observation", Read(**content["pods"]["observation"]).row()),
             ("Event observation", Read(**content["events"]["observation"]).row())]
    if wide:
        rows += [("Pod targets skipped", str(content["pods"]["targetsSkipped"])),
                 ("Event targets skip", str(content["events"]["targetsSkipped"]))]
    for comp, figures in content["pods"]["components"].items():
        cond = figures["ready"]
        rows.append((comp, f"{cond['status']} / {cond['validity']}; Ready pods={figures['podReady']}/"
                           f"{figures['podTotal']} restarts={figures['restarts']}"))
        if figures.get("refused"):
            # The cause, whole: cutting it would cut the quota's figures or the policy that refused.
            rows.append((f"{comp} refused", figures["refused"]))
        if wide:
            p = figures["phases"]
            rows += [(f"{comp} Pod total", str(figures["podTotal"])), (f"{comp} Pod Ready", str(figures["podReady"])),
                     (f"{comp} restarts", str(figures["restarts"])),
                     (f"{comp} phases", f"R={p['Running']} P={p['Pending']} F={p['Failed']} S={p['Succeeded']} "
                                        f"U={p['Unknown']} deleting={figures['deleting']}"),
                     (f"{comp} evidence", figures["evidence"])]
    for event in content["events"]["items"]:
        label = "Warning Pod" if event["kind"] == "Pod" else f"Warning {event['kind']}"
        rows.append((label if len(label) <= 20 else label[:17] + "...", f"{event['name']} {event['reason']}"))
        if wide:
            rows += [("Event message", event["message"]), ("Event count", str(event["count"]))]
            if event["lastSeen"]:
                rows.append(("Event last seen", event["lastSeen"]))
    rows += [("Issue", issue) for issue in content["issues"]]
    rows += [("Full safe values", "Use -o json or -o yaml"), ("Instance detail", "kubectl ome instance list NAME"),
             ("Logs detail", "kubectl ome logs NAME")]
    if wide:
        rows += [("Collected at", content["collectedAt"]), ("Source generation", str(content["sourceGeneration"])),
                 ("Source evidence", content["sourceEvidence"])]
    return rows


# -- wait -------------------------------------------------------------------------------------------------------------

@attrs.frozen
class Predicate:
    kind: str  # "condition", "replicas-ready", "replicas-current", "rollout"
    status: str = "True"  # for condition=Ready; for rollout: the REPORTED state waited for
    component: str = ""
    replicas: int = 0
    request_id: str = ""

    @property
    def spelling(self) -> str:
        if self.kind == "migration":
            return "Migration=Terminal"
        if self.kind == "condition":
            return f"Ready={self.status}"
        if self.kind == "rollout":
            return f"Rollout={ROLLOUT_SPELLING[self.status]}"
        return f"{'ReadyReplicas' if self.kind == 'replicas-ready' else 'CurrentReplicas'}={self.replicas}"


PREDICATE_HELP = ("InvalidWaitPredicate: require condition=Ready[=True|False|Unknown], rollout=stable|failed|"
                  "rolled-back, migration=terminal, replicas=ready|current, runtime-sync=acknowledged, or "
                  "held-revision=unheld")
NOT_SERVED = ("runtime-sync=acknowledged", "held-revision=unheld")
ROLLOUT_STATES = {"rollout=stable": "Succeeded", "rollout=failed": "Failed", "rollout=rolled-back": "RolledBack"}
ROLLOUT_SPELLING = {"Succeeded": "Stable", "Failed": "Failed", "RolledBack": "RolledBack"}


class InvalidWait(ValueError):
    """A wait the CLI refuses before it reads anything (exit 1)."""


def parse_predicate(text: str | None, component: str | None, replicas: int | None,
                    request_id: str | None = None) -> Predicate:
    if text == "migration=terminal":
        if request_id is None or not migration_request.is_uuid(request_id) or replicas is not None:
            raise InvalidWait("InvalidMigrationWaitFlags: require --request-id=<canonical UUID> with "
                              "migration=terminal")
        return Predicate("migration", request_id=request_id)
    if request_id is not None:
        raise InvalidWait("InvalidWaitFlags")
    if text in ("condition=Ready", "condition=Ready=True", "condition=Ready=False", "condition=Ready=Unknown"):
        if component is not None or replicas is not None:
            raise InvalidWait("InvalidReadyReplicaFlags: require --component=engine|decoder|router and --replicas=N "
                              "only with replicas=ready; N must be nonnegative")
        return Predicate("condition", status=(text.split("=")[2] if text.count("=") == 2 else "True"))
    if text == "replicas=ready":
        if component not in COMPONENT_CONDITIONS or replicas is None or replicas < 0:
            raise InvalidWait("InvalidReadyReplicaFlags: require --component=engine|decoder|router and --replicas=N "
                              "only with replicas=ready; N must be nonnegative")
        return Predicate("replicas-ready", component=component, replicas=replicas)
    if text == "replicas=current":
        if component not in COMPONENT_CONDITIONS or replicas is None or replicas < 1:
            raise InvalidWait("InvalidCurrentReplicaFlags: require --component=engine|decoder|router and positive "
                              "--replicas=N; --ir-name and --ir-uid must be paired")
        return Predicate("replicas-current", component=component, replicas=replicas)
    if text in ROLLOUT_STATES:
        if component is not None or replicas is not None:
            raise InvalidWait("InvalidWaitFlags")
        return Predicate("rollout", status=ROLLOUT_STATES[text])
    if text in NOT_SERVED:
        raise InvalidWait(f"UnsupportedWaitPredicate: omenative does not report what --for={text} waits on")
    raise InvalidWait(PREDICATE_HELP)


@attrs.frozen
class Check:
    """One check of a wait: did it match, why, and the rows of what it saw."""

    matched: bool
    reason: str
    evidence: str
    observed: Obj


def check_condition(predicate: Predicate, isvc: Obj, now: dt.datetime) -> Check:
    view = inspect_condition((isvc.get("status") or {}).get("conditions"), "Ready", now)
    observed = {"status": view.status, "validity": view.validity, "generationFreshness": "Unverifiable",
                "inspection": view.to_dict()["inspection"]}
    if view.validity == "Invalid":
        return Check(False, "InvalidCondition", "Reported", observed)
    if view.status == "NotRecorded":
        return Check(False, "ConditionNotRecorded", "Unavailable", observed)
    if view.status == predicate.status:
        return Check(True, "ConditionMatched", "Reported", observed)
    return Check(False, "ConditionNotMatched", "Reported", observed)


def check_rollout(predicate: Predicate, isvc: Obj) -> Check:
    """The rollout state `kubectl ome rollout status` shows as REPORTED, against the one waited for."""
    from omenative.kubectl_ome.rollout import status_report

    report = status_report(isvc)
    service = report["service"]
    observed = {"reported": service["REPORTED"], "state": service["STATE"], "epoch": service["EPOCH"],
                "coordinationReady": service["COORDINATION"],
                "issues": [i for values in report["issues"].values() for i in values]}
    if not (isvc.get("status") or {}).get("components"):
        return Check(False, "RolloutNotRecorded", "Unavailable", observed)
    matched = service["REPORTED"] == predicate.status
    return Check(matched, "RolloutMatched" if matched else "RolloutNotMatched", "Reported", observed)


def component_replica(replicas: Iterable[Obj], isvc: Obj, component: str) -> Obj | None:
    uid = (isvc.get("metadata") or {}).get("uid")
    for replica in replicas:
        if (replica.get("spec") or {}).get("component") != component:
            continue
        owners = (replica.get("metadata") or {}).get("ownerReferences") or []
        if uid and owners and not any(o.get("uid") == uid for o in owners):
            continue
        return replica
    return None


def check_replicas(predicate: Predicate, replica: Obj | None) -> Check:
    ready = predicate.kind == "replicas-ready"
    prefix = "ReplicaReady" if ready else "ReplicaScale"
    if replica is None:
        return Check(False, f"{prefix}NotRecorded", "Unavailable", {"component": predicate.component})
    meta, spec, status = replica.get("metadata") or {}, replica.get("spec") or {}, replica.get("status") or {}
    fresh = status.get("observedGeneration") == meta.get("generation")
    counts = (spec.get("replicas"), status.get("replicas"), status.get("readyReplicas"))
    observed: Obj = {"component": predicate.component, "name": meta.get("name"), "uid": meta.get("uid"),
                     "freshness": "Current" if fresh else "Stale"}
    if meta.get("deletionTimestamp") or any(v is not None and (not isinstance(v, int) or v < 0) for v in counts):
        observed["validity"] = "Invalid"
        return Check(False, f"Invalid{prefix}Evidence", "Unavailable", observed)
    if not fresh:
        observed["validity"] = "Unavailable"
        return Check(False, f"{prefix}NotRecorded", "Unavailable", observed)
    observed.update({"validity": "Valid", "specReplicas": counts[0], "currentReplicas": counts[1] or 0,
                     "readyReplicas": counts[2] or 0,
                     "statusEncoding": status.get("instanceStatusEncoding") or "DenseV1"})
    if ready:
        matched = (counts[2] or 0) == predicate.replicas
    else:
        matched = counts[0] == predicate.replicas and (counts[1] or 0) == predicate.replicas
    return Check(matched, f"{prefix}{'Matched' if matched else 'NotMatched'}", "Reported", observed)


MIGRATION_TERMINAL = migration_request.TERMINAL_PHASES


def check_migration(record: Obj | None, validity: str) -> Check:
    """One request's record (as `kubectl ome migration status` reports it): matched once it has ended."""
    if record is None:
        return Check(False, "MigrationNotRecorded", "Unavailable",
                     {"phase": "Unknown", "migrationOutcome": "Unknown", "validity": "Unavailable"})
    observed = {"phase": record.get("phase"), "migrationOutcome": record.get("migrationOutcome"),
                "component": record.get("component"), "sourceInstance": record.get("sourceInstance"),
                "surgeInstance": record.get("surgeInstance"), "message": record.get("message"), "validity": validity}
    if validity != "Valid":
        return Check(False, "MigrationEvidenceStale", "Unavailable", observed)
    matched = record.get("phase") in MIGRATION_TERMINAL
    return Check(matched, "MigrationMatched" if matched else "MigrationNotTerminal", "Reported", observed)


def wait_report(namespace: str, name: str, predicate: Predicate, outcome: str, check: Check | None, *,
                elapsed_ms: int, reads: int, polls: int, source: str) -> Obj:
    content: Obj = {
        "service": f"{namespace}/{name}", "requested": predicate.spelling, "outcome": outcome,
        "reason": check.reason if check else "PredicateUnmet",
        "evidence": check.evidence if check else "Unavailable",
        "sourceMethod": source, "pollingFallback": True, "elapsedMilliseconds": elapsed_ms,
        "counts": {"reads": reads, "watches": 0, "polls": polls},
    }
    if predicate.kind == "condition":
        content["observed"] = check.observed if check else {"status": "NotRecorded", "validity": "Unavailable"}
    elif predicate.kind == "rollout":
        content["rollout"] = check.observed if check else {"reported": "Unknown"}
    elif predicate.kind == "migration":
        content["migration"] = {"requestID": predicate.request_id, **(check.observed if check else {})}
    else:
        key = "readyReplicas" if predicate.kind == "replicas-ready" else "scale"
        content[key] = {"target": predicate.replicas, **(check.observed if check else {})}
    return {"apiVersion": "cli.ome.io/v1alpha1", "kind": "WaitReport", "content": content}


def wait_rows(report: Obj) -> Rows:
    content = report["content"]
    counts = content["counts"]
    rows: Rows = [("Service", content["service"]), ("Requested", content["requested"]),
                  ("Outcome", content["outcome"]), ("Reason", content["reason"]), ("Evidence", content["evidence"]),
                  ("Source method", content["sourceMethod"]),
                  ("Polling fallback", "true" if content["pollingFallback"] else "false"),
                  ("Elapsed milliseconds", str(content["elapsedMilliseconds"])),
                  ("GET / WATCH / polls", f"{counts['reads']} / {counts['watches']} / {counts['polls']}")]
    if "observed" in content:
        observed = content["observed"]
        rows += [("Observed Ready", observed["status"]), ("Condition validity", observed["validity"]),
                 ("Generation freshness", "Unverifiable")]
        if "inspection" in observed:
            inspection = observed["inspection"]
            rows.append(("Condition inspection",
                         f"{inspection['state']} ({inspection['inspected']}/{inspection['total']})"))
            rows += [("Inspection warning", w) for w in inspection["warnings"]]
    elif "rollout" in content:
        part = content["rollout"]
        rows += [("Reported rollout", part.get("reported", "Unknown")), ("Rollout state", part.get("state", "-")),
                 ("Rollout epoch", part.get("epoch", "-")),
                 ("Coordination Ready", part.get("coordinationReady", "-")),
                 ("Freshness caveat", "Reported rollout; not current-spec convergence")]
        rows += [("Rollout issue", issue) for issue in part.get("issues") or []]
    elif "migration" in content:
        part = content["migration"]
        rows += [("Request ID", part["requestID"]), ("Migration phase", str(part.get("phase") or "Unknown")),
                 ("Migration outcome", str(part.get("migrationOutcome") or "Unknown")),
                 ("Migration validity", str(part.get("validity") or "Unavailable")),
                 ("Migration message", str(part.get("message") or "-"))]
    elif "readyReplicas" in content:
        part = content["readyReplicas"]
        valid = part.get("validity") == "Valid"
        rows += [("Component", part.get("component", "")), ("Target ready", str(part["target"])),
                 ("Observed ready", str(part["readyReplicas"]) if valid else "<unavailable>"),
                 ("Count validity", part.get("validity", "Unavailable")),
                 ("Interpretation", _interpretation(content["outcome"], valid, "No verified exact count",
                                                    "Exact at observed IR snapshot"))]
    else:
        part = content["scale"]
        valid = part.get("validity") == "Valid"
        unavailable = "<unavailable>"
        rows += [("Component", part.get("component", "")), ("Target replicas", str(part["target"])),
                 ("Spec replicas", str(part["specReplicas"]) if valid else unavailable),
                 ("Current replicas", str(part["currentReplicas"]) if valid else unavailable),
                 ("Ready replicas", str(part["readyReplicas"]) if valid else unavailable),
                 ("Status encoding", part.get("statusEncoding", "") if valid else ""),
                 ("Validity", part.get("validity", "Unavailable")), ("Freshness", part.get("freshness", "Unavailable")),
                 ("Interpretation", _interpretation(content["outcome"], valid, "No verified exact scale count",
                                                    "Exact desired and current count at IR snapshot"))]
    return rows


def _interpretation(outcome: str, valid: bool, unverified: str, exact: str) -> str:
    if outcome == "Matched" and valid:
        return exact
    return "Last observation; currentness unverified" if valid else unverified


# -- version ----------------------------------------------------------------------------------------------------------

def operator_version(deployment: Obj | None, error: str = "", *, container: str = "omenative") -> str:
    """The image tag (or tag@digest, or digest) of the controller's container, or `unknown (reason)`."""
    if deployment is None:
        return f"unknown ({error})"
    containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    chosen = next((x for x in containers if x.get("name") == container), containers[0] if len(containers) == 1
                  else None)
    if chosen is None:
        return f"unknown ({container} container unavailable)"
    image = str(chosen.get("image") or "")
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    if tag and digest:
        return f"{tag}@{digest}"
    if tag or digest:
        return tag or digest
    return "unknown (image has no tag or digest)"


# -- get --------------------------------------------------------------------------------------------------------------

# Resource name -> (plural, scope): Namespaced, Cluster, or Merged (the namespaced kind, then the cluster one).
GET_RESOURCES: dict[str, tuple[str, str]] = {}
for _names, _target in (
    (("inferenceservices", "inferenceservice", "isvc", "isvcs"), ("inferenceservices", "Namespaced")),
    (("inferencereplicas", "inferencereplica", "ir"), ("inferencereplicas", "Namespaced")),
    (("models", "model"), ("models", "Merged")),
    (("basemodels", "basemodel", "bm"), ("basemodels", "Namespaced")),
    (("clusterbasemodels", "clusterbasemodel", "cbm"), ("clusterbasemodels", "Cluster")),
    (("runtimes", "runtime"), ("runtimes", "Merged")),
    (("servingruntimes", "servingruntime", "srt"), ("servingruntimes", "Namespaced")),
    (("clusterservingruntimes", "clusterservingruntime", "csrt"), ("clusterservingruntimes", "Cluster")),
):
    for _name in _names:
        GET_RESOURCES[_name] = _target
# The reference's other kinds, which omenative does not serve.
NOT_SERVED_KINDS = ("finetunedweights", "finetunedweight", "ftw", "acceleratorclasses", "acceleratorclass", "ac",
                    "acceleratorquotas", "acceleratorquota", "aq", "benchmarkjobs", "benchmarkjob", "bj",
                    "rolloutpolicies", "rolloutpolicy", "rp", "autoscalerpolicies", "autoscalerpolicy", "ap",
                    "workloadclusters", "workloadcluster", "wc", "trafficmaps", "trafficmap", "tm", "tmap")
MERGED_PARTS = {"models": ("basemodels", "clusterbasemodels"),
                "runtimes": ("servingruntimes", "clusterservingruntimes")}


def age(created: str | None, now: dt.datetime) -> str:
    when = parse_time(created)
    if when is None:
        return "-"
    seconds = max(0, int((now - when).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _condition(obj: Obj, kind: str) -> Obj | None:
    return next((x for x in (obj.get("status") or {}).get("conditions") or []
                 if isinstance(x, dict) and x.get("type") == kind), None)


def _dash(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def get_table(plural: str, objects: list[tuple[str, Obj]], *, wide: bool, all_namespaces: bool,
              now: dt.datetime) -> list[list[str]]:
    """The rows of `kubectl ome get`: `objects` are (scope, object), scope Namespaced or Cluster."""
    merged = plural in MERGED_PARTS
    head: list[str] = ["NAME"]
    if plural == "inferenceservices":
        head += ["MODEL", "RUNTIME", "READY", "URL"]
    elif plural == "inferencereplicas":
        head += ["COMPONENT", "PARENT", "DESIRED", "CURRENT", "READY"] + (["AVAILABLE"] if wide else []) + \
            ["LIFECYCLE"] + (["REASON", "SERVING", "UPDATED", "ENCODING", "CURRENT-REVISION", "UPDATE-REVISION"]
                             if wide else [])
    elif plural in ("models", "basemodels", "clusterbasemodels"):
        head += (["SCOPE"] if merged else []) + ["ARCH", "PARAMS", "FORMAT", "STATE"]
    else:
        head += (["SCOPE"] if merged else []) + ["DISABLED", "FORMATS"]
    head.append("AGE")
    namespaced = plural not in ("clusterbasemodels", "clusterservingruntimes")
    if all_namespaces and namespaced:
        head.insert(0, "NAMESPACE")
    rows = [head]
    for scope, obj in objects:
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        row = [meta.get("name", "")]
        if plural == "inferenceservices":
            ready = _condition(obj, "Ready")
            row += [_dash((spec.get("model") or {}).get("name")), _dash((spec.get("runtime") or {}).get("name")),
                    (ready or {}).get("status") or "Unknown", _dash(status.get("url"))]
        elif plural == "inferencereplicas":
            stalled, ready = _condition(obj, "RolloutStalled"), _condition(obj, "Ready")
            main = stalled if stalled is not None and stalled.get("status") == "True" else (ready or stalled)
            lifecycle = f"{main['type']}={main.get('status')}" if main else "Unavailable"
            row += [_dash(spec.get("component")), _dash((spec.get("parentRef") or {}).get("name")),
                    _dash(spec.get("replicas")), str(status.get("replicas") or 0),
                    str(status.get("readyReplicas") or 0)]
            if wide:
                row.append(str(status.get("availableReplicas") or 0))
            row.append(lifecycle)
            if wide:
                row += [_dash((main or {}).get("reason")), str(status.get("servingReplicas") or 0),
                        str(status.get("updatedReplicas") or 0), status.get("instanceStatusEncoding") or "DenseV1",
                        _dash(status.get("currentRevision")), _dash(status.get("updateRevision"))]
        elif plural in ("models", "basemodels", "clusterbasemodels"):
            row += ([scope] if merged else []) + [
                _dash(spec.get("modelArchitecture")), _dash(spec.get("modelParameterSize")),
                _dash((spec.get("modelFormat") or {}).get("name")), _dash(status.get("state"))]
        else:
            formats = [f.get("name") or (f.get("modelFormat") or {}).get("name")
                       for f in spec.get("supportedModelFormats") or [] if isinstance(f, dict)]
            formats = list(dict.fromkeys(str(f) for f in formats if f))
            shown = ",".join(str(f) for f in formats[:3]) + (f",+{len(formats) - 3}" if len(formats) > 3 else "")
            row += ([scope] if merged else []) + ["true" if spec.get("disabled") is True else "false", _dash(shown)]
        row.append(age(meta.get("creationTimestamp"), now))
        if all_namespaces and namespaced:
            row.insert(0, meta.get("namespace") or "-")
        rows.append(row)
    return rows
