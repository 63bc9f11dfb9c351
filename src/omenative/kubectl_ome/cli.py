"""`kubectl ome`: why an InferenceService is or isn't ready, waits with exit codes, and its Instances.

    kubectl ome status INFERENCESERVICE [-n NS] [-o table|wide|json|yaml]
    kubectl ome wait INFERENCESERVICE --for=PREDICATE [--component C --replicas N] [--timeout 1m0s] [-n NS] [-o ...]
    kubectl ome get RESOURCE [NAME] [-n NS | -A] [-l SELECTOR] [-o table|wide|json|yaml]
    kubectl ome logs INFERENCESERVICE [-c COMPONENT] [--instance I] [--revision R] [-f] [--tail N] [--since D]
    kubectl ome version [--ome-namespace omenative-system]
    kubectl ome instance list INFERENCESERVICE [-n NS] [-o table|json|yaml]
    kubectl ome instance status INFERENCESERVICE INDEX --component COMPONENT [-n NS] [-o table|wide|json|yaml]
    kubectl ome instance retry-blocks INFERENCESERVICE --component COMPONENT [-n NS] [-o table|json|yaml]
    kubectl ome instance release-held INFERENCESERVICE --component COMPONENT --revision REV [--dry-run none|client|
        server] [--yes] [-n NS] [-o table|wide|json|yaml]

The Instance rows come from each component's InferenceReplica status (either encoding); `instance status` adds the
live pods and their Warning events. Exit codes: 0 ok, 1 error, 2 a wait that ended without a match, 3 a release whose
target changed after its preview. A synchronous client fits a command line; reports.py builds the reports.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Iterable
from typing import Any, cast

from omenative import __version__
from omenative.api import constants as c
from omenative.api.instance_status import decode_rows
from omenative.api.types import InstanceStatus
from omenative.api.units import InvalidValue, parse_duration
from omenative.kubectl_ome import held, logs, migration, reports, rollout, scale
from omenative.kubectl_ome.output import REPORT_VERSION, emit, print_table
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


def component_order(replica: Obj) -> int:
    component = (replica.get("spec") or {}).get("component") or ""
    return c.COMPONENTS.index(component) if component in c.COMPONENTS else len(c.COMPONENTS)


class Cluster:
    """The few reads the plugin makes, through the synchronous Kubernetes client."""

    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        try:
            from kubernetes import client
            from kubernetes import config as kube_config
        except ImportError as exc:
            raise SystemExit("error: kubectl-ome needs the Kubernetes client: pip install 'omenative[plugin]'") from exc

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
        return self.get_ome("inferenceservices", namespace, name)

    def patch_replica(self, namespace: str, name: str, patch: list[Obj], dry_run: bool) -> Obj:
        return self.patch_ome("inferencereplicas", namespace, name, patch, dry_run)

    def patch_ome(self, plural: str, namespace: str, name: str, patch: list[Obj], dry_run: bool) -> Obj:
        """A JSON patch of an ome.io object (the kubernetes client sends a list body as a JSON patch)."""
        kwargs: dict[str, Any] = {"_content_type": "application/json-patch+json"}
        if dry_run:
            kwargs["dry_run"] = "All"
        api: Any = self.custom
        return cast(Obj, api.patch_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, name, patch,
                                                            **kwargs))

    def patch_service(self, namespace: str, name: str, patch: list[Obj], dry_run: bool) -> Obj:
        return self.patch_ome("inferenceservices", namespace, name, patch, dry_run)

    def replicas(self, namespace: str, isvc: str) -> list[Obj]:
        return sorted(self.list_ome("inferencereplicas", namespace, f"{c.LABEL_ISVC}={isvc}"), key=component_order)

    def pods_selected(self, namespace: str, selector: str) -> list[Obj]:
        pods = self.core.list_namespaced_pod(namespace, label_selector=selector)
        return [self.core.api_client.sanitize_for_serialization(p) for p in pods.items]

    def pods(self, namespace: str, isvc: str, component: str, index: int) -> list[Obj]:
        return self.pods_selected(
            namespace, f"{c.LABEL_ISVC}={isvc},{c.LABEL_COMPONENT}={component},{c.LABEL_INSTANCE_INDEX}={index}")

    def service_pods(self, namespace: str, isvc: str) -> list[Obj]:
        return self.pods_selected(namespace, f"{c.LABEL_ISVC}={isvc}")

    def warning_events(self, namespace: str) -> list[Obj]:
        events = self.core.list_namespaced_event(namespace, field_selector="type=Warning")
        return [self.core.api_client.sanitize_for_serialization(e) for e in events.items]

    def deployment(self, namespace: str, name: str) -> Obj:
        from kubernetes import client

        found = client.AppsV1Api().read_namespaced_deployment(name, namespace)
        return cast(Obj, self.core.api_client.sanitize_for_serialization(found))

    def list_ome(self, plural: str, namespace: str | None, selector: str | None) -> list[Obj]:
        """An ome.io kind's objects (all namespaces when `namespace` is None), each with apiVersion and kind."""
        api: Any = self.custom
        kwargs = {"label_selector": selector} if selector else {}
        if plural.startswith("cluster") or namespace is None:
            found = api.list_cluster_custom_object(c.GROUP, c.VERSION, plural, **kwargs)
        else:
            found = api.list_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, **kwargs)
        return list(cast(Obj, found).get("items") or [])

    def get_ome(self, plural: str, namespace: str, name: str) -> Obj | None:
        from kubernetes.client.exceptions import ApiException

        api: Any = self.custom
        try:
            if plural.startswith("cluster"):
                return cast(Obj, api.get_cluster_custom_object(c.GROUP, c.VERSION, plural, name))
            return cast(Obj, api.get_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def config_map(self, namespace: str, name: str) -> Obj | None:
        from kubernetes.client.exceptions import ApiException

        try:
            found = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return cast(Obj, self.core.api_client.sanitize_for_serialization(found))

    def hpa(self, namespace: str, name: str) -> Obj | None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            found = client.AutoscalingV2Api().read_namespaced_horizontal_pod_autoscaler(name, namespace)
        except ApiException as exc:
            if exc.status in (403, 404):
                return None
            raise
        return cast(Obj, self.core.api_client.sanitize_for_serialization(found))

    def scale_of(self, namespace: str, name: str) -> Obj:
        api: Any = self.custom
        return cast(Obj, api.get_namespaced_custom_object_scale(c.GROUP, c.VERSION, namespace, "inferencereplicas",
                                                                name))

    def patch_scale(self, namespace: str, name: str, body: Obj, dry_run: bool) -> Obj:
        """A merge patch of the /scale subresource; the resourceVersion in it makes the API server refuse (409) a
        write on a replica that changed since it was read."""
        kwargs: dict[str, Any] = {"_content_type": "application/merge-patch+json"}
        if dry_run:
            kwargs["dry_run"] = "All"
        api: Any = self.custom
        return cast(Obj, api.patch_namespaced_custom_object_scale(c.GROUP, c.VERSION, namespace, "inferencereplicas",
                                                                  name, body, **kwargs))

    def warnings(self, namespace: str, pod: str) -> list[Obj]:
        events = self.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={pod},type=Warning")
        return [self.core.api_client.sanitize_for_serialization(e) for e in events.items]


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


OPERATOR_NAMESPACE = "omenative-system"
OPERATOR_DEPLOYMENT = "omenative"


def print_rows(rows: list[tuple[str, str]], wide: bool) -> None:
    """FIELD/VALUE rows, long values cut unless `wide`; a refusal is never cut, since its end (the quota's figures,
    the policy that refused) is what a user acts on."""
    width = None if wide else 64
    print_table([["FIELD", "VALUE"]] + [[k, v if width is None or len(v) <= width or k.endswith("refused")
                                         else v[: width - 3] + "..."] for k, v in rows])


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


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
        pods, pod_error = None, reports.read_failure(getattr(exc, "status", None))
    try:
        events = cluster.warning_events(namespace)
    except Exception as exc:
        events, event_error = None, reports.read_failure(getattr(exc, "status", None))
    try:
        refused = {str((r.get("spec") or {}).get("component")): cause for r in cluster.replicas(namespace, name)
                   if (cause := refusal(r))}
    except Exception:  # the report stands without them; the events still name a refusal
        refused = {}
    content = reports.status_report(isvc, pods, events, now=now(), pod_error=pod_error, event_error=event_error,
                                    refused=refused)
    if output in ("table", "wide"):
        print_rows(reports.status_rows(content, output == "wide"), output == "wide")
    else:
        emit({"apiVersion": REPORT_VERSION, "kind": "StatusReport", "content": content}, output)
    return 0


def wait(cluster: Cluster, namespace: str, name: str, args: argparse.Namespace) -> int:
    """Checks at once, then every POLL seconds, until the predicate holds (0) or the wait ends without it (2)."""
    try:
        predicate = reports.parse_predicate(args.predicate, args.component, args.replicas, args.request_id)
    except reports.InvalidWait as exc:
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
    check: reports.Check | None = None
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
            check = reports.check_condition(predicate, isvc, now())
        elif predicate.kind == "rollout":
            check = reports.check_rollout(predicate, isvc)
        elif predicate.kind == "migration":
            reads += 1
            record, validity = migration.find_record(cluster, namespace, name, predicate.request_id)
            check = reports.check_migration(record, validity)
        else:
            reads += 1
            replica = reports.component_replica(cluster.replicas(namespace, name), isvc, predicate.component)
            check = reports.check_replicas(predicate, replica)
        if check.matched:
            outcome = "Matched"
            break
        left = timeout - (time.monotonic() - started)
        if left <= 0:
            break
        time.sleep(min(poll, left))
    report = reports.wait_report(namespace, name, predicate, outcome, check,
                                 elapsed_ms=int((time.monotonic() - started) * 1000), reads=reads, polls=polls,
                                 source="InitialGET" if reads <= 2 and polls == 0 else "Poll")
    if args.output in ("table", "wide"):
        print_rows(reports.wait_rows(report), args.output == "wide")
    else:
        emit(report, args.output)
    if outcome != "Matched":
        sys.stdout.flush()
        print("error: RequestedConditionUnmet", file=sys.stderr)
        return 2
    return 0


def version(kubeconfig: str | None, context: str | None, namespace: str) -> int:
    """The plugin's version and the controller's, read from its Deployment's image (exit 0 even when unknown)."""
    client = f"{__version__} (commit unknown)"
    try:
        cluster = Cluster(kubeconfig, context)
    except BaseException:
        operator = "unknown (resolve kubernetes-client: Unavailable)"
    else:
        try:
            operator = reports.operator_version(cluster.deployment(namespace, OPERATOR_DEPLOYMENT))
        except Exception as exc:
            reason = reports.read_failure(getattr(exc, "status", None))
            reason = {"Unreadable": "ServerError" if (getattr(exc, "status", 0) or 0) >= 500 else "Unavailable",
                      "Timeout": "TimedOut"}.get(reason, reason)
            operator = reports.operator_version(
                None, f"get deployments.apps {namespace}/{OPERATOR_DEPLOYMENT}: {reason}")
    if sys.stdout.isatty():
        print_table([["COMPONENT", "VERSION"], ["Client", client], ["Operator", operator]])
    else:
        print(f"Client Version: {client}")
        print(f"Operator Version: {operator}")
    return 0


def get(cluster: Cluster, namespace: str, args: argparse.Namespace) -> int:
    """`kubectl ome get RESOURCE [NAME]`: a table with each kind's columns, or the objects as JSON or YAML."""
    resource = args.resource.lower()
    if resource in reports.NOT_SERVED_KINDS:
        raise CommandError(f"omenative does not serve {resource}: it runs InferenceServices, InferenceReplicas, "
                           "models and runtimes")
    if resource not in reports.GET_RESOURCES:
        raise CommandError(f"unknown resource {args.resource!r}")
    if args.name and (args.all_namespaces or args.selector):
        raise CommandError("a NAME can't be combined with -A or -l")
    plural, scope = reports.GET_RESOURCES[resource]
    parts = reports.MERGED_PARTS.get(plural, (plural,))
    if scope == "Cluster" and args.all_namespaces:
        print(f"warning: {plural} are cluster-scoped; -A is ignored", file=sys.stderr)
    where = None if args.all_namespaces else namespace
    objects: list[tuple[str, Obj]] = []
    if args.name:
        for part in parts:
            found = cluster.get_ome(part, namespace, args.name)
            if found is not None:
                objects.append(("Cluster" if part.startswith("cluster") else "Namespaced", found))
                break
        if not objects:
            raise CommandError(f'{plural} "{args.name}" not found')
    else:
        for part in parts:
            kind_scope = "Cluster" if part.startswith("cluster") else "Namespaced"
            objects += [(kind_scope, obj) for obj in cluster.list_ome(part, where, args.selector)]
    if args.output in ("json", "yaml"):
        items = [obj for _, obj in objects]
        emit(items[0] if args.name else {"apiVersion": "v1", "kind": "List", "items": items}, args.output)
        return 0
    if not objects:
        print(f"No resources found{'' if args.all_namespaces or scope == 'Cluster' else f' in {namespace} namespace'}.",
              file=sys.stderr)
        return 0
    print_table(reports.get_table(plural, objects, wide=args.output == "wide",
                                  all_namespaces=bool(args.all_namespaces), now=now()))
    return 0


def logs_cmd(cluster: Cluster, namespace: str, args: argparse.Namespace) -> int:
    try:
        chosen = logs.selector(args.inferenceservice, args.component, args.instance, args.revision)
        pods = cluster.pods_selected(namespace, chosen)
        containers = {p["metadata"]["name"]: logs.container_of(p, args.container) for p in pods}
        options: dict[str, Any] = {}
        if args.tail >= 0:
            options["tail_lines"] = args.tail
        if args.since:
            options["since_seconds"] = max(1, int(parse_duration(args.since)))
        if args.limit_bytes > 0 and not args.follow:
            options["limit_bytes"] = args.limit_bytes

        def read(pod: Obj, container: str, follow: bool = False) -> Iterable[str]:
            response: Any = cluster.core.read_namespaced_pod_log(
                pod["metadata"]["name"], namespace, container=container, follow=follow, _preload_content=False,
                **options)
            try:
                pending = b""
                for chunk in response.stream(4096):
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    yield from (line.decode(errors="replace") for line in lines)
                if pending:
                    yield pending.decode(errors="replace")
            finally:
                response.release_conn()

        if args.follow:
            logs.follow_all(pods, containers, lambda pod, name: read(pod, name, True), args.max_log_requests)
        else:
            logs.read_all(pods, containers, read)
    except (logs.LogsError, InvalidValue) as exc:
        raise CommandError(str(exc)) from None
    except KeyboardInterrupt:
        return 1
    return 0


class CommandError(Exception):
    """A command's refusal, printed as `error: <message>` with exit code 1."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubectl ome", description="Inspect OMENative InferenceServices.")
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--context", default=None)
    # kubectl passes flags where the user wrote them: the connection flags also after the command.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kubeconfig", default=argparse.SUPPRESS)
    common.add_argument("--context", default=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)
    version = sub.add_parser("version", parents=[common], help="print the plugin and operator versions")
    version.add_argument("--ome-namespace", default=OPERATOR_NAMESPACE,
                         help="namespace of the omenative Deployment (deploy/ installs it in omenative-system)")
    status_cmd = sub.add_parser("status", parents=[common], help="why an InferenceService is or isn't ready")
    status_cmd.add_argument("inferenceservice")
    status_cmd.add_argument("-n", "--namespace", default=None)
    status_cmd.add_argument("--ome-namespace", default="ome")
    status_cmd.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
    get_cmd = sub.add_parser("get", parents=[common], help="list OME resources with model-centric columns")
    get_cmd.add_argument("resource")
    get_cmd.add_argument("name", nargs="?", default=None)
    get_cmd.add_argument("-n", "--namespace", default=None)
    get_cmd.add_argument("-A", "--all-namespaces", action="store_true")
    get_cmd.add_argument("-l", "--selector", default=None)
    get_cmd.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
    logs_parser = sub.add_parser("logs", parents=[common], help="logs of the pods behind an InferenceService")
    logs_parser.add_argument("inferenceservice")
    logs_parser.add_argument("-n", "--namespace", default=None)
    logs_parser.add_argument("-c", "--component", default=None)
    logs_parser.add_argument("--container", default=None)
    logs_parser.add_argument("-f", "--follow", action="store_true")
    logs_parser.add_argument("--instance", type=int, default=-1)
    logs_parser.add_argument("--limit-bytes", type=int, default=0)
    logs_parser.add_argument("--max-log-requests", type=int, default=5)
    logs_parser.add_argument("--revision", default=None)
    logs_parser.add_argument("--since", default=None)
    logs_parser.add_argument("--tail", type=int, default=-1)
    wait = sub.add_parser("wait", parents=[common], help="block until an InferenceService reaches a state")
    wait.add_argument("inferenceservice")
    wait.add_argument("-n", "--namespace", default=None)
    wait.add_argument("--for", dest="predicate", default=None)
    wait.add_argument("--component", default=None)
    wait.add_argument("--replicas", type=int, default=None)
    wait.add_argument("--timeout", default="1m0s")
    wait.add_argument("--request-id", default=None)
    wait.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
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
    migration_cmd = sub.add_parser("migration", help="OMENative migrations of an InferenceService, and the alpha start")
    moves = migration_cmd.add_subparsers(dest="action", required=True)
    for verb, text in (("status", "the migrations running or recently ended"), ("list", "the same as status"),
                       ("history", "status plus the audit ConfigMap's older migrations")):
        shown = moves.add_parser(verb, parents=[common], help=text)
        shown.add_argument("inferenceservice")
        shown.add_argument("--component", default=None, choices=list(c.COMPONENTS))
        shown.add_argument("-n", "--namespace", default=None)
        shown.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
    start = moves.add_parser("start", parents=[common], help="(alpha) ask OME to move one Instance to another node")
    start.add_argument("inferenceservice")
    start.add_argument("--component", default=None)
    start.add_argument("--instance", default=None)
    start.add_argument("--from-node", default=None)
    start.add_argument("--hint-node", action="append", default=[])
    start.add_argument("--reason", default=None)
    start.add_argument("--requested-by", default="kubectl-ome")
    start.add_argument("--request-id", default=None)
    start.add_argument("--dry-run", default="none", choices=["none", "client", "server"])
    start.add_argument("--yes", action="store_true", help="confirm the exact preview without a prompt")
    start.add_argument("--ome-namespace", default="ome")
    start.add_argument("-n", "--namespace", default=None)
    start.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
    scale_cmd = sub.add_parser("scale", parents=[common], help="(alpha) a transient Instance count for one component")
    scale_cmd.add_argument("inferenceservice")
    scale_cmd.add_argument("--component", default=None)
    scale_cmd.add_argument("--replicas", default=None)
    scale_cmd.add_argument("--override-autoscaler", action="store_true")
    scale_cmd.add_argument("--yes", action="store_true")
    scale_cmd.add_argument("--dry-run", default="none", choices=["none", "client", "server"])
    scale_cmd.add_argument("--ome-namespace", default="ome")
    scale_cmd.add_argument("-n", "--namespace", default=None)
    scale_cmd.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
    autoscale_cmd = sub.add_parser("autoscale", help="each component's autoscaling, and who owns spec.replicas")
    scaling = autoscale_cmd.add_subparsers(dest="action", required=True)
    auto_status = scaling.add_parser("status", parents=[common], help="autoscaler, owner and counts per component")
    auto_status.add_argument("inferenceservice")
    auto_status.add_argument("--live-scale", action="store_true")
    auto_status.add_argument("--live-scaler", action="store_true")
    auto_status.add_argument("-n", "--namespace", default=None)
    auto_status.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
    rollout_cmd = sub.add_parser("rollout", help="rollout progress of an InferenceService, and its alpha actions")
    steps = rollout_cmd.add_subparsers(dest="action", required=True)
    for verb, text in (("status", "where each component is in its rollout"),
                       ("explain", "the declared, live and pinned plans, and what holds the rollout"),
                       ("history", "the active run, the last run and the current revisions"),
                       ("validate", "check the rollout configuration (exit 2 when invalid or unverifiable)")):
        shown = steps.add_parser(verb, parents=[common], help=text)
        shown.add_argument("inferenceservice")
        shown.add_argument("-n", "--namespace", default=None)
        shown.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
    repin = steps.add_parser("repin", parents=[common], help="(alpha) move the active run to the current plan")
    repin.add_argument("inferenceservice")
    repin.add_argument("--dry-run", default="none", choices=["none", "client", "server"])
    repin.add_argument("--yes", action="store_true", help="confirm the exact preview without a prompt")
    repin.add_argument("-n", "--namespace", default=None)
    repin.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
    for verb, text in (("pause", "(alpha) hold rollout work across the service"),
                       ("resume", "(alpha) clear a pause"),
                       ("promote", "(alpha) pass the manual gate a canary waits at"),
                       ("rollback", "(alpha) return a canary to its stable revision")):
        act = steps.add_parser(verb, parents=[common], help=text)
        act.add_argument("inferenceservice")
        act.add_argument("--dry-run", default="none", choices=["none", "client", "server"])
        act.add_argument("--yes", action="store_true", help="confirm the exact preview without a prompt")
        act.add_argument("--ome-namespace", default="ome")
        act.add_argument("-n", "--namespace", default=None)
        act.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
        if verb == "promote":
            act.add_argument("--override-analysis", action="store_true",
                             help="bypass only this active analysis gate, including warm-up and bake; requires --yes")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "version":
        return version(args.kubeconfig, args.context, args.ome_namespace)
    try:
        cluster = Cluster(args.kubeconfig, args.context)
        namespace = args.namespace or cluster.namespace
        if args.command == "status":
            return status(cluster, namespace, args.inferenceservice, args.output)
        if args.command == "wait":
            return wait(cluster, namespace, args.inferenceservice, args)
        if args.command == "get":
            return get(cluster, namespace, args)
        if args.command == "logs":
            return logs_cmd(cluster, namespace, args)
        if args.command == "migration":
            if args.action == "start":
                return migration.migration_start(
                    cluster, namespace, args.inferenceservice, component=args.component, instance=args.instance,
                    from_node=args.from_node, hints=args.hint_node, reason=args.reason,
                    requested_by=args.requested_by, request_id=args.request_id, dry_run=args.dry_run, yes=args.yes,
                    output=args.output, context=args.context, ome_namespace=args.ome_namespace)
            show = migration.migration_history if args.action == "history" else migration.migration_status
            return show(cluster, namespace, args.inferenceservice, args.component, args.output)
        if args.command == "scale":
            return scale.scale(cluster, namespace, args.inferenceservice, component=args.component,
                               replicas=args.replicas, override=args.override_autoscaler, yes=args.yes,
                               dry_run=args.dry_run, output=args.output, context=args.context,
                               ome_namespace=args.ome_namespace)
        if args.command == "autoscale":
            return scale.autoscale_status(cluster, namespace, args.inferenceservice, live_scale=args.live_scale,
                                          live_scaler=args.live_scaler, output=args.output)
        if args.command == "rollout":
            reader = {"status": rollout.rollout_status, "explain": rollout.explain, "history": rollout.history,
                      "validate": rollout.validate}.get(args.action)
            if reader is not None:
                return reader(cluster, namespace, args.inferenceservice, args.output)
            if args.action == "repin":
                return rollout.repin(cluster, namespace, args.inferenceservice, dry_run=args.dry_run, yes=args.yes,
                                     output=args.output, context=args.context)
            return rollout.rollout_action(cluster, namespace, args.inferenceservice, args.action,
                                          dry_run=args.dry_run, yes=args.yes, output=args.output,
                                          context=args.context,
                                          override_analysis=getattr(args, "override_analysis", False))
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
