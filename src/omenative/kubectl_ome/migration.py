"""`kubectl ome migration status|list|history|start`, after OME's reference/kubectl-ome/migration.md.

`status` (and its alias `list`) reads the records in each InferenceReplica's `status.migrations`; `history` adds the
audit ConfigMap's entries; `start` checks that the move can start now, previews the request, asks for confirmation,
reads everything again and adds the `ome.io/migration-request-v1-<uuid>` annotation with a JSON patch that tests the
InferenceService's UID and resourceVersion, so nothing is sent when anything changed meanwhile.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import time
import uuid as uuidlib

from omenative.api import constants as c
from omenative.api import migration_request
from omenative.api.instance_status import decode_rows
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
from omenative.kubectl_ome.rollout import MAILBOXES, PAUSED, READ_FAILED, read_target
from omenative.obj import Obj

TERMINAL = migration_request.TERMINAL_PHASES
PRECONDITION = "migration precondition conflicts or is stale; inspect migration status and retry explicitly"
REJECTED = "guarded migration rejected; inspect migration status using preview UUID"
UNKNOWN = "migration request failed or outcome unknown; inspect migration status using the preview UUID: "
INVALID_VALUES = "invalid migration request values; use --help"
_CANONICAL_INT = re.compile(r"^(0|[1-9][0-9]*)$")
_SECRETISH = re.compile(r"(://|bearer\s|token|password|secret|apikey|api_key)", re.IGNORECASE)
INITIALS = {"engine": "E", "decoder": "D", "router": "R"}


def now_text() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def subject(request_id: str | None) -> str:
    return (request_id or "-")[:8]


def outcome(record: Obj) -> str:
    phase = record.get("phase")
    if phase not in TERMINAL:
        return "InProgress"
    if phase == "Relocated":
        return "RelocationConfirmed" if record.get("succeeded") else "Relocated"
    return str(phase)


def replica_sources(cluster: Cluster, namespace: str, isvc: Obj) -> list[Obj]:
    """The service's InferenceReplicas that belong to it (label and owner)."""
    uid = isvc["metadata"].get("uid")
    return [r for r in cluster.replicas(namespace, isvc["metadata"]["name"])
            if any(o.get("uid") == uid for o in (r["metadata"].get("ownerReferences") or []))]


def freshness(replica: Obj) -> str:
    status = replica.get("status") or {}
    if status.get("observedGeneration") is None:
        return "Unobserved"
    return "Current" if status.get("observedGeneration") == replica["metadata"].get("generation") else "Stale"


def status_report(cluster: Cluster, namespace: str, name: str, component: str | None) -> Obj:
    isvc = cluster.inference_service(namespace, name)
    if isvc is None:
        raise Refused(READ_FAILED)
    sources: list[Obj] = [{"kind": "InferenceService", "name": name, "generation": isvc["metadata"].get("generation")}]
    records: list[Obj] = []
    issues: list[Obj] = []
    for replica in replica_sources(cluster, namespace, isvc):
        comp = (replica.get("spec") or {}).get("component")
        fresh = freshness(replica)
        sources.append({"kind": "InferenceReplica", "name": replica["metadata"]["name"], "component": comp,
                        "generation": replica["metadata"].get("generation"), "freshness": fresh})
        if component and comp != component:
            continue
        if fresh == "Unobserved":
            issues.append({"code": "SourceGenerationUnobserved", "inferenceReplica": replica["metadata"]["name"]})
            continue
        for record in (replica.get("status") or {}).get("migrations") or []:
            entry = {"requestUUID": record.get("requestUUID"), "component": comp,
                     "sourceInstance": record.get("sourceInstance"), "surgeInstance": record.get("surgeInstance"),
                     "trigger": record.get("trigger") or "Manual", "phase": record.get("phase"),
                     "fromNode": record.get("fromNode"), "hintTargetNodes": record.get("hintTargetNodes") or [],
                     "startedAt": record.get("startedAt"), "allocatedAt": record.get("allocatedAt"),
                     "deadline": record.get("deadline"), "completedAt": record.get("completedAt"),
                     "message": record.get("message"), "migrationOutcome": outcome(record),
                     "classification": "Terminal" if record.get("phase") in TERMINAL else "Active",
                     "freshness": fresh}
            records.append(entry)
            if fresh == "Stale":
                issues.append({"code": "SourceGenerationStale", "requestUUID": record.get("requestUUID"),
                               "component": comp})
    state = "Partial" if issues else "Reported" if records else "Empty"
    return {"apiVersion": REPORT_VERSION, "kind": "MigrationStatusReport", "sources": sources,
            "content": {"summary": {"state": state, "records": len(records),
                                    "active": sum(r["classification"] == "Active" for r in records),
                                    "terminal": sum(r["classification"] == "Terminal" for r in records),
                                    "invalid": 0},
                        "migrations": records, "issues": issues},
            "warnings": ["PartialData"] if issues else []}


