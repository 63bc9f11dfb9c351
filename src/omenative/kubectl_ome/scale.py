"""`kubectl ome scale` (alpha) and `kubectl ome autoscale status`, after OME's reference/kubectl-ome/scale.md and
autoscale.md.

`scale` sets one component's InferenceReplica `spec.replicas` through its `/scale` subresource, after checking that no
Instance work runs on the component and that the count is within the bounds the InferenceService or its runtime sets.
The patch carries the InferenceReplica's UID and resourceVersion, so the API server refuses it (409) when the replica
changed after the command read it. The count is transient: the autoscaler that owns it (the HPA omenative creates, an
external one) or omenative itself (class None) sets it again.
"""

from __future__ import annotations

import datetime as dt
import re
import sys

from omenative.api import constants as c
from omenative.api import migration_request
from omenative.api.instance_status import decode_rows
from omenative.kubectl_ome.cluster import Cluster
from omenative.kubectl_ome.common import REPORT_VERSION, Refused, emit, print_table, print_table_err
from omenative.kubectl_ome.rollout import MAILBOX, MAILBOXES, READ_FAILED, STALE, read_target
from omenative.obj import Obj

ARGS = ("invalid scale arguments; require one service, component engine|decoder|router, positive base-10 --replicas, "
        "supported output/dry-run and valid namespace/context/timeout")
OVERRIDE = "manual scale is transient and requires --override-autoscaler --yes for every ownership class"
BUSY = "manual scale refused: selected lifecycle, migration or rollout work is active"
BOUNDS = "manual scale replicas must be positive and within verified bounds and partitions"
SOURCE = "manual scale source evidence is unavailable or inconsistent"
EVIDENCE = "manual scale requires complete current selected replica and Scale evidence"
REJECTED = "guarded scale precondition rejected; inspect current status and prepare a new request"
UNKNOWN = "scale request outcome unknown; inspect kubectl ome autoscale status before preparing another request"
OWNERS = {"HPA": "ome", "KEDA": "ome", "External": "external", "None": "none"}
TERMINAL = migration_request.TERMINAL_PHASES


def _component_spec(isvc: Obj, component: str) -> Obj | None:
    value = (isvc.get("spec") or {}).get(component)
    return value if isinstance(value, dict) else None


def _runtime(cluster: Cluster, namespace: str, isvc: Obj) -> Obj:
    """The named runtime's spec (namespaced first, then cluster-wide); {} when the service names none."""
    name = ((isvc.get("spec") or {}).get("runtime") or {}).get("name")
    if not name:
        return {}
    found = cluster.get_ome("servingruntimes", namespace, name) or cluster.get_ome("clusterservingruntimes", "",
                                                                                   name)
    if found is None:
        raise Refused("action refused: active runtime is unavailable, inconsistent or unbound")
    return dict(found.get("spec") or {})


def ownership(isvc: Obj, runtime: Obj, component: str) -> tuple[str, str, tuple[int, int]]:
    """The autoscaler class, where it is set (isvc, runtime or default) and the bounds `scale` accepts: minReplicas
    to maxReplicas from the service or its runtime; without a maxReplicas, only the minimum (1 when unset or 0)."""
    own = _component_spec(isvc, component) or {}
    config = runtime.get(f"{component}Config") or {}
    klass, source = "HPA", "default"
    for layer, values in (("isvc", own), ("runtime", config)):
        autoscaler = values.get("autoscaler")
        if isinstance(autoscaler, dict) and autoscaler.get("class"):
            klass, source = str(autoscaler["class"]), layer
            break
    low = own.get("minReplicas", config.get("minReplicas"))
    high = own.get("maxReplicas", config.get("maxReplicas"))
    low = int(low) if isinstance(low, int) and low > 0 else 1
    high = int(high) if isinstance(high, int) and high >= low else low
    return klass, source, (low, high)


