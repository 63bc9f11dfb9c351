"""`kubectl ome instance retry-blocks` and the alpha `release-held`, as OME's reference/kubectl-ome/instance.md
describes them.

`retry-blocks` reads one component's `status.retryBlocks`; `release-held` checks that the block it names is Held on
current status, previews the request, asks for confirmation, reads everything again and sets the
`ome.io/release-held-revision` annotation with a JSON patch guarded by the resourceVersion it checked, so nothing is
sent when anything changed meanwhile.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import sys
import time
from typing import Any

from omenative.api import constants as c
from omenative.kubectl_ome.output import REPORT_VERSION, emit, print_table
from omenative.obj import Obj

RELEASE_ANNOTATION = c.ANN_RELEASE_HELD_REVISION
STATES = {"Backoff": "BACKOFF", "RetryInProgress": "RUNNING", "Held": "HELD"}
ACTION_SECONDS = 45.0
HASH = re.compile(r"^[0-9a-f]{8}$")


class Refused(Exception):
    """The action refuses; nothing was sent."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def target_alias(name: str) -> str:
    """A name over 14 characters as its first 5, `#` and a digest (not the revision's hash)."""
    if len(name) <= 14:
        return name
    return f"{name[:5]}#{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def short_time(text: str | None) -> str:
    if not text:
        return "-"
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC)
    return when.strftime("%y-%m-%dT%H:%MZ")


def replica_for(cluster: Any, namespace: str, isvc: str, component: str) -> tuple[Obj | None, list[str]]:
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


def retry_blocks(cluster: Any, namespace: str, isvc: str, component: str, output: str) -> int:
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


def _check(cluster: Any, namespace: str, isvc: str, component: str, revision: str) -> tuple[Obj, Obj]:
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


def _confirm(deadline: float) -> None:
    if not sys.stdin.isatty():
        raise Refused("action not confirmed; noninteractive input requires --yes")
    print("Confirm this exact action? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    if time.monotonic() > deadline:
        raise Refused("action timed out before it was confirmed")
    if answer not in ("y", "yes"):
        raise Refused("action not confirmed")


def release_held(cluster: Any, namespace: str, isvc: str, component: str, revision: str, *, dry_run: str, yes: bool,
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
            _confirm(deadline)
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


def print_table_err(rows: list[list[str]]) -> None:
    width = max(len(r[0]) for r in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}   {value}".rstrip(), file=sys.stderr)