def _cut(text: str, width: int = 25) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def migration_status(cluster: Cluster, namespace: str, name: str, component: str | None, output: str) -> int:
    try:
        report = status_report(cluster, namespace, name, component)
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    if output in ("json", "yaml"):
        emit(report, output)
        return 0
    content = report["content"]
    rows = [["SUBJECT/COMP", "STATUS", "DETAIL"]]
    for record in content["migrations"]:
        rows.append([f"{subject(record['requestUUID'])}/{record['component']}",
                     f"{record['phase']}/{record['classification']}/{record['freshness']}",
                     "MSG: " + _cut(record.get("message") or "-", 21) if record.get("message") else "-"])
    for issue in content["issues"]:
        rows.append([f"{subject(issue.get('requestUUID')) if issue.get('requestUUID') else 'REPORT'}/"
                     f"{issue.get('component') or '-'}", f"{content['summary']['state']}/Stale", issue["code"]])
    if len(rows) == 1:
        rows.append(["-/-", f"{content['summary']['state']}/Current", "-"])
    print_table(rows)
    return 0


def _when(*times: str | None) -> str:
    latest = max((t for t in times if t), default=None)
    if not latest:
        return "-"
    return dt.datetime.fromisoformat(latest.replace("Z", "+00:00")).strftime("%m-%dT%H:%MZ")


def migration_history(cluster: Cluster, namespace: str, name: str, component: str | None, output: str) -> int:
    try:
        report = status_report(cluster, namespace, name, component)
        audit_state, audit = "Available", []
        try:
            found = cluster.config_map(namespace, f"{name}-ome-migration-audit")
        except Exception:
            found, audit_state = None, "Forbidden"
        if found is None and audit_state == "Available":
            audit_state = "NotFound"
        issues = list(report["content"]["issues"])
        if found is not None:
            try:
                audit = json.loads((found.get("data") or {}).get("history.json") or "[]")
            except ValueError:
                issues.append({"code": "AuditMalformed"})
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    records = [{"evidence": "Authoritative", **r} for r in report["content"]["migrations"]]
    for entry in audit if isinstance(audit, list) else []:
        if not isinstance(entry, dict) or (component and entry.get("component") not in (component, None)):
            continue
        records.append({"evidence": "AuditHistory", "requestUUID": entry.get("id"),
                        "component": entry.get("component"), "phase": entry.get("phase"),
                        "classification": "Active" if entry.get("phase") == "Started" else "Terminal",
                        "message": entry.get("outcome"), "completedAt": entry.get("at"),
                        "startedAt": entry.get("acceptedAt"), "sourceInstance": entry.get("instance"),
                        "surgeInstance": entry.get("replacementInstance"), "fromNode": entry.get("fromNode")})
    state = "Partial" if issues else "Reported" if records else "Empty"
    full = {"apiVersion": REPORT_VERSION, "kind": "MigrationHistoryReport",
            "sources": {"authoritative": report["sources"], "parentSummary": "Empty", "auditHistory": audit_state},
            "summary": {"state": state, "records": len(records)}, "records": records, "issues": issues}
    if output in ("json", "yaml"):
        emit(full, output)
        return 0
    rows = [["EVID", "REQUEST/COMP", "PHASE/STATE", "WHEN", "DETAIL"]]
    for record in records:
        comp = INITIALS.get(str(record.get("component")), "-")
        mark = "A" if record["classification"] == "Active" else "T"
        detail = record.get("message") or "-"
        rows.append(["AUTH" if record["evidence"] == "Authoritative" else "AUDIT",
                     f"{subject(record.get('requestUUID'))}/{comp}", f"{record.get('phase')}/{mark}",
                     _when(record.get("startedAt"), record.get("allocatedAt"), record.get("completedAt")),
                     detail if output == "wide" else _cut(detail, 20)])
    for issue in issues:
        rows.append(["REPORT", "-", state, "-", issue["code"]])
    if output == "wide" and audit_state != "Available":
        rows.append(["AUDIT", "-", "-", "-", audit_state])
    print_table(rows)
    return 0


