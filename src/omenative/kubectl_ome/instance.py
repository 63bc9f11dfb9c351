"""`kubectl ome instance list|status|retry-blocks|release-held`, as OME's reference/kubectl-ome/instance.md describes
them.

The Instance rows come from each component's InferenceReplica status (either encoding); `instance status` adds the
live pods and their Warning events. `retry-blocks` reads one component's `status.retryBlocks`; `release-held` checks
that the block it names is Held on current status, previews the request, asks for confirmation, reads everything
again and sets the `ome.io/release-held-revision` annotation with a JSON patch guarded by the resourceVersion it
checked, so nothing is sent when anything changed meanwhile."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import sys
import time

from omenative.api import constants as c
from omenative.api.instance_status import decode_rows
from omenative.api.types import InstanceStatus
from omenative.kubectl_ome.cluster import Cluster
from omenative.kubectl_ome.common import (
    ACTION_SECONDS,
    REPORT_VERSION,
    Refused,
    confirm,
    emit,
    print_rows,
    print_table,
    print_table_err,
    short_time,
)
from omenative.obj import Obj


def shorten(value: str, width: int = 11) -> str:
    return value if len(value) <= width else f"{value[:4]}...{value[-4:]}"


def revisions(row: InstanceStatus) -> str:
    running, target = row.running_revision or "", row.target_revision or ""
    if running and target and running != target:
        return f"{shorten(running, 5)}>{shorten(target, 5)}"
    if not running and target:
        return ">" + shorten(target, 10)
    return shorten(running or target or "-")


def is_admitted(row: InstanceStatus) -> bool:
    """OME's admitted: the Instance has pods and none of them is held by a scheduling gate."""
    return (row.pod_count or 0) > 0 and row.admitted is not False


def flags(row: InstanceStatus) -> str:
    return ("A" if is_admitted(row) else "-") + ("O" if row.operation else "-") + ("F" if row.last_failure else "-")


def evidence(replica: Obj, rows: list[InstanceStatus], isvc: Obj | None = None) -> str:
    status = replica.get("status") or {}
    generation = replica["metadata"].get("generation")
    observed = status.get("observedGeneration")
    if observed is None:
        return "NOT-OBSERVED"
    if observed != generation:
        return f"STALE:{observed}/{generation}"
    if isvc is not None:
        parent = (replica["metadata"].get("annotations") or {}).get(c.ANN_PARENT_GENERATION)
        if parent is None:
            return "PARENT-UNAVL"
        if not parent.isdigit():
            return "BAD:PARENT"
        if int(parent) < int(isvc["metadata"].get("generation") or 0):
            return "STALE:PARENT"
    if not rows:
        return "NOT-REPORTED" if status.get("replicas") else "EMPTY"
    indexes = sorted(r.index or 0 for r in rows)
    if len(set(indexes)) != len(indexes):
        return "BAD:DUP-IDX"
    return "SPARSE" if indexes != list(range(len(indexes))) else "OK"


def row_evidence(level: str, row: InstanceStatus) -> str:
    """The component's evidence, unless this Instance cannot progress as things stand: then what holds it (the
    operation's `waiting` token, as `HOLD:QuotaExceeded`) or why it failed (`FAILED:InvalidPodSpec`). A status that
    is current says nothing about whether the Instance can come up, so `OK` is never shown for one that cannot."""
    if level not in ("OK", "SPARSE"):
        return level
    if row.operation is not None and row.operation.waiting:
        return f"HOLD:{row.operation.waiting}"
    if row.phase == "Failed":
        return f"FAILED:{row.last_failure.reason if row.last_failure and row.last_failure.reason else '-'}"
    return level


def refusal(replica: Obj) -> str | None:
    """The replica's standing refusal in one line (its ReplicaFailure condition), or None."""
    cond = next((x for x in (replica.get("status") or {}).get("conditions") or []
                 if isinstance(x, dict) and x.get("type") == "ReplicaFailure" and x.get("status") == "True"), None)
    return str(cond.get("message") or cond.get("reason") or "refused") if cond is not None else None


