"""`kubectl ome`: read the Instances of an InferenceService's OMENative components.

    kubectl ome instance list INFERENCESERVICE [-n NS] [-o table|json|yaml]
    kubectl ome instance status INFERENCESERVICE INDEX --component COMPONENT [-n NS] [-o table|wide|json|yaml]
    kubectl ome instance retry-blocks INFERENCESERVICE --component COMPONENT [-n NS] [-o table|json|yaml]
    kubectl ome instance release-held INFERENCESERVICE --component COMPONENT --revision REV [--dry-run none|client|
        server] [--yes] [-n NS] [-o table|wide|json|yaml]
    kubectl ome version

The rows come from each component's InferenceReplica status (either encoding); `status` adds the live pods and their
Warning events. Exit codes: 0 ok, 1 error, 3 a release whose target changed after its preview. A synchronous client
fits a command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, cast

from omenative import __version__
from omenative.api import constants as c
from omenative.api.instance_status import decode_rows
from omenative.api.types import InstanceStatus
from omenative.kubectl_ome import held
from omenative.kubectl_ome.output import REPORT_VERSION, emit, print_table

Obj = dict[str, Any]


def shorten(value: str, width: int = 11) -> str:
    return value if len(value) <= width else f"{value[:4]}...{value[-4:]}"


def revisions(row: InstanceStatus) -> str:
    running, target = row.running_revision or "", row.target_revision or ""
    if running and target and running != target:
        return f"{shorten(running, 5)}>{shorten(target, 5)}"
    if not running and target:
        return ">" + shorten(target, 10)
    return shorten(running or target or "-")


def flags(row: InstanceStatus) -> str:
    admitted = (row.pod_count or 0) > 0
    return ("A" if admitted else "-") + ("O" if row.operation else "-") + ("F" if row.last_failure else "-")


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


def component_order(replica: Obj) -> int:
    component = (replica.get("spec") or {}).get("component") or ""
    return c.COMPONENTS.index(component) if component in c.COMPONENTS else len(c.COMPONENTS)


class Cluster:
    """The few reads the plugin makes, through the synchronous Kubernetes client."""

    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        from kubernetes import client
        from kubernetes import config as kube_config

        config: Any = kube_config  # partly annotated upstream; used through Any
        self.namespace = "default"
        try:
            config.load_kube_config(config_file=kubeconfig, context=context)
            _, active = config.list_kube_config_contexts(config_file=kubeconfig)
            chosen = next((x for x in config.list_kube_config_contexts(config_file=kubeconfig)[0]
                           if x["name"] == context), active) if context else active
            self.namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
        except config.ConfigException:
            config.load_incluster_config()
        self.custom = client.CustomObjectsApi()
        self.core = client.CoreV1Api()

    def inference_service(self, namespace: str, name: str) -> Obj | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return cast(Obj, self.custom.get_namespaced_custom_object(
                c.GROUP, c.VERSION, namespace, "inferenceservices", name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def patch_replica(self, namespace: str, name: str, patch: list[Obj], dry_run: bool) -> Obj:
        """A JSON patch of an InferenceReplica (the kubernetes client sends a list body as a JSON patch)."""
        kwargs: dict[str, Any] = {"_content_type": "application/json-patch+json"}
        if dry_run:
            kwargs["dry_run"] = "All"
        api: Any = self.custom
        return cast(Obj, api.patch_namespaced_custom_object(
            c.GROUP, c.VERSION, namespace, "inferencereplicas", name, patch, **kwargs))

    def replicas(self, namespace: str, isvc: str) -> list[Obj]:
        found = cast(Obj, self.custom.list_namespaced_custom_object(
            c.GROUP, c.VERSION, namespace, "inferencereplicas", label_selector=f"{c.LABEL_ISVC}={isvc}"))
        return sorted(found.get("items") or [], key=component_order)

    def pods(self, namespace: str, isvc: str, component: str, index: int) -> list[Obj]:
        selector = f"{c.LABEL_ISVC}={isvc},{c.LABEL_COMPONENT}={component},{c.LABEL_INSTANCE_INDEX}={index}"
        pods = self.core.list_namespaced_pod(namespace, label_selector=selector)
        return [self.core.api_client.sanitize_for_serialization(p) for p in pods.items]

    def warnings(self, namespace: str, pod: str) -> list[Obj]:
        events = self.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={pod},type=Warning")
        return [self.core.api_client.sanitize_for_serialization(e) for e in events.items]


def instance_list(cluster: Cluster, namespace: str, isvc: str, output: str) -> int:
    table = [["COMP", "IDX/INC", "PHASE", "PODS", "REVS", "AOF", "EVIDENCE"]]
    components = []
    parent = cluster.inference_service(namespace, isvc)
    for replica in cluster.replicas(namespace, isvc):
        component = (replica.get("spec") or {}).get("component") or "?"
        rows = decode_rows(replica.get("status"))
        level = evidence(replica, rows, parent)
        components.append({"component": component, "replica": replica["metadata"]["name"], "evidence": level,
                           "instances": [r.to_dict() for r in rows]})
        if not rows:
            table.append([component, "-", "-", "-", "-", "-", level])
        for row in rows:
            pods = f"{row.serving_pod_count or 0}/{row.available_pod_count or 0}/{row.pod_count or 0}"
            table.append([component, f"{row.index}/{row.incarnation or 1}", row.phase or "-", pods, revisions(row),
                          flags(row), level])
    if output == "table":
        if len(table) == 1:
            table.append(["-", "-", "-", "-", "-", "-", "UNAVAILABLE"])
        print_table(table)
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
        fields.append(("deployment", f"mode=OMENative replica={replica['metadata']['name']}"))
        fields.append(("encoding", f"name={encoding}"))
        if row is not None:
            report["instance"] = row.to_dict()
            fields.append(("instance", f"{replica['metadata']['name']} inc={row.incarnation} phase={row.phase} "
                                       f"admitted={'true' if (row.pod_count or 0) > 0 else 'false'}"))
            fields.append(("revisions", f"running={row.running_revision or '-'} target={row.target_revision or '-'}"))
            fields.append(("persisted", f"pods={row.pod_count or 0} serving={row.serving_pod_count or 0} "
                                        f"available={row.available_pod_count or 0}"))
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
                    fields.append(("op hold", f"waiting={op.waiting}"))
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
        width = None if output == "wide" else 64
        print_table([["FIELD", "VALUE"]] + [[k, v if width is None or len(v) <= width else v[: width - 3] + "..."]
                                           for k, v in fields])
    else:
        emit(report, output)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubectl ome", description="Inspect OMENative InferenceServices.")
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--context", default=None)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the plugin version")
    instance = sub.add_parser("instance", help="Instances of an InferenceService's OMENative components")
    actions = instance.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="one row per Instance")
    listing.add_argument("inferenceservice")
    listing.add_argument("-n", "--namespace", default=None)
    listing.add_argument("-o", "--output", default="table", choices=["table", "json", "yaml"])
    status = actions.add_parser("status", help="one Instance, with its pods and Warning events")
    status.add_argument("inferenceservice")
    status.add_argument("index", type=int)
    status.add_argument("--component", required=True, choices=list(c.COMPONENTS))
    status.add_argument("--ome-namespace", default="ome")
    status.add_argument("-n", "--namespace", default=None)
    status.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
    blocks = actions.add_parser("retry-blocks", help="the revisions a component retries or holds")
    blocks.add_argument("inferenceservice")
    blocks.add_argument("--component", required=True, choices=list(c.COMPONENTS))
    blocks.add_argument("-n", "--namespace", default=None)
    blocks.add_argument("-o", "--output", default="table", choices=["table", "json", "yaml"])
    release = actions.add_parser("release-held", help="(alpha) ask omenative to release one held revision")
    release.add_argument("inferenceservice")
    release.add_argument("--component", required=True, choices=list(c.COMPONENTS))
    release.add_argument("--revision", required=True,
                         help="exact full target revision or eight-lowercase-hex hash")
    release.add_argument("--dry-run", default="none", choices=["none", "client", "server"])
    release.add_argument("--yes", action="store_true", help="confirm the exact preview without a prompt")
    release.add_argument("--ome-namespace", default="ome")
    release.add_argument("-n", "--namespace", default=None)
    release.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "version":
        print(f"kubectl-ome {__version__}")
        return 0
    try:
        cluster = Cluster(args.kubeconfig, args.context)
        namespace = args.namespace or cluster.namespace
        if args.action == "list":
            return instance_list(cluster, namespace, args.inferenceservice, args.output)
        if args.action == "retry-blocks":
            return held.retry_blocks(cluster, namespace, args.inferenceservice, args.component, args.output)
        if args.action == "release-held":
            return held.release_held(cluster, namespace, args.inferenceservice, args.component, args.revision,
                                     dry_run=args.dry_run, yes=args.yes, output=args.output,
                                     context=args.context)
        return instance_status(cluster, namespace, args.inferenceservice, args.index, args.component, args.output)
    except Exception as exc:  # a command line reports, it does not dump a trace
        print(f"error: {describe_error(exc)}", file=sys.stderr)
        return 1


def describe_error(exc: Exception) -> str:
    """One line for a refused request (the client's own text is its HTTP headers and body)."""
    status, reason, body = getattr(exc, "status", None), getattr(exc, "reason", None), getattr(exc, "body", None)
    if not isinstance(status, int) or reason is None:
        return str(exc)
    try:
        message = str(json.loads(body).get("message", "")) if body else ""
    except (ValueError, AttributeError):
        message = str(body or "").strip()
    if status == 404 and (not message or "page not found" in message):
        return (f"the {c.GROUP}/{c.VERSION} API is not served by this cluster: are omenative's CRDs installed? "
                "(kubectl get crd inferenceservices.ome.io)")
    return f"{status} {reason}" + (f": {message}" if message else "")


if __name__ == "__main__":
    sys.exit(main())