def _busy(replica: Obj, isvc: Obj, component: str) -> bool:
    status = replica.get("status") or {}
    rows = decode_rows(status)
    if any(r.phase != "Ready" or r.operation is not None for r in rows):
        return True
    if any(m.get("phase") not in TERMINAL for m in status.get("migrations") or []):
        return True
    if status.get("currentRevision") != status.get("updateRevision"):
        return True
    if status.get("replicas") != (replica.get("spec") or {}).get("replicas"):
        return True  # a count change (an autoscaler's, an earlier request's) is still being carried out
    block = ((isvc.get("status") or {}).get("components") or {}).get(component) or {}
    return block.get("rolloutPhase") not in (None, "Stable", "Succeeded")


def _observe(cluster: Cluster, namespace: str, name: str, component: str, replicas: int) -> Obj:
    isvc = read_target(cluster, namespace, name)
    annotations = isvc["metadata"].get("annotations") or {}
    if not ((isvc.get("status") or {}).get("components") or {}):
        raise Refused("action refused: active runtime is unavailable, inconsistent or unbound")
    if component not in ((isvc.get("status") or {}).get("components") or {}):
        raise Refused(SOURCE)
    if any(k in annotations for k in MAILBOXES):
        raise Refused(MAILBOX)
    runtime = _runtime(cluster, namespace, isvc)
    klass, source, (low, high) = ownership(isvc, runtime, component)
    target = (((isvc.get("status") or {}).get("components") or {}).get(component) or {}).get("scaleTargetRef") or {}
    replica = cluster.get_ome("inferencereplicas", namespace, str(target.get("name") or f"{name}-{component}"))
    if replica is None or (replica.get("spec") or {}).get("component") != component:
        raise Refused(EVIDENCE)
    meta, status = replica["metadata"], replica.get("status") or {}
    if (meta.get("annotations") or {}).get(c.ANN_PARENT_GENERATION) != str(isvc["metadata"].get("generation")) or \
            status.get("observedGeneration") != meta.get("generation"):
        raise Refused(STALE)
    current = (replica.get("spec") or {}).get("replicas")
    if not isinstance(current, int) or current < 1:
        raise Refused(EVIDENCE)
    if _busy(replica, isvc, component):
        raise Refused(BUSY)
    partition = int(((replica.get("spec") or {}).get("pacing") or {}).get("partition") or 0)
    if not low <= replicas <= high or replicas < partition:
        raise Refused(BOUNDS)
    return {"isvc": isvc, "replica": replica, "class": klass, "source": source, "bounds": (low, high),
            "current": current}


