"""`kubectl ome traffic status`: what the InferenceService's status says about how it receives traffic, as
reference/kubectl-ome/traffic.md describes it, for what omenative writes: the endpoints, each canary's step and
recorded weight, and every component's weights by revision Service. omenative writes no traffic policy
(`status.traffic`), so the policy rows say Unavailable and ISSUE lists TrafficStatusMissing, as the reference says
for a service that declares no traffic behavior. It reads the InferenceService once and nothing else. The builder
is pure; `traffic_status` reads and prints."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from omenative.api import constants as c
from omenative.api.rollout import CANARY_OPEN, IN_FLIGHT, primary_of
from omenative.kubectl_ome import rollout
from omenative.kubectl_ome.cluster import Cluster
from omenative.kubectl_ome.common import REPORT_VERSION, CommandError, emit, print_table
from omenative.obj import Obj

MAX_ENDPOINTS = 16
MAX_WEIGHTS = 8
UNVERIFIABLE = "Reported/Unverifiable"
ROLE_ORDER = ("stable", "canary", "other")


def canary_primaries(isvc: Obj) -> dict[str, int]:
    """Each canary group's primary component (the one whose status carries the canary), with its number of steps."""
    declared = rollout.declared(isvc)
    out = {}
    for group in rollout.groups_of(isvc):
        canary = group.get("canary")
        if not isinstance(canary, dict):
            continue
        names = [n for n in group.get("components") or [] if n in declared]
        if names:
            out[primary_of(names)] = len(canary.get("steps") or [])
    return out


def _endpoints(status: Obj) -> tuple[list[str], list[str]]:
    """The URLs the status lists, and the issues they raise (EndpointInvalid for one the CLI drops)."""
    urls: list[Any] = [a.get("url") for a in status.get("addresses") or [] if isinstance(a, dict)]
    if not urls:
        urls = [status.get("url"), (status.get("address") or {}).get("url")]
    kept: list[str] = []
    issues: list[str] = []
    for url in urls:
        if not url:
            continue
        parts = urlsplit(str(url))
        if parts.scheme not in ("http", "https") or parts.username or parts.query or parts.fragment:
            issues.append("EndpointInvalid")
        elif url not in kept:
            kept.append(str(url))
    return sorted(kept), issues


def weights(isvc: Obj) -> tuple[list[tuple[str, str, str, int]], list[tuple[str, str]]]:
    """(component, role, revision Service, percent) for each revision weight in status.components.<c>.traffic, and
    the (component, issue) pairs they raise. The role follows the reference: in a canary's primary, canary or stable
    (the new revision becomes stable once the canary has passed its last step); elsewhere stable for the revision
    that rolled out (or the only latest one), else other."""
    meta, status = isvc.get("metadata") or {}, isvc.get("status") or {}
    name = meta.get("name", "")
    components: Obj = status.get("components") or {}
    primaries = canary_primaries(isvc)
    out: list[tuple[str, str, str, int]] = []
    issues: list[tuple[str, str]] = []
    for component in c.COMPONENTS:
        block = components.get(component)
        if not isinstance(block, dict) or not isinstance(block.get("traffic"), list):
            continue
        entries = [t for t in block["traffic"] if isinstance(t, dict)]
        prefix = f"{name}-{component}-rev-"
        seen: set[str] = set()
        total = 0
        open_canary = component in primaries and block.get("rolloutPhase") in CANARY_OPEN
        rows = []
        for entry in entries:
            revision, percent = str(entry.get("revisionName") or ""), entry.get("percent")
            if not revision.startswith(prefix) or not isinstance(percent, int) or not 0 <= percent <= 100:
                issues.append((component, "AllocationInvalid"))
                continue
            if revision in seen:
                issues.append((component, "AllocationConflict"))
                continue
            seen.add(revision)
            total += percent
            if component in primaries:
                role = "canary" if open_canary and entry.get("latestRevision") else "stable"
            elif revision == block.get("latestRolledoutRevision") or (
                    len(entries) == 1 and entry.get("latestRevision")):
                role = "stable"
            else:
                role = "other"
            rows.append((component, role, revision, percent))
        if rows and total != 100:
            issues.append((component, "AllocationInvalid"))
        if len(rows) > MAX_WEIGHTS:
            issues.append((component, "AllocationsTruncated"))
        kept = sorted(rows, key=lambda r: r[2])[:MAX_WEIGHTS]  # the first 8 in alphabetical order
        out += sorted(kept, key=lambda r: (ROLE_ORDER.index(r[1]), r[2]))
    return out, issues