def instance_list(cluster: Cluster, namespace: str, isvc: str, output: str) -> int:
    table = [["COMP", "IDX/INC", "PHASE", "PODS", "REVS", "AOF", "EVIDENCE"]]
    components = []
    causes: list[str] = []
    parent = cluster.inference_service(namespace, isvc)
    for replica in cluster.replicas(namespace, isvc):
        component = (replica.get("spec") or {}).get("component") or "?"
        rows = decode_rows(replica.get("status"))
        level = evidence(replica, rows, parent)
        refused = refusal(replica)
        entry: Obj = {"component": component, "replica": replica["metadata"]["name"], "evidence": level,
                      "instances": [r.to_dict() for r in rows]}
        if refused:
            entry["refused"] = refused
            causes.append(f"{component} {refused}")
        components.append(entry)
        if not rows:
            table.append([component, "-", "-", "-", "-", "-", level])
        for row in rows:
            pods = f"{row.serving_pod_count or 0}/{row.available_pod_count or 0}/{row.pod_count or 0}"
            table.append([component, f"{row.index}/{row.incarnation or 1}", row.phase or "-", pods, revisions(row),
                          flags(row), row_evidence(level, row)])
    if output == "table":
        if len(table) == 1:
            table.append(["-", "-", "-", "-", "-", "-", "UNAVAILABLE"])
        print_table(table)
        if causes:  # why the held Instances wait, in the API server's words, below the table
            print("\n" + "\n".join(causes))
    else:
        emit({"apiVersion": REPORT_VERSION, "kind": "InstanceListReport", "inferenceService": isvc,
              "namespace": namespace, "components": components}, output)
    return 0


def instance_status(cluster: Cluster, namespace: str, isvc: str, index: int, component: str, output: str) -> int:
    replica = next((r for r in cluster.replicas(namespace, isvc)
                    if (r.get("spec") or {}).get("component") == component), None)
    fields: list[tuple[str, str]] = []
    report: Obj = {"apiVersion": REPORT_VERSION, "kind": "InstanceStatusReport", "inferenceService": isvc,
                   "namespace": namespace, "component": component, "index": index}
    if replica is None:
        fields.append(("state", f"NotProjected {component}[{index}]"))
        report["state"] = "NotProjected"
    else:
        rows = decode_rows(replica.get("status"))
        level = evidence(replica, rows)
        encoding = (replica.get("status") or {}).get("instanceStatusEncoding") or "DenseV1"
        row = next((r for r in rows if r.index == index), None)
        state = "Reported" if row is not None else "Missing"
        report.update(state=state, evidence=level, encoding=encoding)
        fields.append(("state", f"{state} {component}[{index}] evidence={level}"))
        refused = refusal(replica)
        if refused and refused.startswith(f"Instance {index}:"):
            fields.append(("refused", refused.partition(": ")[2]))
        fields.append(("deployment", f"mode=OMENative replica={replica['metadata']['name']}"))
        fields.append(("encoding", f"name={encoding}"))
        if row is not None:
            report["instance"] = row.to_dict()
            fields.append(("instance", f"{replica['metadata']['name']} inc={row.incarnation} phase={row.phase} "
                                       f"admitted={'true' if is_admitted(row) else 'false'}"))
            fields.append(("revisions", f"running={row.running_revision or '-'} target={row.target_revision or '-'}"))
            fields.append(("persisted", f"pods={row.pod_count or 0} serving={row.serving_pod_count or 0} "
                                        f"available={row.available_pod_count or 0}"))
            fields.append(("lifecycle", f"activeOrdinal={row.active_ordinal or 0} readySince={row.ready_since or '-'}"))
            for marker in row.announced or []:
                fields.append(("announced", marker))
            for cond in row.conditions or []:
                fields.append(("condition", f"{cond.type}={cond.status} reason={cond.reason or '-'}"))
            if row.operation:
                op = row.operation
                fields.append(("operation", f"type={op.type} step={op.step} retries={op.retry_count or 0}"))
                fields.append(("op target", f"revision={op.target_revision or '-'} reason={op.reason or '-'}"))
                fields.append(("op timing", f"started={op.started_at or '-'} deadline={op.deadline or '-'}"))
                if op.waiting:
                    fields.append(("op hold", f"waiting={op.waiting} "
                                              f"capacityRefusedAt={op.capacity_refused_at or '-'}"))
                if op.strategy:
                    fields.append(("op strategy", op.strategy))
                if op.surge_index is not None:
                    fields.append(("op nodes", f"surge={op.surge_index}"))
            if row.last_failure:
                failure = row.last_failure
                fields.append(("failure", f"pod={failure.pod_name or '-'} container={failure.container_name or '-'} "
                                          f"reason={failure.reason or '-'} exit={failure.exit_code}"))
                fields.append(("fail time", failure.time or "-"))
        pods = cluster.pods(namespace, isvc, component, index)
        report["pods"] = []
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            conditions = {x["type"]: x["status"] for x in (pod.get("status") or {}).get("conditions") or []}
            restarts = sum(s.get("restartCount", 0) for s in (pod.get("status") or {}).get("containerStatuses") or [])
            runner = (pod["metadata"].get("labels") or {}).get(c.LABEL_RUNNER, "-")
            line = (f"{pod['metadata']['name']} {runner}/{(pod.get('status') or {}).get('phase', '-')} "
                    f"ready={conditions.get('Ready', 'False')} serving={conditions.get(c.SERVING_GATE, 'False')} "
                    f"restarts={restarts} node={(pod.get('spec') or {}).get('nodeName') or '-'} "
                    f"deleting={'true' if pod['metadata'].get('deletionTimestamp') else 'false'}")
            fields.append(("pod", line))
            report["pods"].append(line)
            for event in cluster.warnings(namespace, pod["metadata"]["name"]):
                fields.append(("event", f"Pod/{pod['metadata']['name']} reason={event.get('reason')} "
                                        f"count={event.get('count') or 1}"))
    if output in ("table", "wide"):
        print_rows(fields, output == "wide")
    else:
        emit(report, output)
    return 0