def scale(cluster: Cluster, namespace: str, name: str, *, component: str | None, replicas: str | None,
          override: bool, yes: bool, dry_run: str, output: str, context: str | None, ome_namespace: str) -> int:
    try:
        if component not in c.COMPONENTS or replicas is None or not re.match(r"^[1-9][0-9]*$", replicas) or \
                int(replicas) > 2**31 - 1 or (override and not yes):
            raise Refused(ARGS)
        if not override:
            raise Refused(OVERRIDE)
        assert component is not None
        count = int(replicas)
        try:
            seen = _observe(cluster, namespace, name, component, count)
        except Refused:
            raise
        except Exception as exc:
            raise Refused(READ_FAILED) from exc
        isvc, replica = seen["isvc"], seen["replica"]
        meta, status = replica["metadata"], replica.get("status") or {}
        low, high = seen["bounds"]
        instances = (f"{status.get('replicas', 0)} total; {status.get('readyReplicas', 0)} ready; "
                     f"{status.get('servingReplicas', 0)} serving; {status.get('availableReplicas', 0)} available")
        print("ALPHA guarded scale preview (not controller convergence)", file=sys.stderr)
        print_table_err([
            ["FIELD", "VALUE"], ["context", context or "-"], ["workload namespace", namespace],
            ["OME namespace", ome_namespace], ["parent", name], ["parent UID", str(isvc["metadata"].get("uid"))],
            ["parent generation", str(isvc["metadata"].get("generation"))], ["IR", meta["name"]],
            ["IR UID", str(meta.get("uid"))], ["IR RV", str(meta.get("resourceVersion"))],
            ["IR generation", str(meta.get("generation"))],
            ["parent stamp", str((meta.get("annotations") or {}).get(c.ANN_PARENT_GENERATION))],
            ["component", component], ["/scale spec.replicas", f"{seen['current']} -> {count}"],
            ["bounds", f"{low}..{high}"], ["verified ownership", f"{seen['class']} / {OWNERS.get(seen['class'], '?')}"],
            ["verified source", seen["source"]], ["override / transient", "true / true"], ["dry-run", dry_run],
            ["reported Instances", instances], ["lifecycle / canary", "No observed selected active work"],
            ["parent freshness", "Unverifiable (advisory)"], ["IR proofs revalidated", "1"]])
        print("This is a transient /scale request, not a change to parent replica intent.\n"
              "The ISVC projector restores ISVC/runtime-derived desired replicas on\nreconciliation.\n"
              "Scale-down may drain/delete logical Instances; pause does not freeze teardown.\n"
              "IR UID/resourceVersion CAS is not a multi-object transaction.", file=sys.stderr)
        try:
            again = _observe(cluster, namespace, name, component, count)
        except Refused as exc:
            raise Refused("manual scale source changed; inspect current status and prepare a new request") from exc
        if again["replica"]["metadata"].get("resourceVersion") != meta.get("resourceVersion") or \
                again["isvc"]["metadata"].get("resourceVersion") != isvc["metadata"].get("resourceVersion"):
            raise Refused("manual scale source changed; inspect current status and prepare a new request")
        accepted = applied = False
        message = "Validated locally; no scale patch sent."
        if dry_run != "client":
            body = {"metadata": {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
                    "spec": {"replicas": count}}
            try:
                cluster.patch_scale(namespace, meta["name"], body, dry_run=dry_run == "server")
            except Exception as exc:
                if getattr(exc, "status", None) in (409, 422):
                    raise Refused(REJECTED, 3) from exc
                raise Refused(UNKNOWN) from exc
            accepted, applied = True, dry_run == "none"
            message = "API accepted transient scale request; convergence not observed." if applied else \
                "API dry-run accepted; no changes persisted."
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    follow = f"kubectl ome autoscale status {name} -n {namespace}" + (f" --context={context}" if context else "")
    result = {"apiVersion": REPORT_VERSION, "kind": "ActionResult",
              "collectedAt": dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z"), "action": "scale",
              "target": {"kind": "InferenceReplica", "namespace": namespace, "name": meta["name"],
                         "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
              "component": component, "replicas": {"from": seen["current"], "to": count},
              "bounds": {"min": low, "max": high}, "class": seen["class"], "owner": OWNERS.get(seen["class"]),
              "source": seen["source"], "dryRun": dry_run, "accepted": accepted, "applied": applied,
              "message": message, "followUp": follow}
    if output in ("json", "yaml"):
        emit(result, output)
        return 0
    fields = [["FIELD", "VALUE"], ["action", "scale"], ["target", f"InferenceReplica/{namespace}/{meta['name']}"],
              ["component", component], ["field", "/scale spec.replicas"],
              ["replicas", f"{seen['current']} -> {count}"], ["bounds", f"{low}..{high}"],
              ["class / owner", f"{seen['class']} / {OWNERS.get(seen['class'], '?')}"], ["source", seen["source"]],
              ["override", "Yes"], ["transient", "Yes"], ["dry-run", dry_run], ["instances", instances],
              ["parent freshness", "Unverifiable"], ["accepted", "Yes" if accepted else "No"],
              ["applied", "Yes" if applied else "No"], ["message", message], ["follow-up", follow],
              ["hint", "Use -o json or -o yaml for full values."]]
    width = 56 if output != "wide" else 200
    print_table([[k, v if len(v) <= width else v[:width - 3] + "..."] for k, v in fields])
    return 0


def _last_scale(text: str | None) -> str:
    if not text:
        return "-"
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).strftime("%b%d %H:%MZ")


def autoscale_status(cluster: Cluster, namespace: str, name: str, *, live_scale: bool, live_scaler: bool,
                     output: str) -> int:
    """One column per component: its autoscaler class, who manages it, where its settings come from, the scale
    target, and the counts (from the HorizontalPodAutoscaler omenative manages); with --live-scale, the
    InferenceReplica's own counts read through its /scale subresource."""
    try:
        isvc = cluster.inference_service(namespace, name)
        if isvc is None:
            raise Refused(READ_FAILED)
        runtime = _runtime(cluster, namespace, isvc)
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    blocks: Obj = (isvc.get("status") or {}).get("components") or {}
    columns: dict[str, Obj] = {}
    for component in c.COMPONENTS:
        block = blocks.get(component)
        if block is None:
            continue
        klass, source, _ = ownership(isvc, runtime, component)
        target = block.get("scaleTargetRef") or {}
        column: Obj = {"STATE": "Reported", "CLASS": klass, "MANAGED-BY": OWNERS.get(klass, "Unknown"),
                       "SPEC-SOURCE": source, "TARGET-KIND": "IR" if target.get("kind") == "InferenceReplica" else
                       target.get("kind") or "-", "TARGET-NAME": target.get("name") or "-",
                       "TARGET-EVIDENCE": "Reported" if target.get("name") else "NotReported"}
        if klass == "HPA" and target.get("name"):
            hpa = cluster.hpa(namespace, str(target["name"]))
            if hpa is not None:
                status = hpa.get("status") or {}
                column.update({"CURRENT": str(status.get("currentReplicas", "-")),
                               "DESIRED": str(status.get("desiredReplicas", "-")),
                               "REPLICA-EVIDENCE": "Reported", "LAST-SCALE": _last_scale(status.get("lastScaleTime"))})
                conditions = {x.get("type"): x.get("status") for x in status.get("conditions") or []}
                column["COND-EVIDENCE"] = "Reported" if conditions else "NotReported"
                for row, kind in (("ABLE-TO-SCALE", "AbleToScale"), ("SCALING-ACTIVE", "ScalingActive"),
                                  ("SCALING-LIMITED", "ScalingLimited")):
                    if kind in conditions:
                        column[row] = str(conditions[kind])
            else:
                column.update({"REPLICA-EVIDENCE": "NotReported", "STATE": "Partial"})
        else:
            column["REPLICA-EVIDENCE"] = "Unavailable"
        if live_scale and target.get("name"):
            try:
                live = cluster.scale_of(namespace, str(target["name"]))
                column.update({"LIVE-EVIDENCE": "Reported", "LIVE-SPEC": str((live.get("spec") or {}).get("replicas")),
                               "LIVE-CURRENT": str((live.get("status") or {}).get("replicas"))})
                column["LIVE-COUNT"] = "Equal" if (column.get("DESIRED"), column.get("CURRENT")) == (
                    column["LIVE-SPEC"], column["LIVE-CURRENT"]) else "Drift" if "DESIRED" in column else "Unknown"
            except Exception:
                column.update({"LIVE-EVIDENCE": "Unavailable", "LIVE-COUNT": "Unknown"})
        if live_scaler:
            column["SCALER-EVIDENCE"] = "Reported" if klass == "HPA" and "CURRENT" in column else "NotSelected"
        columns[component] = column
    states = [col["STATE"] for col in columns.values()]
    service = "Unavailable" if not columns else "Partial" if any(s != "Reported" for s in states) else "Reported"
    report = {"apiVersion": REPORT_VERSION, "kind": "AutoscaleStatusReport", "service": {"state": service},
              "components": columns, "warnings": [] if service == "Reported" else ["PartialData"]}
    if output in ("json", "yaml"):
        emit(report, output)
        return 0
    order = ["STATE", "CLASS", "MANAGED-BY", "SPEC-SOURCE", "TARGET-KIND", "TARGET-NAME", "TARGET-EVIDENCE", "CURRENT",
             "DESIRED", "REPLICA-EVIDENCE", "LAST-SCALE", "LIVE-EVIDENCE", "LIVE-SPEC", "LIVE-CURRENT", "LIVE-COUNT",
             "SCALER-EVIDENCE", "COND-EVIDENCE", "ABLE-TO-SCALE", "SCALING-ACTIVE", "SCALING-LIMITED"]
    rows = [["FIELD", "SERVICE", *(comp.upper() for comp in c.COMPONENTS)]]
    for field in order:
        if field != "STATE" and not any(field in col for col in columns.values()):
            continue
        rows.append([field, service if field == "STATE" else "-",
                     *(str((columns.get(comp) or {}).get(field, "-")) for comp in c.COMPONENTS)])
    print_table(rows)
    return 0
