"""`kubectl ome wait`: block until an InferenceService reaches a state (reference/kubectl-ome/wait.md): a condition, a
rollout outcome, a component's replica counts or a migration's end; exit 2 when the wait ends without it."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Iterable

import attrs

from omenative.api import constants as c
from omenative.api import migration_request
from omenative.api.units import InvalidValue, parse_duration
from omenative.kubectl_ome import migration
from omenative.kubectl_ome.cluster import Cluster
from omenative.kubectl_ome.common import CommandError, emit, now, print_rows
from omenative.kubectl_ome.status import COMPONENT_CONDITIONS, Rows, inspect_condition
from omenative.obj import Obj

# -- wait -------------------------------------------------------------------------------------------------------------

@attrs.frozen
class Predicate:
    kind: str  # "condition", "replicas-ready", "replicas-current", "rollout"
    status: str = "True"  # for condition=Ready; for rollout: the REPORTED state waited for
    component: str = ""
    replicas: int = 0
    request_id: str = ""
    revision: str = ""  # held-revision: the full ControllerRevision name
    ir_name: str = ""  # held-revision: the InferenceReplica it is bound to, by name and UID
    ir_uid: str = ""

    @property
    def spelling(self) -> str:
        if self.kind == "migration":
            return "Migration=Terminal"
        if self.kind == "condition":
            return f"Ready={self.status}"
        if self.kind == "rollout":
            return f"Rollout={ROLLOUT_SPELLING[self.status]}"
        if self.kind == "held-revision":
            return "HeldRevision=Unheld"
        return f"{'ReadyReplicas' if self.kind == 'replicas-ready' else 'CurrentReplicas'}={self.replicas}"


PREDICATE_HELP = ("InvalidWaitPredicate: require condition=Ready[=True|False|Unknown], rollout=stable|failed|"
                  "rolled-back, migration=terminal, replicas=ready|current, runtime-sync=acknowledged, or "
                  "held-revision=unheld")
NOT_SERVED = ("runtime-sync=acknowledged",)
HELD_FLAGS = ("InvalidHeldRevisionFlags: require --component=engine|decoder|router, --revision=ISVC-COMPONENT-HASH, "
              "--ir-name and --ir-uid with held-revision=unheld")
ROLLOUT_STATES = {"rollout=stable": "Succeeded", "rollout=failed": "Failed", "rollout=rolled-back": "RolledBack"}
ROLLOUT_SPELLING = {"Succeeded": "Stable", "Failed": "Failed", "RolledBack": "RolledBack"}


class InvalidWait(ValueError):
    """A wait the CLI refuses before it reads anything (exit 1)."""


def parse_predicate(text: str | None, component: str | None, replicas: int | None,
                    request_id: str | None = None, revision: str | None = None, ir_name: str | None = None,
                    ir_uid: str | None = None) -> Predicate:
    if text == "held-revision=unheld":
        if component not in COMPONENT_CONDITIONS or not revision or not ir_name or not ir_uid or \
                replicas is not None or request_id is not None:
            raise InvalidWait(HELD_FLAGS)
        return Predicate("held-revision", component=component, revision=revision, ir_name=ir_name, ir_uid=ir_uid)
    if revision is not None:
        raise InvalidWait("InvalidWaitFlags")
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


def check_held(predicate: Predicate, replica: Obj | None, isvc: Obj) -> Check:
    """The revision's retry block on the bound InferenceReplica, and the release request's annotation: matched once
    the revision is not Held and no release of it is pending (OME's reference, `held-revision=unheld`)."""
    observed: Obj = {"component": predicate.component, "revision": predicate.revision, "name": "",
                     "targetState": "Unknown", "mailbox": "Unknown", "validity": "Unavailable"}
    if replica is None:
        return Check(False, "ReplicaMissing", "Unavailable", observed)
    meta, status = replica.get("metadata") or {}, replica.get("status") or {}
    if meta.get("uid") != predicate.ir_uid:
        return Check(False, "ReplicaReplaced", "Unavailable", observed)
    observed["name"] = meta.get("name", "")
    if meta.get("deletionTimestamp"):
        return Check(False, "Deleting", "Unavailable", observed)
    owners = meta.get("ownerReferences") or []
    if (replica.get("spec") or {}).get("component") != predicate.component or \
            (owners and not any(o.get("uid") == isvc["metadata"].get("uid") for o in owners)):
        observed["validity"] = "Invalid"
        return Check(False, "SourceInvalid", "Unavailable", observed)
    if status.get("observedGeneration") != meta.get("generation"):
        return Check(False, "SourceStale", "Unavailable", observed)
    blocks = status.get("retryBlocks") or []
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        observed["validity"] = "Invalid"
        return Check(False, "InvalidRetryBlocks", "Unavailable", observed)
    block = next((b for b in blocks if b.get("targetRevision") == predicate.revision), None)
    observed["targetState"] = str(block.get("state") or "Unknown") if block else "Absent"
    mailbox = (meta.get("annotations") or {}).get(c.ANN_RELEASE_HELD_REVISION)
    observed["mailbox"] = "Absent" if mailbox is None else "Pending" if mailbox == predicate.revision else \
        "Superseded"
    observed["validity"] = "Valid"
    if observed["targetState"] == "Held":
        return Check(False, "Held", "Reported", observed)
    if observed["mailbox"] != "Absent":
        return Check(False, "MailboxPending" if observed["mailbox"] == "Pending" else "MailboxSuperseded",
                     "Reported", observed)
    return Check(True, "Unheld", "Reported", observed)


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
    elif predicate.kind == "held-revision":
        content["heldRevision"] = {"component": predicate.component, "revision": predicate.revision,
                                   **(check.observed if check else {})}
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
    elif "heldRevision" in content:
        part = content["heldRevision"]
        valid = part.get("validity") == "Valid"
        rows += [("Component", part["component"]), ("Revision", part["revision"]),
                 ("InferenceReplica", part.get("name", "")), ("Target state", part.get("targetState", "Unknown")),
                 ("Mailbox", part.get("mailbox", "Unknown")), ("Validity", part.get("validity", "Unavailable")),
                 ("Interpretation", _interpretation(content["outcome"], valid, "No verified current unheld state",
                                                    "Exact revision no longer Held on original IR"))]
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




def wait(cluster: Cluster, namespace: str, name: str, args: argparse.Namespace) -> int:
    """Checks at once, then every POLL seconds, until the predicate holds (0) or the wait ends without it (2)."""
    try:
        predicate = parse_predicate(args.predicate, args.component, args.replicas, args.request_id,
                                    args.revision, args.ir_name, args.ir_uid)
    except InvalidWait as exc:
        raise CommandError(str(exc)) from None
    try:
        timeout = parse_duration(args.timeout)
    except InvalidValue:
        raise CommandError("InvalidWaitFlags") from None
    if not 0 < timeout <= 24 * 3600:
        raise CommandError("InvalidWaitTimeout: require positive duration no greater than 24h")
    poll = 2.0 if predicate.kind in ("condition", "rollout", "migration") else 5.0
    started = time.monotonic()
    reads = polls = 0
    uid = None
    check: Check | None = None
    outcome = "TimedOut"
    while True:
        reads += 1
        polls += 1 if reads > 1 else 0
        isvc = cluster.inference_service(namespace, name)
        if isvc is None or isvc["metadata"].get("deletionTimestamp"):
            outcome = "NotFound" if uid is None and isvc is None else "Deleted"
            break
        if uid is not None and isvc["metadata"].get("uid") != uid:
            outcome = "Replaced"
            break
        uid = isvc["metadata"].get("uid")
        if predicate.kind == "condition":
            check = check_condition(predicate, isvc, now())
        elif predicate.kind == "rollout":
            check = check_rollout(predicate, isvc)
        elif predicate.kind == "migration":
            reads += 1
            record, validity = migration.find_record(cluster, namespace, name, predicate.request_id)
            check = check_migration(record, validity)
        elif predicate.kind == "held-revision":
            reads += 1
            check = check_held(predicate, cluster.get_ome("inferencereplicas", namespace, predicate.ir_name), isvc)
        else:
            reads += 1
            replica = component_replica(cluster.replicas(namespace, name), isvc, predicate.component)
            check = check_replicas(predicate, replica)
        if check.matched:
            outcome = "Matched"
            break
        left = timeout - (time.monotonic() - started)
        if left <= 0:
            break
        time.sleep(min(poll, left))
    report = wait_report(namespace, name, predicate, outcome, check,
                                 elapsed_ms=int((time.monotonic() - started) * 1000), reads=reads, polls=polls,
                                 source="InitialGET" if reads <= 2 and polls == 0 else "Poll")
    if args.output in ("table", "wide"):
        print_rows(wait_rows(report), args.output == "wide")
    else:
        emit(report, args.output)
    if outcome != "Matched":
        sys.stdout.flush()
        print("error: RequestedConditionUnmet", file=sys.stderr)
        return 2
    return 0
