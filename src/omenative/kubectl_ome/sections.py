"""The sections of `kubectl ome status` after the pods (reference/kubectl-ome/status.md): Rollout (the rollout
status view's service rows), Autoscaling (the autoscaler status each component records), Placement (omenative runs
in one cluster: not configured), Traffic (no traffic policy, and each component's weights by revision Service) and
Runtime and accelerator (the runtime the service names, read live). Pure: the runtime and model come in read."""

from __future__ import annotations

from typing import Any

from omenative.api import constants as c
from omenative.kubectl_ome import rollout, traffic
from omenative.obj import Obj

Rows = list[tuple[str, str]]
CLASSES = ("HPA", "KEDA", "External", "None")
MANAGERS = {"HPA": "ome", "KEDA": "ome", "External": "external", "None": "none"}
SOURCES = ("isvc", "policy", "runtime", "legacy", "default")


def rollout_section(isvc: Obj) -> Obj:
    report = rollout.status_report(isvc)
    service = report["service"]
    issues = [issue for key in ("service", *c.COMPONENTS) for issue in report["issues"].get(key) or []]
    return {"state": service["STATE"], "reported": service["REPORTED"], "evidence": service["EVIDENCE"],
            "epoch": service["EPOCH"], "coordination": service["COORDINATION"], "issues": sorted(set(issues))}


def _component_autoscaler(block: Obj) -> Obj:
    scaler = block.get("autoscaler")
    if not isinstance(scaler, dict):
        return {"state": "NotReported", "class": "Unknown", "managedBy": "Unknown", "replicas": "NotReported",
                "target": "Reported" if block.get("scaleTargetRef") else "NotReported",
                "conditions": "NotReported", "issues": ["AutoscalerNotReported"]}
    klass, manager, source = scaler.get("class"), scaler.get("managedBy"), scaler.get("specSource")
    issues = []
    if klass not in CLASSES:
        issues.append("ClassInvalid")
    if manager not in MANAGERS.values():
        issues.append("ManagedByInvalid")
    elif klass in CLASSES and MANAGERS[str(klass)] != manager:
        issues.append("OwnershipMismatch")
    if source is not None and source not in SOURCES:
        issues.append("SpecSourceInvalid")
    current, desired = scaler.get("currentReplicas"), scaler.get("desiredReplicas")
    counts = [v for v in (current, desired) if v is not None]
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in counts):
        issues.append("ReplicaEvidenceInvalid")
        replicas = "Invalid"
    elif manager != "ome":
        replicas = "Unavailable"
        if counts or scaler.get("lastScaleTime") or scaler.get("conditions"):
            issues.append("UnexpectedScalerEvidence")
    elif len(counts) < 2 or 0 in counts:
        replicas = "Ambiguous"  # the status leaves a count of 0 out: missing and zero look the same
        issues.append("ReplicaEvidenceAmbiguous")
    else:
        replicas = "Reported"
    target = "Reported" if isinstance(block.get("scaleTargetRef"), dict) and block["scaleTargetRef"].get("name") \
        else "NotReported"
    if target == "NotReported":
        issues.append("ScaleTargetNotReported")
    conditions = scaler.get("conditions")
    condition_state = "Unavailable" if manager != "ome" and not conditions else \
        "Reported" if isinstance(conditions, list) and conditions else "NotReported"
    invalid = {"ClassInvalid", "ManagedByInvalid", "OwnershipMismatch", "SpecSourceInvalid", "ReplicaEvidenceInvalid",
               "UnexpectedScalerEvidence"}
    state = "Invalid" if invalid & set(issues) else "Partial" if issues else "Reported"
    return {"state": state, "class": klass if klass in CLASSES else "Unknown",
            "managedBy": manager if manager in MANAGERS.values() else "Unknown", "current": current,
            "desired": desired, "replicas": replicas, "target": target, "conditions": condition_state,
            "issues": issues}


def autoscaling_section(isvc: Obj) -> Obj:
    components = (isvc.get("status") or {}).get("components")
    if not isinstance(components, dict) or not any(k in c.COMPONENTS for k in components):
        return {"state": "Unavailable", "evidence": "Unavailable", "components": {}, "issues": []}
    per = {k: _component_autoscaler(v if isinstance(v, dict) else {}) for k, v in components.items()
           if k in c.COMPONENTS}
    issues = [f"{k} / {issue}" for k, v in per.items() for issue in v["issues"]]
    if any(k not in c.COMPONENTS for k in components):
        issues.insert(0, " / UnknownComponentStatus")
    states = [v["state"] for v in per.values()]
    if all(s == "NotReported" for s in states):
        return {"state": "Unavailable", "evidence": "NoUsableScaler", "components": per, "issues": issues}
    state = "Invalid" if "Invalid" in states or any("UnknownComponentStatus" in i for i in issues) else \
        "Partial" if any(s != "Reported" for s in states) else "Reported"
    return {"state": state, "evidence": "Reported", "components": per, "issues": issues}


