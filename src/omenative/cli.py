"""The `omenative` command: `omenative run` starts the controller, with Kubernetes-style flags."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import attrs
import yaml

from omenative import __version__
from omenative.api.config import ControllerConfig
from omenative.api.units import InvalidValue, parse_duration

# Flags that set a field of the controller configuration: (flag, field, help).
CONFIG_FLAGS = (
    ("--instance-ready-timeout", "instance_ready_timeout",
     "how long a new Instance has to become ready (Go duration; empty: no deadline)"),
    ("--stuck-pod-grace-period", "stuck_pod_grace_period",
     "how long a pod may wait in CrashLoopBackOff or ImagePullBackOff before its Instance fails or restarts"),
    ("--unschedulable-grace-period", "unschedulable_grace_period",
     "how long a pod may stay unschedulable before its Instance fails"),
    ("--update-retry-backoff", "update_retry_backoff",
     "wait before the second attempt at a failing revision; doubled for each next one"),
    ("--teardown-deadline", "teardown_deadline",
     "how long a deleted InferenceReplica waits for its pods before it lets go (empty: no deadline)"),
    ("--force-delete-overdue-slack", "force_delete_overdue_slack",
     "force-delete escalation: how far past its deletion deadline a stuck pod must be (off unless both are set)"),
    ("--force-delete-node-unreachable-threshold", "force_delete_node_unreachable_threshold",
     "force-delete escalation: how long the pod's node must have looked dead"),
    ("--status-batch-period", "status_batch_period",
     "routine pod progress reaches an InferenceReplica's status in batches this long (failures at once; 0: off)"),
    ("--rollout-ready-timeout", "rollout_ready_timeout",
     "how long a canary step may wait for its new Instances when the service sets no readyTimeout (empty: no limit)"),
    ("--rollout-progress-deadline", "rollout_progress_deadline",
     "roll a group's rollout back when it made no progress for this long (empty: off, the default)"),
    ("--migration-window", "migration_window",
     "the window of --migration-max-per-window, and how long ended migration records stay in status"),
    ("--gang-schedule-timeout-min", "gang_schedule_timeout_min", "lower clamp of PodGroup scheduleTimeoutSeconds"),
    ("--gang-schedule-timeout-max", "gang_schedule_timeout_max", "upper clamp of PodGroup scheduleTimeoutSeconds"),
)
DURATION_FIELDS = {field for _, field, _ in CONFIG_FLAGS}


def load_config(path: str | None, overrides: dict[str, Any]) -> ControllerConfig:
    """The controller configuration: defaults, then a YAML file (keys as in ControllerConfig, camelCase or
    snake_case), then flags."""
    values: dict[str, Any] = {}
    if path:
        data = yaml.safe_load(Path(path).read_text()) or {}
        names = {f.name for f in attrs.fields(ControllerConfig)}
        for key, value in data.items():
            snake = "".join(f"_{ch.lower()}" if ch.isupper() else ch for ch in key)
            if snake not in names:
                raise SystemExit(f"omenative: unknown setting {key!r} in {path}")
            values[snake] = value
    values.update({k: v for k, v in overrides.items() if v is not None})
    for key in DURATION_FIELDS & values.keys():
        if values[key] in ("", "0"):
            values[key] = None
            continue
        try:
            parse_duration(str(values[key]))
        except InvalidValue as exc:
            raise SystemExit(f"omenative: {key.replace('_', '-')}: {exc}") from exc
    return ControllerConfig(**values)


def revision_history(limit: int | None) -> dict[str, Any]:
    """--revision-history-limit: unset keeps the configured value, 0 keeps every revision."""
    if limit is None:
        return {}
    if limit < 0:
        raise SystemExit("omenative: revision-history-limit must be 0 (keep all) or more")
    return {"revision_history_limit": limit}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="omenative", description="Runs OME InferenceServices on OMENative.")
    parser.add_argument("--version", action="version", version=f"omenative {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    run = sub.add_parser("run", help="run the controller")
    run.add_argument("--kubeconfig", help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    run.add_argument("--namespace", action="append", default=[], dest="namespaces",
                     help="watch only this namespace (repeatable; default: all)")
    run.add_argument("--leader-elect", action="store_true", help="run only while holding the leader lease")
    run.add_argument("--leader-election-id", default="omenative-leader", help="name of the leader Lease")
    run.add_argument("--leader-election-namespace", default=None,
                     help="namespace of the leader Lease (default: $POD_NAMESPACE, else default)")
    run.add_argument("--metrics-bind-address", default=":8080", help="address of /metrics; 0 turns it off")
    run.add_argument("--health-probe-bind-address", default=":8081",
                     help="address of /healthz and /readyz; 0 turns them off")
    run.add_argument("--workers", type=int, default=24, help="concurrent reconciles per controller")
    run.add_argument("--kube-api-qps", type=float, default=None, help="client-side request rate limit (default off)")
    run.add_argument("--kube-api-burst", type=int, default=None, help="client-side burst")
    run.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    run.add_argument("--log-format", default="auto", choices=["json", "console", "auto"],
                     help="json, console, or auto: JSON unless stderr is a terminal")
    run.add_argument("--unready-after-refused-credentials", type=float, default=30.0, metavar="SECONDS",
                     help="report not ready once the API server has refused the controller's credentials (401, or a "
                          "403 of its identity) this long with no request going through")
    run.add_argument("--lean-runtime", action=argparse.BooleanOptionalAction, default=True,
                     help="load kubernetes-asyncio without its generated models and share one TLS read buffer per "
                          "thread, for memory (checked at start; --no-lean-runtime runs the stock runtime)")
    run.add_argument("--shutdown-grace-period", type=float, default=30.0,
                     help="seconds to finish in-flight reconciles on SIGTERM")
    run.add_argument("--config", help="YAML file of controller settings (defaults and grace periods)")
    run.add_argument("--claim-unmoded", action="store_true", default=None,
                     help="also run components that declare no deployment mode (otherwise RawDeployment's)")
    for flag, _, help_text in CONFIG_FLAGS:
        run.add_argument(flag, default=None, help=help_text)
    run.add_argument("--canary-analysis-prometheus-address", default=None,
                     help="Prometheus HTTP API that canary analysis queries when a canary names no serverAddress")
    run.add_argument("--update-retry-attempts", type=int, default=None,
                     help="attempts at a revision that fails for a reason of its own before it is held (0: hold at "
                          "the first failure)")
    run.add_argument("--auto-migrate-max-attempts", type=int, default=None,
                     help="relocations of an Instance that keeps failing on one node, until it is next Ready "
                          "(default 3; 0: off)")
    run.add_argument("--revision-history-limit", type=int, default=None,
                     help="ControllerRevisions each component keeps besides those in use (default 10; 0: keep all)")
    run.add_argument("--migration-max-per-window", type=int, default=None,
                     help="migrations of a component that may start within --migration-window (unset: requests wait)")
    run.add_argument("--migration-max-in-flight", type=int, default=None,
                     help="migrations running at once (no effect: one Instance of a component moves at a time)")
    run.add_argument("--ingress-creation", action=argparse.BooleanOptionalAction, default=None,
                     help="give each InferenceService an HTTPRoute {isvc} on --ingress-gateway (default off, as OME; "
                          "ome.io/ingress-disable-creation overrides it per service)")
    run.add_argument("--ingress-gateway", default=None, help="the Gateway of the HTTPRoutes, as <namespace>/<name>")
    run.add_argument("--ingress-domain", default=None, help="the domain of the hosts (default example.com)")
    run.add_argument("--ingress-domain-template", default=None,
                     help="the host of an InferenceService (default {{ .Name }}.{{ .Namespace }}.{{ .IngressDomain }})")
    run.add_argument("--ingress-url-scheme", default=None, choices=["http", "https"],
                     help="the scheme of status.url with ingress (default http)")
    run.add_argument("--webhook-bind-address", default=None,
                     help="serve the admission webhook on this address (such as :9443); off when unset")
    run.add_argument("--webhook-service", default=None,
                     help="namespace/name of the Service in front of the webhook (in-cluster)")
    run.add_argument("--webhook-url", default=None,
                     help="URL the API server calls the webhook at (local runs; such as https://127.0.0.1:9443)")
    run.add_argument("--webhook-cert-dir", default=None, help="where the webhook keeps its CA and certificate")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "version":
        print(f"omenative {__version__}")
        return 0
    if args.lean_runtime:
        from omenative.kube import tweaks

        tweaks.apply()  # before anything imports kubernetes_asyncio: its generated models cost a third of our memory
    from omenative import logs
    from omenative.manager import Manager, Options, default_leader_election_namespace

    logs.configure(args.log_level, args.log_format)
    config = load_config(args.config, {field: getattr(args, field) for _, field, _ in CONFIG_FLAGS}
                         | {"claim_unmoded": args.claim_unmoded, "update_retry_attempts": args.update_retry_attempts,
                            "canary_analysis_prometheus_address": args.canary_analysis_prometheus_address,
                            "migration_max_per_window": args.migration_max_per_window,
                            "migration_max_in_flight": args.migration_max_in_flight,
                            "ingress_creation": args.ingress_creation, "ingress_gateway": args.ingress_gateway,
                            "ingress_domain": args.ingress_domain,
                            "ingress_domain_template": args.ingress_domain_template,
                            "ingress_url_scheme": args.ingress_url_scheme}
                         | revision_history(args.revision_history_limit)
                         | ({"auto_migrate_max_attempts": args.auto_migrate_max_attempts}
                            if args.auto_migrate_max_attempts is not None else {}))
    webhook = None
    if args.webhook_bind_address:
        from omenative.webhook.server import WebhookOptions

        webhook = WebhookOptions(bind_address=args.webhook_bind_address, service=args.webhook_service,
                                 url=args.webhook_url, cert_dir=args.webhook_cert_dir)
    options = Options(
        kubeconfig=args.kubeconfig, namespaces=tuple(args.namespaces), leader_elect=args.leader_elect,
        leader_election_id=args.leader_election_id,
        leader_election_namespace=args.leader_election_namespace or default_leader_election_namespace(),
        metrics_bind_address=args.metrics_bind_address, health_probe_bind_address=args.health_probe_bind_address,
        workers=args.workers, qps=args.kube_api_qps, burst=args.kube_api_burst,
        shutdown_grace_period=args.shutdown_grace_period, config=config, webhook=webhook,
        credentials_window=args.unready_after_refused_credentials, lean_runtime=args.lean_runtime)
    return asyncio.run(Manager(options).run())


if __name__ == "__main__":
    sys.exit(main())