RELEASE_ANNOTATION = c.ANN_RELEASE_HELD_REVISION


STATES = {"Backoff": "BACKOFF", "RetryInProgress": "RUNNING", "Held": "HELD"}


HASH = re.compile(r"^[0-9a-f]{8}$")


def target_alias(name: str) -> str:
    """A name over 14 characters as its first 5, `#` and a digest (not the revision's hash)."""
    if len(name) <= 14:
        return name
    return f"{name[:5]}#{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def replica_for(cluster: Cluster, namespace: str, isvc: str, component: str) -> tuple[Obj | None, list[str]]:
    """The component's InferenceReplica and the issues that keep its blocks from being trusted."""
    found = [r for r in cluster.replicas(namespace, isvc) if (r.get("spec") or {}).get("component") == component]
    if not found:
        return None, ["NO_COMPONENT"]
    if len(found) > 1:
        return None, ["DUP_COMP"]
    replica = found[0]
    meta, status = replica["metadata"], replica.get("status") or {}
    issues = []
    if status.get("observedGeneration") is None:
        issues.append("STATUS_UNOBS")
    elif status.get("observedGeneration") != meta.get("generation"):
        issues.append("STATUS_STALE")
    parent = cluster.inference_service(namespace, isvc)
    annotation = (meta.get("annotations") or {}).get(c.ANN_PARENT_GENERATION)
    if annotation is None:
        issues.append("PARENT_MISS")
    elif not annotation.isdigit():
        issues.append("PARENT_BAD")
    elif parent is not None and int(annotation) < int(parent["metadata"].get("generation") or 0):
        issues.append("PARENT_STALE")
    elif parent is not None and int(annotation) > int(parent["metadata"].get("generation") or 0):
        issues.append("PARENT_AHEAD")
    return replica, issues