def runtime_section(isvc: Obj, runtime: Obj | None, runtime_kind: str, model_found: bool | None,
                    runtime_error: str = "") -> Obj:
    """`runtime`: the live runtime the service names (None when it is missing or the read failed, with
    `runtime_error`); `model_found`: None when the service names no model."""
    spec = isvc.get("spec") or {}
    named = (spec.get("runtime") or {}).get("name")
    model = (spec.get("model") or {}).get("name")
    requested = {comp: (spec.get(comp) or {}).get("acceleratorOverride") for comp in (c.ENGINE, c.DECODER)
                 if isinstance(spec.get(comp), dict)}
    asks = {comp: v for comp, v in requested.items() if v}
    if not named and not model:
        active: Obj = {"state": "NotConfigured", "active": "Unavailable", "reason": ""}
    elif not named:
        active = {"state": "Unavailable", "active": "Unavailable", "reason": "AutoSelectionNotProbed"}
    elif runtime_error:
        active = {"state": "Unavailable", "active": "Unavailable", "reason": runtime_error}
    elif runtime is None:
        active = {"state": "Partial", "active": "Unavailable", "reason": "RuntimeNotFound"}
    else:
        active = {"state": "Reported" if model_found is not False else "Partial", "active": "Available",
                  "reason": "" if model_found is not False else "ModelNotFound", "name": named, "kind": runtime_kind,
                  "origin": "LiveRuntime"}
    if not asks:
        accelerator: Obj = {"state": "NotConfigured", "evidence": "Unavailable", "reason": "", "components": {}}
    elif not named:
        accelerator = {"state": "Unavailable", "evidence": "Unavailable", "reason": "AutoSelectionNotProbed",
                       "components": {}}
    else:
        # Accelerator classes are not implemented (admission warns about acceleratorOverride): nothing selected.
        accelerator = {"state": "Partial", "evidence": "Computed", "reason": "",
                       "components": {comp: {"selection": "NotReported", "class": "NotRequested",
                                             "intent": "Class" if isinstance(v, dict) and v.get("acceleratorClass")
                                             else "Policy"} for comp, v in asks.items()}}
    return {"active": active, "accelerator": accelerator}


def sections(isvc: Obj, runtime: Obj | None = None, runtime_kind: str = "", model_found: bool | None = None,
             runtime_error: str = "") -> Obj:
    return {"rollout": rollout_section(isvc), "autoscaling": autoscaling_section(isvc),
            "placement": {"state": "NotConfigured", "mode": "NotApplicable", "phase": "NotRecorded"},
            "traffic": traffic.traffic_report(isvc),
            "runtime": runtime_section(isvc, runtime, runtime_kind, model_found, runtime_error)}


def _count(value: Any, replicas: str) -> str:
    return str(value) if replicas in ("Reported", "Ambiguous") and value is not None else "-"


def section_rows(content: Obj, wide: bool) -> Rows:
    rows: Rows = []
    r = content["rollout"]
    rows += [("Rollout", f"{r['state']} reported={r['reported']}"), ("Rollout evidence", f"{r['evidence']} / "
                                                                                         f"{r['epoch']}")]
    if wide:
        rows.append(("Coordination Ready", r["coordination"]))
        rows += [("Rollout issue", issue) for issue in r["issues"]]
        if r["issues"]:
            rows.append(("Rollout warning", "PartialData"))
    a = content["autoscaling"]
    if a["evidence"] == "NoUsableScaler":
        rows.append(("Autoscaling", "Unavailable; parent read, no usable scaler status"))
    else:
        rows.append(("Autoscaling", f"{a['state']} / {a['evidence']} parent status"))
    for comp, scale in a["components"].items():
        rows.append((f"Scale {comp}", f"{scale['state']} {scale['class']}/{scale['managedBy']} "
                                      f"{_count(scale.get('current'), scale['replicas'])}->"
                                      f"{_count(scale.get('desired'), scale['replicas'])} ({scale['replicas']})"))
        if wide:
            rows += [("Scale target", f"{comp} / {scale['target']}"),
                     ("Scale conditions", f"{comp} / {scale['conditions']}")]
    if wide:
        rows += [("Autoscale issue", issue) for issue in a["issues"]]
    p = content["placement"]
    rows.append(("Placement", f"{p['state']} / {p['mode']} / {p['phase']}"))
    if wide:
        rows += [("Placement evidence", "Unavailable / NotApplicable"), ("Placement mode", "NotApplicable")]
    t = content["traffic"]
    rows.append(("Traffic", f"{t['state']} / {'Unavailable' if t['state'] == 'Unavailable' else 'Reported'} "
                            "parent status"))
    # Beyond the reference's row: the weights by revision Service, as `kubectl ome traffic status` shows them.
    by_component: dict[str, list[str]] = {}
    for weight in t["weights"]:
        by_component.setdefault(weight["component"], []).append(traffic.weight_cell(weight, wide))
    rows += [(f"Traffic {comp}", " ".join(cells)) for comp, cells in by_component.items()]
    rows += [(f"Canary {canary['component']}", f"{canary['step']}/{canary['steps']} @ {canary['weight']}%")
             for canary in t["canaries"]]
    rt = content["runtime"]
    active = rt["active"]
    rows.append(("Runtime active", f"{active['state']} / {active['active']} {active['reason']}".rstrip()))
    if wide and active["active"] == "Available":
        rows += [("Active runtime name", active["name"]), ("Active runtime kind", active["kind"]),
                 ("Active origin", active["origin"])]
    acc = rt["accelerator"]
    rows.append(("Accelerator", f"{acc['state']} / {acc['evidence']} {acc['reason']}".rstrip()))
    for comp, figures in acc["components"].items():
        rows.append((f"Accelerator {comp}", f"{figures['selection']} ({figures['class']})"))
        if wide:
            rows.append(("Declared class", f"{comp} / ({figures['intent']})"))
    return rows


DETAIL_ROWS: Rows = [("Rollout detail", "kubectl ome rollout status NAME"),
                     ("Autoscale detail", "kubectl ome autoscale status NAME"),
                     ("Traffic detail", "kubectl ome traffic status NAME")]