def traffic_report(isvc: Obj) -> Obj:
    """The TrafficStatusReport's content."""
    status = isvc.get("status") or {}
    components: Obj = status.get("components") or {}
    issues: list[tuple[str, str]] = []
    policy = status.get("traffic")
    if not isinstance(policy, dict):
        issues.append(("-", "TrafficStatusMissing"))
    unknown = [k for k in components if k not in c.COMPONENTS]
    if unknown:
        issues.append(("-", "UnknownComponentStatus"))
    endpoints, endpoint_issues = _endpoints(status)
    issues += [("-", issue) for issue in endpoint_issues]
    if len(endpoints) > MAX_ENDPOINTS:
        issues.append(("-", "EndpointsTruncated"))
    canaries = []
    primaries = canary_primaries(isvc)
    if status.get("canary") and not primaries:
        issues.append(("-", "CanaryInvalid"))
    for component, steps in primaries.items():
        block = components.get(component) or {}
        canary = block.get("canary")
        if not isinstance(canary, dict):
            if block.get("rolloutPhase") in IN_FLIGHT:
                issues.append((component, "CanaryInvalid"))
            continue
        step = canary.get("currentStep")
        weight = canary.get("observedTrafficWeight")
        if not isinstance(step, int) or not isinstance(weight, int):
            issues.append((component, "CanaryInvalid"))
            continue
        canaries.append({"component": component, "step": min(step + 1, steps), "steps": steps, "weight": weight})
    revision_weights, weight_issues = weights(isvc)
    issues += weight_issues
    invalid = {"AlgorithmInvalid", "PolicyReferenceInvalid", "PolicyKindUnsupported", "ConditionInvalid",
               "ConditionConflict", "RouteInvalid", "EndpointInvalid", "CanaryInvalid", "AllocationInvalid",
               "AllocationConflict", "UnknownComponentStatus", "StatusCombinationInvalid"}
    state = "Invalid" if any(issue in invalid for _, issue in issues) else "Unavailable"
    return {
        "state": state, "translator": "Unavailable", "algorithm": "Unknown", "policyReady": "Unknown/NotReported",
        "unsupported": "Unknown", "routes": [], "endpoints": endpoints[:MAX_ENDPOINTS], "canaries": canaries,
        "weights": [{"component": comp, "role": role, "revisionName": rev, "percent": pct}
                    for comp, role, rev, pct in revision_weights],
        "issues": [{"component": comp, "code": code} for comp, code in issues],
    }


def weight_cell(weight: Obj, full: bool) -> str:
    """`role:hash=weight%`, or with the revision's whole Service name."""
    revision = weight["revisionName"] if full else weight["revisionName"].rsplit("-rev-", 1)[-1]
    return f"{weight['role']}:{revision}={weight['percent']}%"


def traffic_rows(content: Obj, wide: bool) -> list[list[str]]:
    rows = [["FIELD", "COMP", "VALUE", "SOURCE"],
            ["STATE", "-", content["state"], "Computed/Unverifiable"],
            ["TRANSLATOR", "-", content["translator"], "Unavailable/Unavailable"],
            ["ALGORITHM", "-", content["algorithm"], "Unavailable/Unavailable"],
            ["POLICY-READY", "-", content["policyReady"], "Unavailable/Unavailable"],
            ["UNSUPPORTED", "-", content["unsupported"], "Unavailable/Unavailable"]]
    if wide:
        rows += [["ENDPOINT", "-", url, UNVERIFIABLE] for url in content["endpoints"]]
    else:
        rows += [["ROUTES", "-", str(len(content["routes"])), "Unavailable/Unavailable"],
                 ["ENDPOINTS", "-", str(len(content["endpoints"])), UNVERIFIABLE]]
    rows += [["CANARY", canary["component"], f"{canary['step']}/{canary['steps']} @ {canary['weight']}%",
              UNVERIFIABLE] for canary in content["canaries"]]
    rows += [["TARGET" if wide else "WEIGHT", weight["component"], weight_cell(weight, wide), UNVERIFIABLE]
             for weight in content["weights"]]
    rows += [["ISSUE", issue["component"], issue["code"], "Computed/Unverifiable"] for issue in content["issues"]]
    return rows


def traffic_status(cluster: Cluster, namespace: str, name: str, output: str) -> int:
    isvc = cluster.inference_service(namespace, name)
    if isvc is None:
        raise CommandError(f'get InferenceService "{namespace}/{name}": not found')
    content = traffic_report(isvc)
    if output in ("json", "yaml"):
        meta = isvc.get("metadata") or {}
        invalid = content["state"] == "Invalid"
        emit({"apiVersion": REPORT_VERSION, "kind": "TrafficStatusReport",
              "sources": [{"kind": "InferenceService", "name": name, "namespace": namespace, "uid": meta.get("uid"),
                           "generation": meta.get("generation"), "evidence": "Observed"}],
              "content": content, "warnings": ["PartialData"] if invalid else []}, output)
        return 0
    print_table(traffic_rows(content, output == "wide"))
    return 0
