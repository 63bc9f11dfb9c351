"""The controller's configuration: cluster-wide defaults and grace periods (OME's chart values under
`ome.controller`). Pure data; the CLI reads it from flags and a file."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class ControllerConfig:
    # Replica defaults, when neither the InferenceService nor the runtime sets a bound.
    default_min_replicas: int = 1
    default_max_replicas: dict[str, int] = attrs.field(
        factory=lambda: {"engine": 3, "decoder": 3, "router": 2})
    # Lifecycle defaults (lifecycle.* unset in the InferenceService and the runtime).
    instance_ready_timeout: str | None = "30m"
    update_strategy_type: str | None = None  # None: SurgeThenDrain
    max_surge: int | str | None = "25%"
    max_unavailable: int | str | None = "25%"  # not applied under SurgeThenDrain
    min_ready_seconds: int = 0
    gang_schedule_timeout_min: str | None = "60s"
    gang_schedule_timeout_max: str | None = "600s"
    # When a pod counts as stuck or unschedulable for good.
    stuck_pod_grace_period: str | None = "60s"
    unschedulable_grace_period: str | None = "15m"
    # Retries of a revision whose updates fail for a reason of its own (OME's lifecycle.updateRetry): this many
    # attempts, the second `update_retry_backoff` after the first failure and each next one twice as long after the
    # last; then the revision is held. 0 attempts: the first such failure holds it. The backoff also paces the
    # retry of an Instance that failed for any other reason.
    update_retry_attempts: int = 3
    update_retry_backoff: str | None = "1m"
    # The force-delete escalation of OME's "Recover stuck deletions" guide, on when both are set: a pod stuck
    # Terminating this far past its deletion deadline, on a node dead for at least the threshold, is force-deleted.
    force_delete_overdue_slack: str | None = None
    force_delete_node_unreachable_threshold: str | None = None
    # How long a deleted InferenceReplica waits for its Instances to drain before it lets go of its pods anyway.
    teardown_deadline: str | None = "30m"
    # Routine pod progress (created, scheduled, ready) reaches an InferenceReplica's status in batches this long, so
    # a burst of pod changes costs one status write, not one each; a failure (a restart, a Failed or deleted pod, a
    # pod that stops being ready) is acted on at once. 0: every change at once.
    status_batch_period: str | None = "500ms"
    # PodDisruptionBudget when the component sets neither minAvailable nor maxUnavailable.
    pdb_max_unavailable: int | str = 1
    # Rollout groups (OME's ome.controller.coordination / ome.controller.rollout): the maintainRatio tolerance
    # when a group sets none, and how long a canary step may wait for its new Instances when neither the
    # ome.io/rollout-ready-timeout annotation nor the group's readyTimeout says (None: no limit).
    rollout_ratio_tolerance: int = 5
    rollout_ready_timeout: str | None = "15m"
    # Where canary analysis queries go when the canary names no serverAddress (OME's
    # canaryAnalysis.bundledPrometheusAddress); None: such a canary's samples are inconclusive.
    canary_analysis_prometheus_address: str | None = None
    # Roll a blue-green, rolling-update or sequence rollout back when none of its components made progress for this
    # long (as a Deployment's progressDeadlineSeconds, but acted on); None: off, as OME.
    rollout_progress_deadline: str | None = None
    # Migration caps (OME's lifecycle.audit): how many of a component's migrations may start within the window, the
    # window (also how long ended records stay in status.migrations), and migrations running at once (no effect:
    # one Instance of a component moves at a time). Until all three are set, requests wait in Accepted.
    migration_max_per_window: int | None = None
    migration_window: str | None = None
    migration_max_in_flight: int | None = None
    # ControllerRevisions a component keeps besides the ones it uses (OME's lifecycle.revisionHistoryLimit, 10 with
    # its chart); an InferenceService's ome.io/revision-history-limit wins. None or 0: every revision is kept.
    revision_history_limit: int | None = 10
    # Automatic relocation (OME's autoMigrate.maxAttempts, 3 with its chart): how many times an Instance whose
    # attempt failed on one node, for a cause not in the workload, is rebuilt off that node before it is next Ready.
    # None or 0: never.
    auto_migrate_max_attempts: int | None = 3
    # Also run components that declare no deployment mode at all (they would be RawDeployment).
    claim_unmoded: bool = False
    # Ingress (OME's `ingress` entry of inferenceservice-config): off by default, as OME ships it. On, each
    # InferenceService gets an HTTPRoute `{isvc}` (Gateway API) on `ingress_gateway` ("namespace/name") for the host
    # the template makes; each setting can be overridden per InferenceService by OME's ome.io/ingress-* annotations.
    ingress_creation: bool = False
    ingress_gateway: str | None = None
    ingress_domain: str = "example.com"
    ingress_domain_template: str = "{{ .Name }}.{{ .Namespace }}.{{ .IngressDomain }}"
    ingress_url_scheme: str = "http"