def block_issue(block: Obj) -> str | None:
    if not block.get("targetRevision"):
        return "TARGET_BAD"
    if block.get("state") not in STATES:
        return "STATE_BAD"
    if not isinstance(block.get("attemptsStarted"), int) or block["attemptsStarted"] < 1:
        return "ATT_BAD"
    first, last = block.get("firstFailureAt"), block.get("lastFailureAt")
    try:
        times = [dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (first, last) if t]
    except ValueError:
        return "TIME_BAD"
    now = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)  # a little clock skew is not an error
    if any(t > now for t in times) or (len(times) == 2 and times[0] > times[1]):
        return "TIME_BAD"
    return None


def retry_blocks(cluster: Cluster, namespace: str, isvc: str, component: str, output: str) -> int:
    replica, issues = replica_for(cluster, namespace, isvc, component)
    blocks: list[Obj] = [] if replica is None else list((replica.get("status") or {}).get("retryBlocks") or [])
    deleting = replica is not None and bool(replica["metadata"].get("deletionTimestamp"))
    targets = [b.get("targetRevision") for b in blocks]
    if len(set(targets)) != len(targets):
        issues.append("DUP_TARGET")
    rows = [["COMP", "STATE", "TARGET", "ATT", "NEXT", "REL", "REASON"]]
    report_blocks = []
    for block in blocks:
        issue = block_issue(block)
        if issue:
            issues.append(issue)
        eligible = block.get("state") == "Held" and not issues and not deleting
        attempts = block.get("attemptsStarted")
        report_blocks.append({**block, "releaseEligible": eligible})
        reason = str(block.get("reason") or "-")
        rows.append([component, STATES.get(str(block.get("state")), "INVALID"),
                     target_alias(str(block.get("targetRevision") or "-")),
                     "99+" if isinstance(attempts, int) and attempts > 99 else str(attempts or "-"),
                     short_time(block.get("nextRetryAt")), "YES" if eligible else "NO",
                     reason if len(reason) <= 13 else reason[:10] + "..."])
    for issue in dict.fromkeys(issues):
        rows.append([component, "ISSUE", "-", "-", "-", "NO", issue])
    if len(rows) == 1:
        rows.append(["-", "EMPTY", "-", "-", "-", "NO", "-"])
    if output == "table":
        print_table(rows)
    else:
        summary = {state: sum(1 for b in blocks if b.get("state") == state) for state in STATES}
        emit({"apiVersion": REPORT_VERSION, "kind": "InstanceRetryBlocksReport", "inferenceService": isvc,
              "namespace": namespace, "component": component,
              "inferenceReplica": replica["metadata"]["name"] if replica else None, "blocks": report_blocks,
              "issues": list(dict.fromkeys(issues)), "summary": summary}, output)
    return 0


def _resolve(replica: Obj, revision: str) -> Obj:
    """The exact Held block the revision names (full name or hash); refuses anything else."""
    for block in (replica.get("status") or {}).get("retryBlocks") or []:
        name = str(block.get("targetRevision") or "")
        if (name == revision or (HASH.match(revision) and name.endswith(f"-{revision}"))) and \
                block.get("state") == "Held" and block_issue(block) is None:
            return dict(block)
    raise Refused("action refused: no exact current valid Held retry block is releasable")


def _check(cluster: Cluster, namespace: str, isvc: str, component: str, revision: str) -> tuple[Obj, Obj]:
    parent = cluster.inference_service(namespace, isvc)
    if parent is None:
        raise Refused("required Kubernetes API request failed; check access and connectivity")
    if parent["metadata"].get("deletionTimestamp"):
        raise Refused(f"action refused: InferenceService {namespace}/{isvc} is being deleted")
    for other in cluster.replicas(namespace, isvc):
        _, issues = replica_for(cluster, namespace, isvc, (other.get("spec") or {}).get("component") or "")
        if issues or other["metadata"].get("deletionTimestamp"):
            raise Refused("action refused: no exact current valid Held retry block is releasable")
    replica, issues = replica_for(cluster, namespace, isvc, component)
    if replica is None or issues:
        raise Refused("action refused: no exact current valid Held retry block is releasable")
    if (replica["metadata"].get("annotations") or {}).get(c.ANN_CONTROLLER_WRITE) != "true":
        raise Refused("action refused: no exact current valid Held retry block is releasable")
    if RELEASE_ANNOTATION in (replica["metadata"].get("annotations") or {}):
        raise Refused("action refused: a release-held mailbox is already present; inspect instance retry-blocks")
    return replica, _resolve(replica, revision)