# -- start -------------------------------------------------------------------------------------------------------------

def check_flags(instance: str | None, component: str | None, from_node: str | None, hints: list[str],
                reason: str | None, requested_by: str, request_id: str | None) -> tuple[int, list[str]]:
    """The refusals that come before any read (exit 1)."""
    if instance is None or not _CANONICAL_INT.match(instance) or int(instance) > 2**31 - 1:
        raise Refused("instance must be a canonical integer from 0 through 2147483647")
    if component not in c.COMPONENTS:
        raise Refused(INVALID_VALUES)
    if from_node is not None and not migration_request.valid_node_name(from_node):
        raise Refused(INVALID_VALUES)
    if reason is not None and (len(reason.encode()) > migration_request.MAX_REASON or not reason.isprintable()
                               or _SECRETISH.search(reason)):
        raise Refused(INVALID_VALUES)
    if not migration_request.valid_requested_by(requested_by):
        raise Refused(INVALID_VALUES)
    if request_id is not None and not migration_request.is_uuid(request_id):
        raise Refused(INVALID_VALUES)
    flat = [h.strip() for value in hints for h in value.split(",") if h.strip()]
    if len(flat) > migration_request.MAX_HINTS or len(set(flat)) != len(flat) or from_node in flat or \
            not all(migration_request.valid_node_name(h) for h in flat):
        raise Refused("invalid migration node hints")
    return int(instance), flat


def _observe(cluster: Cluster, namespace: str, name: str, component: str, index: int, from_node: str | None,
             hints: list[str]) -> Obj:
    """Everything the request depends on, refused (exit 3) when the move cannot start now."""
    isvc = read_target(cluster, namespace, name)
    meta = isvc["metadata"]
    annotations: dict[str, str] = meta.get("annotations") or {}
    if not (isvc.get("status") or {}).get("components"):
        raise Refused("action refused: active runtime is unavailable, inconsistent or unbound")
    pending: list[migration_request.Request] = []
    for key in migration_request.request_keys(annotations):
        parsed = migration_request.parse(key, annotations[key])
        if isinstance(parsed, str):
            raise Refused("invalid retained migration payload")
        pending.append(parsed)
    if annotations.get(PAUSED) in ("true", "freeze") or any(k in annotations for k in MAILBOXES):
        raise Refused(PRECONDITION, 3)
    replicas = [r for r in replica_sources(cluster, namespace, isvc) if (r.get("spec") or {}).get("component") ==
                component]
    if len(replicas) != 1:
        raise Refused(PRECONDITION, 3)
    replica = replicas[0]
    spec, status = replica.get("spec") or {}, replica.get("status") or {}
    if spec.get("paused") or freshness(replica) != "Current":
        raise Refused(PRECONDITION, 3)
    if ((spec.get("lifecycle") or {}).get("migrationPolicy") or {}).get("mode") == "Never":
        raise Refused(PRECONDITION, 3)
    rows = {r.index: r for r in decode_rows(status)}
    row = rows.get(index)
    update = str(status.get("updateRevision") or "").rsplit("-", 1)[-1]
    if row is None or row.phase != "Ready" or row.operation is not None or \
            row.running_revision != row.target_revision or (update and row.running_revision != update):
        raise Refused(PRECONDITION, 3)
    for record in status.get("migrations") or []:
        if record.get("phase") not in TERMINAL and index in (record.get("sourceInstance"),
                                                               record.get("surgeInstance")):
            raise Refused(PRECONDITION, 3)
    if any(p.component == component and p.instance == index for p in pending):
        raise Refused(PRECONDITION, 3)
    pods = [p for p in cluster.pods(namespace, name, component, index) if not p["metadata"].get("deletionTimestamp")]
    nodes = sorted({(p.get("spec") or {}).get("nodeName") or "" for p in pods})
    labels = [(p["metadata"].get("labels") or {}) for p in pods]
    if len(pods) != int(row.pod_count or len(pods)) or "" in nodes or not pods or \
            any(lbl.get(c.LABEL_REVISION_HASH) != row.running_revision for lbl in labels):
        raise Refused(PRECONDITION, 3)
    source = from_node
    if source is None:
        if len(nodes) != 1:
            raise Refused(PRECONDITION, 3)
        source = nodes[0]
    if source not in nodes or source in hints:
        raise Refused(PRECONDITION, 3)
    others = [p for p in pending if p.component == component] or \
        [r for r in status.get("migrations") or [] if r.get("phase") not in TERMINAL]
    return {"isvc": isvc, "replica": replica, "row": row, "pods": sorted(p["metadata"]["uid"] for p in pods),
            "nodes": nodes, "from_node": source, "queued": bool(pending), "others": bool(others),
            "mode": ((spec.get("lifecycle") or {}).get("migrationPolicy") or {}).get("mode") or "Auto"}


