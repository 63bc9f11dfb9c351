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
    kubectl ome traffic status INFERENCESERVICE [-n NS] [-o table|wide|json|yaml]

The Instance rows come from each component's InferenceReplica status (either encoding); `instance status` adds the
live pods and their Warning events. Exit codes: 0 ok, 1 error, 2 a wait that ended without a match, 3 a release whose
target changed after its preview. Each command has its module (status, wait, get, version, logs, instance,
migration, scale, rollout, traffic; sections.py holds the later sections of status); common.py holds what they
share, cluster.py the Cluster they read and write through (on the synchronous client: a command line waits for each
answer anyway).
"""

from __future__ import annotations

import argparse
import json
import sys

from omenative.api import constants as c
from omenative.kubectl_ome import get, instance, logs, migration, rollout, scale, status, traffic, version, wait
from omenative.kubectl_ome.cluster import KubeCluster
from omenative.kubectl_ome.version import OPERATOR_NAMESPACE


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
    wait.add_argument("--revision", default=None, help="full ISVC-COMPONENT-HASH, only for held-revision=unheld")
    wait.add_argument("--ir-name", default=None, help="the InferenceReplica held-revision=unheld is bound to")
    wait.add_argument("--ir-uid", default=None, help="its UID, with --ir-name")
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
    traffic_cmd = sub.add_parser("traffic", help="the traffic the controller reports: endpoints, canaries, weights")
    routes = traffic_cmd.add_subparsers(dest="action", required=True)
    traffic_status = routes.add_parser("status", parents=[common], help="endpoints, canary steps and each "
                                       "revision's weight, from the InferenceService's status")
    traffic_status.add_argument("inferenceservice")
    traffic_status.add_argument("-n", "--namespace", default=None)
    traffic_status.add_argument("-o", "--output", default="table", choices=["table", "wide", "json", "yaml"])
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
        return version.version(args.kubeconfig, args.context, args.ome_namespace)
    try:
        cluster = KubeCluster(args.kubeconfig, args.context)
        namespace = args.namespace or cluster.namespace
        if args.command == "status":
            return status.status(cluster, namespace, args.inferenceservice, args.output)
        if args.command == "wait":
            return wait.wait(cluster, namespace, args.inferenceservice, args)
        if args.command == "get":
            return get.get(cluster, namespace, args)
        if args.command == "logs":
            return logs.command(cluster, namespace, args)
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
        if args.command == "traffic":
            return traffic.traffic_status(cluster, namespace, args.inferenceservice, args.output)
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
            return instance.instance_list(cluster, namespace, args.inferenceservice, args.output)
        if args.action == "retry-blocks":
            return instance.retry_blocks(cluster, namespace, args.inferenceservice, args.component, args.output)
        if args.action == "release-held":
            return instance.release_held(cluster, namespace, args.inferenceservice, args.component, args.revision,
                                         dry_run=args.dry_run, yes=args.yes, output=args.output,
                                         context=args.context)
        return instance.instance_status(cluster, namespace, args.inferenceservice, args.index, args.component,
                                        args.output)
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