def release_held(cluster: Cluster, namespace: str, isvc: str, component: str, revision: str, *, dry_run: str, yes: bool,
                 output: str, context: str | None) -> int:
    deadline = time.monotonic() + ACTION_SECONDS
    revision = revision.strip()
    try:
        replica, block = _check(cluster, namespace, isvc, component, revision)
        name = str(block["targetRevision"])
        meta = replica["metadata"]
        print_table_err([["HELD RELEASE PREVIEW", ""], ["target", f"InferenceReplica/{namespace}/{meta['name']}"],
                         ["revision", name], ["state", f"{block.get('state')} after {block.get('attemptsStarted')} "
                                                       "attempt(s)"],
                         ["reason", str(block.get("reason") or "-")],
                         ["annotation", f"{RELEASE_ANNOTATION}={name}"], ["dry-run", dry_run]])
        if not yes:
            confirm(deadline)
        try:
            again, again_block = _check(cluster, namespace, isvc, component, revision)
        except Refused as exc:
            raise Refused("held-release preview became stale; inspect instance retry-blocks and retry explicitly",
                          3) from exc
        if again["metadata"].get("resourceVersion") != meta.get("resourceVersion") or again_block != block:
            raise Refused("held-release preview became stale; inspect instance retry-blocks and retry explicitly", 3)
        accepted = applied = False
        message = "Validated locally; no patch sent."
        if dry_run != "client":
            patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
                     {"op": "add", "path": "/metadata/annotations/" + RELEASE_ANNOTATION.replace("/", "~1"),
                      "value": name}]
            try:
                cluster.patch_replica(namespace, meta["name"], patch, dry_run=dry_run == "server")
            except Exception as exc:
                status = getattr(exc, "status", None)
                if status in (409, 422):
                    raise Refused("guarded held-release rejected; inspect instance retry-blocks", 3) from exc
                raise Refused("held-release request outcome unknown; inspect instance retry-blocks before another "
                              "explicit request") from exc
            accepted, applied = True, dry_run == "none"
            message = "API accepted release annotation request; controller release/convergence not observed." \
                if applied else "API dry-run accepted; no changes persisted."
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    follow = f"kubectl ome instance retry-blocks {isvc} --component={component} -n {namespace}" + (
        f" --context={context}" if context else "")
    result = {
        "apiVersion": REPORT_VERSION, "kind": "ActionResult",
        "collectedAt": dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z"),
        "action": "instance release-held",
        "target": {"kind": "InferenceReplica", "namespace": namespace, "name": meta["name"], "uid": meta.get("uid"),
                   "resourceVersion": meta.get("resourceVersion")},
        "dryRun": dry_run, "revisionHash": name.rsplit("-", 1)[-1], "accepted": accepted, "applied": applied,
        "message": message, "followUp": follow,
    }
    if output in ("json", "yaml"):
        emit(result, output)
        return 0
    fields = [["FIELD", "VALUE"], ["action", "instance release-held"],
              ["target", f"InferenceReplica/{namespace}/{meta['name']}"], ["dry-run", dry_run],
              ["accepted", "Yes" if accepted else "No"], ["applied", "Yes" if applied else "No"],
              ["request-id", "-"], ["revision-hash", str(result["revisionHash"])], ["message", message],
              ["follow-up", follow], ["hint", "Use -o json or -o yaml for full values."]]
    print_table([[k, v if len(v) <= 56 else v[:53] + "..."] for k, v in fields])
    return 0
