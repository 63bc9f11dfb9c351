"""`kubectl ome status`: why an InferenceService is or isn't ready, as reference/kubectl-ome/status.md describes it:
the Ready condition, each component's pods and refusals, the rollout, autoscaling, placement, traffic and runtime
sections (sections.py), and the Warning events. Every value carries how it was got (Declared, Reported, Observed,
Computed, Unavailable). The builders are pure; `status` reads and prints."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import attrs

from omenative.api import constants as c
from omenative.api.times import parse_datetime as parse_time
from omenative.kubectl_ome import sections
from omenative.kubectl_ome.cluster import Cluster
from omenative.kubectl_ome.common import REPORT_VERSION, CommandError, emit, now, print_rows
from omenative.kubectl_ome.instance import refusal
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
                  pod_error: str = "", event_error: str = "", refused: dict[str, str] | None = None,
                  later: Obj | None = None) -> Obj:
    """The StatusReport's content: `pods` and `events` are None when their read failed (with the reason);
    `refused`: by component, the refusal that holds its Instances (its InferenceReplica's ReplicaFailure);
    `later`: the rollout, autoscaling, placement, traffic and runtime sections (`sections.sections`)."""
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
        **(later if later is not None else sections.sections(isvc)),
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
    rows += sections.section_rows(content, wide)
    for event in content["events"]["items"]:
        label = "Warning Pod" if event["kind"] == "Pod" else f"Warning {event['kind']}"
        rows.append((label if len(label) <= 20 else label[:17] + "...", f"{event['name']} {event['reason']}"))
        if wide:
            rows += [("Event message", event["message"]), ("Event count", str(event["count"]))]
            if event["lastSeen"]:
                rows.append(("Event last seen", event["lastSeen"]))
    rows += [("Issue", issue) for issue in content["issues"]]
    rows += [("Full safe values", "Use -o json or -o yaml"), *sections.DETAIL_ROWS,
             ("Instance detail", "kubectl ome instance list NAME"), ("Logs detail", "kubectl ome logs NAME")]
    if wide:
        rows += [("Collected at", content["collectedAt"]), ("Source generation", str(content["sourceGeneration"])),
                 ("Source evidence", content["sourceEvidence"])]
    return rows




def read_runtime(cluster: Cluster, isvc: Obj) -> tuple[Obj | None, str, bool | None, str]:
    """The runtime the service names (its namespace's ServingRuntime, else the ClusterServingRuntime) and its kind,
    whether the model it names exists (None: it names none), and ReadFailed when a read failed."""
    namespace = isvc["metadata"].get("namespace", "")
    spec = isvc.get("spec") or {}
    runtime, kind = None, ""
    name = (spec.get("runtime") or {}).get("name")
    try:
        if name:
            for plural, found_kind in (("servingruntimes", "ServingRuntime"),
                                       ("clusterservingruntimes", "ClusterServingRuntime")):
                runtime, kind = cluster.get_ome(plural, namespace, str(name)), found_kind
                if runtime is not None:
                    break
        model = (spec.get("model") or {}).get("name")
        model_found = None if not model else any(
            cluster.get_ome(plural, namespace, str(model)) is not None for plural in ("basemodels",
                                                                                      "clusterbasemodels"))
    except Exception:  # the report stands; the row says the read failed
        return None, "", None, "ReadFailed"
    return runtime, kind if runtime is not None else "", model_found, ""


def status(cluster: Cluster, namespace: str, name: str, output: str) -> int:
    """One report of why the InferenceService is or isn't ready (exit 0 whenever it prints one)."""
    isvc = cluster.inference_service(namespace, name)
    if isvc is None:
        raise CommandError("status InferenceService was not found")
    pods: list[Obj] | None
    events: list[Obj] | None
    pod_error = event_error = ""
    try:
        pods = cluster.service_pods(namespace, name)
    except Exception as exc:  # the report says what it could not read
        pods, pod_error = None, read_failure(getattr(exc, "status", None))
    try:
        events = cluster.warning_events(namespace)
    except Exception as exc:
        events, event_error = None, read_failure(getattr(exc, "status", None))
    try:
        refused = {str((r.get("spec") or {}).get("component")): cause for r in cluster.replicas(namespace, name)
                   if (cause := refusal(r))}
    except Exception:  # the report stands without them; the events still name a refusal
        refused = {}
    content = status_report(isvc, pods, events, now=now(), pod_error=pod_error, event_error=event_error,
                            refused=refused, later=sections.sections(isvc, *read_runtime(cluster, isvc)))
    if output in ("table", "wide"):
        print_rows(status_rows(content, output == "wide"), output == "wide")
    else:
        emit({"apiVersion": REPORT_VERSION, "kind": "StatusReport", "content": content}, output)
    return 0