def migration_start(cluster: Cluster, namespace: str, name: str, *, component: str | None, instance: str | None,
                    from_node: str | None, hints: list[str], reason: str | None, requested_by: str,
                    request_id: str | None, dry_run: str, yes: bool, output: str, context: str | None,
                    ome_namespace: str) -> int:
    deadline = time.monotonic() + ACTION_SECONDS
    try:
        index, flat = check_flags(instance, component, from_node, hints, reason, requested_by, request_id)
        assert component is not None
        seen = _observe(cluster, namespace, name, component, index, from_node, flat)
        isvc, replica, row = seen["isvc"], seen["replica"], seen["row"]
        meta = isvc["metadata"]
        lookup = request_id is not None
        uuid = request_id or str(uuidlib.uuid4())
        request = migration_request.Request(uuid=uuid, component=component, instance=index,
                                            from_node=seen["from_node"], hints=tuple(flat), reason=reason,
                                            requested_at=now_text(), requested_by=requested_by)
        preview = [["FIELD", "VALUE"], ["Action", "migration start"], ["Context", context or "-"],
                   ["Workload NS", namespace], ["OME NS", ome_namespace], ["Target", f"InferenceService/{name}"],
                   ["UID", str(meta.get("uid"))], ["ResourceVersion", str(meta.get("resourceVersion"))],
                   ["Dry-run", dry_run], ["Request UUID", uuid], ["Schema", migration_request.SCHEMA_VERSION],
                   ["Component", component], ["Instance", str(index)], ["From node", seen["from_node"]],
                   ["Hint nodes", ", ".join(flat) or "<absent>"], ["Reason", json.dumps(reason) if reason else
                                                                   "<absent>"],
                   ["Requested at", request.requested_at or "-"], ["Requested by", requested_by],
                   ["Lookup only", str(lookup).lower()], ["Source IR", replica["metadata"]["name"]],
                   ["IR UID", str(replica["metadata"].get("uid"))],
                   ["IR version", str(replica["metadata"].get("resourceVersion"))]]
        if not lookup:
            preview += [["Migration mode", seen["mode"]],
                        ["Running revision", f"{name}-{component}-{row.running_revision}"],
                        ["Incarnation", str(row.incarnation or 1)], ["Current nodes", ", ".join(seen["nodes"])]]
        print("ALPHA guarded migration preview (not controller convergence)", file=sys.stderr)
        print_table_err(preview)
        if lookup:
            value = (meta.get("annotations") or {}).get(migration_request.PREFIX + uuid)
            found = migration_request.parse(migration_request.PREFIX + uuid, value) if value else None
            same = found is not None and not isinstance(found, str) and \
                (found.component, found.instance, found.from_node, found.hints, found.reason) == \
                (component, index, seen["from_node"], tuple(flat), reason)
            if not same:
                raise Refused(PRECONDITION, 3)
            return _result(output, namespace, name, meta, dry_run, uuid, False, False,
                           "Identical retained mailbox observed; no replay sent; inspect migration status.",
                           component, context)
        print("Node hints are soft preferences; capacity, scheduling and controller convergence\n"
              "are not guaranteed.\nParent UID/resourceVersion CAS is not an IR/Pod/runtime transaction.",
              file=sys.stderr)
        if seen["queued"]:
            print("Other migration requests are queued; dispatch is serial and capacity is not guaranteed.",
                  file=sys.stderr)
        if seen["others"]:
            print("Other migration work is queued or executing; dispatch is serial and capacity is not guaranteed.",
                  file=sys.stderr)
        if not yes:
            confirm(deadline)
        try:
            again = _observe(cluster, namespace, name, component, index, from_node, flat)
        except Refused as exc:
            raise Refused(PRECONDITION, 3) from exc
        if again["isvc"]["metadata"].get("resourceVersion") != meta.get("resourceVersion") or \
                again["pods"] != seen["pods"] or again["row"] != row:
            raise Refused(PRECONDITION, 3)
        if dry_run == "client":
            return _result(output, namespace, name, meta, dry_run, uuid, False, False,
                           "Validated locally; no patch sent.", component, context)
        key = migration_request.PREFIX + uuid
        patch: list[Obj] = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
                            {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")}]
        if meta.get("annotations"):
            patch.append({"op": "add", "path": "/metadata/annotations/" + key.replace("/", "~1"),
                          "value": request.value()})
        else:
            patch.append({"op": "add", "path": "/metadata/annotations", "value": {key: request.value()}})
        try:
            cluster.patch_service(namespace, name, patch, dry_run=dry_run == "server")
        except Exception as exc:
            if getattr(exc, "status", None) in (409, 422):
                raise Refused(REJECTED, 3) from exc
            raise Refused(UNKNOWN + describe(exc)) from exc
        applied = dry_run == "none"
        return _result(output, namespace, name, meta, dry_run, uuid, True, applied,
                       "API accepted annotation request; delivery and convergence not observed." if applied else
                       "API dry-run accepted; no changes persisted.", component, context)
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code


def describe(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    try:
        return str(json.loads(body).get("message")) if body else str(exc)
    except (ValueError, AttributeError):
        return str(exc)


def _result(output: str, namespace: str, name: str, meta: Obj, dry_run: str, uuid: str, accepted: bool,
            applied: bool, message: str, component: str, context: str | None) -> int:
    follow = f"kubectl ome migration status {name} --component={component} -n {namespace}" + (
        f" --context={context}" if context else "")
    result = {"apiVersion": REPORT_VERSION, "kind": "ActionResult",
              "collectedAt": dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z"),
              "action": "migration start",
              "target": {"kind": "InferenceService", "namespace": namespace, "name": name, "uid": meta.get("uid"),
                         "resourceVersion": meta.get("resourceVersion")},
              "dryRun": dry_run, "requestID": uuid, "revisionHash": None, "accepted": accepted, "applied": applied,
              "message": message, "followUp": follow}
    if output in ("json", "yaml"):
        emit(result, output)
        return 0
    fields = [["FIELD", "VALUE"], ["action", "migration start"], ["target", f"InferenceService/{namespace}/{name}"],
              ["dry-run", dry_run], ["accepted", "Yes" if accepted else "No"], ["applied", "Yes" if applied else "No"],
              ["request-id", uuid], ["revision-hash", "-"], ["message", message], ["follow-up", follow],
              ["hint", "Use -o json or -o yaml for full values."]]
    width = 56 if output != "wide" else 200
    print_table([[k, v if len(v) <= width else v[:width - 3] + "..."] for k, v in fields])
    return 0


# -- wait --for=migration=terminal ---------------------------------------------------------------------------------

def find_record(cluster: Cluster, namespace: str, name: str, request_id: str) -> tuple[Obj | None, str]:
    """The record of one request and its validity (Valid, Unavailable)."""
    report = status_report(cluster, namespace, name, None)
    for record in report["content"]["migrations"]:
        if record["requestUUID"] == request_id:
            return record, "Valid" if record["freshness"] == "Current" else "Unavailable"
    return None, "Unavailable"
