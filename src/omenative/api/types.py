"""The ome.io/v1beta1 kinds omenative serves and reads, as attrs models.

Pod templates, containers and other Kubernetes core types stay opaque JSON: omenative passes them through to the
pods it renders, and the API server keeps them as written (preserved unknown fields). Kinds and fields that upstream
OME has but omenative does not act on are kept the same way, so objects written for upstream are accepted and
round-trip intact.
"""

from typing import Any, ClassVar

import attrs

from omenative.api.phases import INSTANCE_PHASES
from omenative.api.schema import JSON, Model, field

DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
INT_OR_PERCENT = "an absolute number of Instances (2) or a percentage of the desired Instances (\"25%\")"


# --------------------------------------------------------------------------------------------------- references


@attrs.define(kw_only=True)
class ModelRef(Model):
    """A reference to the BaseModel (in the same namespace) or ClusterBaseModel to serve."""

    name: str | None = field("name", "Name of the BaseModel or ClusterBaseModel.", required=True)
    kind: str | None = field("kind", "BaseModel or ClusterBaseModel; a namespaced BaseModel of that name is looked up "
                             "first either way.", default="ClusterBaseModel")
    api_group: str | None = field("apiGroup", "API group of the model kind.", default="ome.io")
    fine_tuned_weights: list[str] | None = field("fineTunedWeights", "FineTunedWeight objects to serve on top of "
                                                 "the base model (at most one).")


@attrs.define(kw_only=True)
class ModelOverlayRef(Model):
    """A BaseModel or ClusterBaseModel attached beside the primary model (OME's overlays)."""

    name: str | None = field("name", "Name of the overlay model.", required=True)
    kind: str | None = field("kind", "BaseModel or ClusterBaseModel.", default="ClusterBaseModel")
    api_group: str | None = field("apiGroup", "API group of the model kind.", default="ome.io")


@attrs.define(kw_only=True)
class ReplicaModelRef(Model):
    """The model a standalone InferenceReplica serves, rendered with the named or selected runtime."""

    name: str | None = field("name", "Name of the BaseModel or ClusterBaseModel.", required=True)
    kind: str | None = field("kind", "ClusterBaseModel, or BaseModel for one in the replica's namespace.",
                             default="ClusterBaseModel")
    api_group: str | None = field("apiGroup", "API group of the model kind.", default="ome.io")
    fine_tuned_weights: list[str] | None = field("fineTunedWeights", "Not supported by omenative: the base model "
                                                 "is served alone (the webhook warns).")
    overlays: list[ModelOverlayRef] | None = field("overlays", "Not supported by omenative: no overlay is mounted "
                                                   "(the webhook warns).")


@attrs.define(kw_only=True)
class ReplicaRuntimeRef(Model):
    """The runtime whose piece for the component a standalone InferenceReplica renders, live: never pinned."""

    name: str | None = field("name", "Name of the ServingRuntime or ClusterServingRuntime.", required=True)
    kind: str | None = field("kind", "ClusterServingRuntime, or ServingRuntime for one in the replica's namespace.",
                             default="ClusterServingRuntime")
    api_group: str | None = field("apiGroup", "API group of the runtime kind.", default="ome.io")
    auto_sync: bool | None = field("autoSync", "Refused when false: a replica renders the live runtime.")
    revision: str | None = field("revision", "Refused: a replica keeps no snapshot of its runtime.")


@attrs.define(kw_only=True)
class ServingRuntimeRef(Model):
    """A reference to the ServingRuntime (in the same namespace) or ClusterServingRuntime to use."""

    name: str | None = field("name", "Name of the ServingRuntime or ClusterServingRuntime.", required=True)
    kind: str | None = field("kind", "ServingRuntime or ClusterServingRuntime; a namespaced ServingRuntime of that "
                             "name is looked up first either way.", default="ClusterServingRuntime")
    api_group: str | None = field("apiGroup", "API group of the runtime kind.", default="ome.io")


# --------------------------------------------------------------------------------------------------- lifecycle


@attrs.define(kw_only=True)
class RollingUpdate(Model):
    """How fast an update moves across a component's Instances."""

    partition: int | None = field("partition", "Instances with a lower index stay on their current revision "
                                  "(a canary hold). 0 updates every Instance.", minimum=0)
    max_unavailable: int | str | None = field(
        "maxUnavailable", "How many Instances may be out of service at once during an update or a crash-loop "
        f"repair: {INT_OR_PERCENT}, rounded up. SurgeThenDrain sets no limit unless given.", int_or_string=True)
    max_surge: int | str | None = field(
        "maxSurge", f"How many extra Instances an update may bring up at once: {INT_OR_PERCENT}, rounded up.",
        int_or_string=True)


@attrs.define(kw_only=True)
class InPlaceUpdateStrategy(Model):
    """Tuning of in-place updates."""

    grace_period_seconds: int | None = field("gracePeriodSeconds", "Accepted for compatibility; has no effect.",
                                             minimum=0)
    mark_not_ready_during_lifecycle: bool | None = field(
        "markNotReadyDuringLifecycle", "Take the pod out of rotation (ome.io/serving=False) before updating it "
                                       "in place. Defaults to true.")


@attrs.define(kw_only=True)
class UpdateStrategy(Model):
    """How an Instance moves to a new revision of its pod templates."""

    type: str | None = field(
        "type", "SurgeThenDrain (default) brings a whole new Instance up before draining the old one; RecreatePod "
        "replaces the pods; InPlaceIfPossible and InPlaceOnly change container images in place.",
        enum=("SurgeThenDrain", "RecreatePod", "InPlaceIfPossible", "InPlaceOnly"))
    rolling_update: RollingUpdate | None = field("rollingUpdate", "Pacing of the update across Instances.")
    in_place_update_strategy: InPlaceUpdateStrategy | None = field("inPlaceUpdateStrategy",
                                                                   "Tuning of in-place updates.")


@attrs.define(kw_only=True)
class MigrationPolicy(Model):
    """Whether Instances of the component may be moved to other nodes."""

    mode: str | None = field("mode", "Auto (default) and Surge allow migration; Never refuses it.",
                             enum=("Auto", "Surge", "Never"))


@attrs.define(kw_only=True)
class LifecycleSpec(Model):
    """How OMENative creates, repairs and updates a component's Instances. Unset fields come from the serving
    runtime, then the controller's configuration, then fixed defaults that depend on the Instance's shape."""

    restart_policy: str | None = field(
        "restartPolicy", "RecreateInstanceOnPodRestart (default for multi-pod Instances) recreates a ready Instance "
        "whole when one of its pods restarts its serving container, fails or disappears; None (default for "
        "single-pod Instances) leaves container restarts to the kubelet.",
        enum=("None", "RecreateInstanceOnPodRestart"))
    update_strategy: UpdateStrategy | None = field("updateStrategy", "How updates replace Instances.")
    ready_policy: str | None = field(
        "readyPolicy", "AllPodReady: an Instance is ready when all its pods are. None is allowed for single-pod "
        "Instances only.", enum=("AllPodReady", "None"))
    instance_ready_timeout: str | None = field(
        "instanceReadyTimeout", "How long a new or recreated Instance has to become ready before it fails, as a "
        "duration (45m, 1h30m).", pattern=DURATION_PATTERN)
    min_ready_seconds: int | None = field(
        "minReadySeconds", "How long a pod must have been Ready before it counts as available.", minimum=0)
    migration_policy: MigrationPolicy | None = field("migrationPolicy", "Whether Instances may be migrated.")


@attrs.define(kw_only=True)
class HPAAutoscaler(Model):
    """Settings copied into the component's HorizontalPodAutoscaler."""

    metrics: list[JSON] | None = field("metrics", "HorizontalPodAutoscaler metrics; none means CPU at 80%.")
    behavior: JSON | None = field("behavior", "HorizontalPodAutoscaler scaling behavior.", preserve_unknown=True)


@attrs.define(kw_only=True)
class ComponentAutoscaler(Model):
    """Which autoscaler sets the component's Instance count."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    klass: str | None = field(
        "class", "HPA (default): a HorizontalPodAutoscaler between minReplicas and maxReplicas. External: another "
        "scaler targets the InferenceReplica's scale subresource. None: held at minReplicas. KEDA: a KEDA "
        "ScaledObject (not created by omenative).", enum=("HPA", "KEDA", "External", "None"), required=True)
    hpa: HPAAutoscaler | None = field("hpa", "HorizontalPodAutoscaler settings.")
    keda: JSON | None = field("keda", "KEDA settings (kept, not acted on).", preserve_unknown=True)


# --------------------------------------------------------------------------------------------------- components

_POD_SPEC_DOC = "Pod spec fields (containers, volumes, tolerations, affinity, nodeSelector, schedulerName, ...) "


@attrs.define(kw_only=True)
class PodSpecFields(Model):
    """Fields of a Kubernetes pod spec, inlined. Only those omenative reads are declared; any other pod spec field
    is kept as written."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    containers: list[JSON] | None = field("containers", "Containers of the pod, merged by name with the runner.")
    init_containers: list[JSON] | None = field("initContainers", "Init containers of the pod.")
    volumes: list[JSON] | None = field("volumes", "Volumes of the pod, merged by name.")
    tolerations: list[JSON] | None = field("tolerations", "Tolerations of the pod (replaced whole, not merged).")
    affinity: JSON | None = field("affinity", "Affinity of the pod.", preserve_unknown=True)
    node_selector: dict[str, str] | None = field("nodeSelector", "Node labels the pod requires.")
    scheduler_name: str | None = field("schedulerName", "Scheduler of the pod, such as a gang-aware scheduler "
                                       "(scheduler-plugins-scheduler).")
    host_network: bool | None = field("hostNetwork", "Run the pod in the node's network namespace.")
    dns_policy: str | None = field("dnsPolicy", "DNS policy; ClusterFirstWithHostNet with hostNetwork.")
    service_account_name: str | None = field("serviceAccountName", "Service account of the pod.")


@attrs.define(kw_only=True)
class LeaderSpec(PodSpecFields):
    """The leader pod of a multi-pod Instance: pod spec fields and its runner container."""

    runner: JSON | None = field("runner", "The leader's main container, merged over the container of the same "
                                "name.", preserve_unknown=True)


@attrs.define(kw_only=True)
class WorkerSpec(PodSpecFields):
    """The worker pods of a multi-pod Instance."""

    size: int | None = field("size", "Workers per Instance; unset takes the runtime's value, else 1.", minimum=0)
    runner: JSON | None = field("runner", "The workers' main container.", preserve_unknown=True)


@attrs.define(kw_only=True)
class ComponentSpec(PodSpecFields):
    """Settings shared by the engine, decoder and router."""

    min_replicas: int | None = field("minReplicas", "Fewest Instances (at least 1 on OMENative).", minimum=0)
    max_replicas: int | None = field("maxReplicas", "Most Instances.", minimum=0)
    timeout_seconds: int | None = field("timeoutSeconds", "Request timeout, in seconds.")
    labels: dict[str, str] | None = field("labels", "Labels added to the component's pods.")
    annotations: dict[str, str] | None = field("annotations", "Annotations added to the component's pods; "
                                               "ome.io/deploymentMode here sets the component's mode.")
    service_port_app_protocols: dict[str, str] | None = field("servicePortAppProtocols",
                                                              "appProtocol of Service ports, by port name.")
    min_available: int | str | None = field("minAvailable", "PodDisruptionBudget minAvailable.", int_or_string=True)
    max_unavailable: int | str | None = field("maxUnavailable", "PodDisruptionBudget maxUnavailable (default 1).",
                                              int_or_string=True)
    deployment_strategy: JSON | None = field("deploymentStrategy", "RawDeployment only; ignored on OMENative.",
                                             preserve_unknown=True)
    lifecycle: LifecycleSpec | None = field("lifecycle", "OMENative lifecycle policies of the component.")
    autoscaler: ComponentAutoscaler | None = field("autoscaler", "The component's autoscaler.")
    runner: JSON | None = field("runner", "The component's main container (a container spec), merged over the pod "
                                "container of the same name.", preserve_unknown=True)


@attrs.define(kw_only=True)
class EngineSpec(ComponentSpec):
    """The engine (prefill in a prefill-decode service): pod spec fields, scaling, lifecycle, and for multi-pod
    Instances a leader and workers."""

    leader: LeaderSpec | None = field("leader", "The leader of each multi-pod Instance; declare it with worker.")
    worker: WorkerSpec | None = field("worker", "The workers of each multi-pod Instance; declare it with leader.")
    topology_key: str | None = field("topologyKey", "Node label that keeps each worker in its leader's topology "
                                     "domain (a required pod affinity; recorded on the PodGroup). Engine and decoder "
                                     "with workers; a change is a new revision.")
    topology_spread: str | None = field("topologySpread", "Spread Instances across domains: a topology spread "
                                        "constraint (maxSkew 1) on each Instance's leader or only pod; Required is "
                                        "DoNotSchedule, Preferred ScheduleAnyway. Applies to new pods; rolls nothing.",
                                        enum=("Preferred", "Required"))
    topology_spread_key: str | None = field("topologySpreadKey", "Node label of the domains to spread across; "
                                            "defaults to topologyKey (a single pod has none: set this).")


@attrs.define(kw_only=True)
class RouterSpec(ComponentSpec):
    """The router: receives requests and sends them to the engine (and decoder)."""

    config: dict[str, str] | None = field("config", "Settings passed to the router as environment variables.")


# --------------------------------------------------------------------------------------------------- rollout


@attrs.define(kw_only=True)
class CanaryPause(Model):
    """A step's gate: with a duration the step advances that long after its new Instances are ready; empty
    (`pause: {}`) it waits for a promote."""

    duration: str | None = field("duration", "How long the step waits once its new Instances are ready.",
                                 pattern=DURATION_PATTERN)


@attrs.define(kw_only=True)
class CanaryStep(Model):
    """One canary step: how many of each component's Instances run the new revision, and what ends the step."""

    capacity: int | str | None = field(
        "capacity", "Instances of each component on the new revision: a count, or a percentage of the desired "
        "Instances (\"25%\"), rounded up. The last step must be \"100%\".", int_or_string=True, required=True)
    traffic: int | None = field("traffic", "The new revision's weight recorded in status (requests follow "
                                "capacity, not this weight).", minimum=0, maximum=100, required=True)
    pause: CanaryPause | None = field("pause", "A timed (duration) or manual (empty) gate.")
    analysis: JSON | None = field("analysis", "Prometheus checks that gate the step.", preserve_unknown=True)


@attrs.define(kw_only=True)
class GroupCanary(Model):
    """A canary: steps that move a share of each component's Instances to the new revision."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    steps: list[CanaryStep] | None = field("steps", "The steps, in order.", max_items=20, required=True)
    ready_timeout: str | None = field("readyTimeout", "How long a step may wait for its new Instances.",
                                      pattern=DURATION_PATTERN)
    scale_down_delay_seconds: int | None = field(
        "scaleDownDelaySeconds", "The canary completes at least this long after the last step's Instances are "
        "ready.", minimum=0)
    prometheus: JSON | None = field("prometheus", "Where analysis queries go.", preserve_unknown=True)


@attrs.define(kw_only=True)
class GroupRollingUpdate(Model):
    """A rolling update: each component moves within its own budget."""

    max_surge: int | str | None = field("maxSurge", f"Extra Instances per component at once: {INT_OR_PERCENT}. "
                                        "Defaults to 25%.", int_or_string=True)
    max_unavailable: int | str | None = field(
        "maxUnavailable", f"Instances per component out of service at once (strategies other than SurgeThenDrain): "
        f"{INT_OR_PERCENT}. Defaults to 25%.", int_or_string=True)


@attrs.define(kw_only=True)
class MaintainRatio(Model):
    """Keeps the group's components in step."""

    tolerance: int | None = field("tolerance", "How far (percent) one component's progress may run ahead of "
                                  "another's. Defaults to 5.", minimum=0, maximum=100)


@attrs.define(kw_only=True)
class RolloutPolicyRef(Model):
    """A RolloutPolicy that supplies the group's progression (alpha, off)."""

    name: str | None = field("name", "The RolloutPolicy, in the InferenceService's namespace.")
    progression: str | None = field("progression", "canary, blueGreen or rollingUpdate.")
    kind: str | None = field("kind", "RolloutPolicy.")


@attrs.define(kw_only=True)
class RolloutGroup(Model):
    """Components that roll out as one unit."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    components: list[str] | None = field("components", "One to three of router, engine and decoder.",
                                         max_items=3, required=True)
    order: list[str] | None = field("order", "Not honoured by any progression: admission rejects it.")
    canary: GroupCanary | None = field("canary", "Canary progression.")
    blue_green: JSON | None = field("blueGreen", "Blue-green progression (the default; no fields).",
                                    preserve_unknown=True)
    rolling_update: GroupRollingUpdate | None = field("rollingUpdate", "Rolling-update progression.")
    policy_ref: RolloutPolicyRef | None = field("policyRef", "A RolloutPolicy (alpha, off by default).")
    soak: str | None = field("soak", "In a sequence, how long to wait after this component before the next.",
                             pattern=DURATION_PATTERN)
    maintain_ratio: MaintainRatio | None = field("maintainRatio", "Keep the components in step.")


@attrs.define(kw_only=True)
class RolloutSpec(Model):
    """How changes roll out across the InferenceService's OMENative components."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    groups: list[RolloutGroup] | None = field("groups", "Up to three rollout groups.", max_items=3)
    group_ordering: str | None = field("groupOrdering", "Sequential (default) admits one group or a sequence; "
                                       "Concurrent declares the groups independent.",
                                       enum=("Sequential", "Concurrent"))
    pairing_protocol: str | None = field("pairingProtocol", "Token of the engine-decoder wire protocol.",
                                         max_length=63, pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@attrs.define(kw_only=True)
class InferenceServiceSpec(Model):
    """What to serve and how: the model, the runtime and the components."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    deployment_mode: str | None = field(
        "deploymentMode", "OMENative runs every component as OMENative Instances; a component's own "
        "ome.io/deploymentMode annotation wins.", enum=("OMENative", "RawDeployment"))
    model: ModelRef | None = field("model", "The model to serve.")
    runtime: ServingRuntimeRef | None = field("runtime", "The serving runtime; selected automatically if unset.")
    engine: EngineSpec | None = field("engine", "The engine component.")
    decoder: EngineSpec | None = field("decoder", "The decoder component (prefill-decode serving).")
    router: RouterSpec | None = field("router", "The router component.")
    rollout: RolloutSpec | None = field("rollout", "Rollout groups, their progressions and the pairing protocol.")


@attrs.define(kw_only=True)
class Condition(Model):
    """A condition in the Kubernetes style."""

    type: str | None = field("type", "Condition type.", required=True)
    status: str | None = field("status", "True, False or Unknown.", required=True)
    reason: str | None = field("reason", "Machine-readable reason.")
    message: str | None = field("message", "Human-readable message.")
    last_transition_time: str | None = field("lastTransitionTime", "When the status last changed.")
    severity: str | None = field("severity", "Info, Warning or Error (knative style).")
    observed_generation: int | None = field("observedGeneration", "Generation the condition reflects.")


_CONDITIONS_DOC = "Conditions, keyed by type."


@attrs.define(kw_only=True)
class LifecycleStatus(Model):
    """Instance counts and revisions of an OMENative component (copied from its InferenceReplica)."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    observed_generation: int | None = field("observedGeneration", "Generation of the InferenceReplica observed.")
    current_revision: str | None = field("currentRevision", "ControllerRevision serving traffic.")
    update_revision: str | None = field("updateRevision", "ControllerRevision being rolled out.")
    label_selector: str | None = field("labelSelector", "Selector of the component's pods.")
    replicas: int | None = field("replicas", "Instances in any phase.")
    ready_replicas: int | None = field("readyReplicas", "Instances whose pods are all ready.")
    serving_replicas: int | None = field("servingReplicas", "Instances whose pods are all in rotation.")
    available_replicas: int | None = field("availableReplicas", "Instances available.")
    updated_replicas: int | None = field("updatedReplicas", "Instances on the update revision.")
    updated_ready_replicas: int | None = field("updatedReadyReplicas", "Ready Instances on the update revision.")
    conditions: list[Condition] | None = field("conditions", _CONDITIONS_DOC, list_map_keys=("type",))
    rollout_hold: JSON | None = field("rolloutHold", "The gate that last held the rollout (gate, reason, target, "
                                      "since).", preserve_unknown=True)


@attrs.define(kw_only=True)
class ComponentTrafficTarget(Model):
    """One revision's share of a component's traffic, by its revision Service."""

    revision_name: str | None = field("revisionName", "The revision's Service, `<isvc>-<component>-rev-<hash>`.")
    percent: int | None = field("percent", "The revision's weight; the entries of a component add up to 100.",
                                minimum=0, maximum=100)
    tag: str | None = field("tag", "canary or stable during a canary, else latest or previous. Cosmetic.")
    latest_revision: bool | None = field("latestRevision", "True for the newest revision.")
    pairing_protocol: str | None = field("pairingProtocol", "The revision's prefill-decode pairing protocol.")


_REVISION_SERVICE = " revision Service (`<isvc>-<component>-rev-<hash>`)"


@attrs.define(kw_only=True)
class ComponentStatus(Model):
    """Status of one component."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    url: str | None = field("url", "URL of the component's Service.")
    lifecycle: LifecycleStatus | None = field("lifecycle", "OMENative Instance counts and conditions.")
    latest_ready_revision: str | None = field(
        "latestReadyRevision", "The" + _REVISION_SERVICE + " of the newest revision with a ready Instance.")
    latest_rolledout_revision: str | None = field(
        "latestRolledoutRevision", "The" + _REVISION_SERVICE + " of the newest revision every Instance has reached.")
    previous_rolledout_revision: str | None = field(
        "previousRolledoutRevision", "The" + _REVISION_SERVICE + " latestRolledoutRevision named before it last "
        "moved.")
    traffic: list[ComponentTrafficTarget] | None = field(
        "traffic", "Each revision's weight: a canary's recorded weights, else the replica's share of serving "
        "Instances.")
    canary: JSON | None = field("canary", "The canary of the unit this component is the entry of.",
                                preserve_unknown=True)
    scale_target_ref: JSON | None = field("scaleTargetRef", "What an autoscaler targets for this component.",
                                          preserve_unknown=True)


@attrs.define(kw_only=True)
class InferenceServiceStatus(Model):
    """Observed state of an InferenceService."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    observed_generation: int | None = field("observedGeneration", "Generation observed.")
    url: str | None = field("url", "Where the InferenceService serves.")
    address: JSON | None = field("address", "Cluster-internal address.", preserve_unknown=True)
    conditions: list[Condition] | None = field("conditions", _CONDITIONS_DOC, list_map_keys=("type",))
    components: dict[str, ComponentStatus] | None = field("components", "Status per component.")
    canary: JSON | None = field("canary", "The entrypoint component's canary (the router's, else the engine's), "
                                "as OME's alias of status.components.<entrypoint>.canary.", preserve_unknown=True)


@attrs.define(kw_only=True)
class InferenceService(Model):
    api_version: str | None = field("apiVersion", "ome.io/v1beta1")
    kind: str | None = field("kind", "InferenceService")
    metadata: JSON | None = field("metadata", "Object metadata.")
    spec: InferenceServiceSpec | None = field("spec", "Desired state.")
    status: InferenceServiceStatus | None = field("status", "Observed state.")


# --------------------------------------------------------------------------------------------------- runtimes


@attrs.define(kw_only=True)
class ModelFormat(Model):
    """A name and version, with how a version is compared."""

    name: str | None = field("name", "Name (safetensors, transformers, ...).", required=True)
    version: str | None = field("version", "Version.")
    operator: str | None = field("operator", "How the runtime's version compares with the model's.",
                                 enum=("Equal", "GreaterThan", "GreaterThanOrEqual"), default="Equal")
    weight: int | None = field("weight", "Weight in runtime selection scoring.", default=1)


@attrs.define(kw_only=True)
class SupportedModelFormat(Model):
    """A model format a runtime serves."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    name: str | None = field("name", "Legacy format name.")
    version: str | None = field("version", "Legacy format version.")
    model_type: str | None = field("modelType", "Legacy model type.")
    model_format: ModelFormat | None = field("modelFormat", "Format of the weights.")
    model_framework: ModelFormat | None = field("modelFramework", "Framework of the model.")
    model_architecture: str | None = field("modelArchitecture", "Architecture (LlamaForCausalLM, ...).")
    quantization: str | None = field("quantization", "Quantization (fp8, int4, ...).")
    auto_select: bool | None = field("autoSelect", "Whether automatic runtime selection may pick this format.")
    priority: int | None = field("priority", "Priority in automatic selection.", minimum=1)


@attrs.define(kw_only=True)
class ModelSizeRange(Model):
    """Model sizes a runtime serves, in parameters (500M, 7B, 1T)."""

    min: str | None = field("min", "Smallest size.")
    max: str | None = field("max", "Largest size.")


@attrs.define(kw_only=True)
class ServingRuntimeSpec(Model):
    """How to run models: supported formats and the engine, decoder and router templates."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    supported_model_formats: list[SupportedModelFormat] | None = field("supportedModelFormats",
                                                                       "Model formats this runtime serves.")
    model_size_range: ModelSizeRange | None = field("modelSizeRange", "Model sizes this runtime serves.")
    disabled: bool | None = field("disabled", "A disabled runtime is never used.")
    protocol_versions: list[str] | None = field("protocolVersions", "Protocols served (openAI, ...).")
    scheduler_name: str | None = field("schedulerName", "Scheduler for every component's pods.")
    engine_config: EngineSpec | None = field("engineConfig", "Engine template.")
    decoder_config: EngineSpec | None = field("decoderConfig", "Decoder template.")
    router_config: RouterSpec | None = field("routerConfig", "Router template.")


@attrs.define(kw_only=True)
class ServingRuntime(Model):
    api_version: str | None = field("apiVersion", "ome.io/v1beta1")
    kind: str | None = field("kind", "ServingRuntime or ClusterServingRuntime")
    metadata: JSON | None = field("metadata", "Object metadata.")
    spec: ServingRuntimeSpec | None = field("spec", "Desired state.")
    status: JSON | None = field("status", "Observed state.")


# --------------------------------------------------------------------------------------------------- models


@attrs.define(kw_only=True)
class StorageSpec(Model):
    """Where the model's weights come from and where they live on nodes."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    storage_uri: str | None = field("storageUri", "Source of the weights (hf://, oci://, pvc://, ...).",
                                    required=True)
    path: str | None = field("path", "Where the weights are on each node (mounted read-only into the pods).")
    key: str | None = field("key", "Secret with the credentials for the source.")
    node_selector: dict[str, str] | None = field("nodeSelector", "Nodes to download the weights to.")


@attrs.define(kw_only=True)
class BaseModelSpec(Model):
    """A model: its weights and what they are."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    model_format: ModelFormat | None = field("modelFormat", "Format of the weights.")
    model_type: str | None = field("modelType", "Model type.")
    model_framework: ModelFormat | None = field("modelFramework", "Framework and its version.")
    model_architecture: str | None = field("modelArchitecture", "Architecture.")
    quantization: str | None = field("quantization", "Quantization.")
    model_parameter_size: str | None = field("modelParameterSize", "Size in parameters (8.03B).")
    model_capabilities: list[str] | None = field("modelCapabilities", "Capabilities (TEXT_TO_TEXT, ...).")
    storage: StorageSpec | None = field("storage", "Where the weights are.", required=True)
    display_name: str | None = field("displayName", "Display name.")
    version: str | None = field("version", "Version.")
    disabled: bool | None = field("disabled", "A disabled model is never served.")
    vendor: str | None = field("vendor", "Vendor.")


@attrs.define(kw_only=True)
class BaseModelStatus(Model):
    """Where the model is ready."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    state: str | None = field("state", "Creating, Importing, In_Transit, In_Training, Ready or Failed.")
    lifecycle: str | None = field("lifecycle", "Lifecycle state.")
    nodes_ready: list[str] | None = field("nodesReady", "Nodes that have the model.")
    nodes_failed: list[str] | None = field("nodesFailed", "Nodes that failed to get the model.")


@attrs.define(kw_only=True)
class BaseModel(Model):
    api_version: str | None = field("apiVersion", "ome.io/v1beta1")
    kind: str | None = field("kind", "BaseModel or ClusterBaseModel")
    metadata: JSON | None = field("metadata", "Object metadata.")
    spec: BaseModelSpec | None = field("spec", "Desired state.")
    status: BaseModelStatus | None = field("status", "Observed state.")


# --------------------------------------------------------------------------------------------------- replicas


@attrs.define(kw_only=True)
class ParentReference(Model):
    """The InferenceService that owns an InferenceReplica."""

    name: str | None = field("name", "Name of the InferenceService.", required=True)


@attrs.define(kw_only=True)
class Runner(Model):
    """One role in an Instance: default (the only pod), leader, or worker."""

    name: str | None = field("name", "default, leader or worker.", enum=("default", "leader", "worker"),
                             required=True)
    size: int | None = field("size", "Pods of this runner in each Instance (1 for default and leader).", minimum=1)
    template: JSON | None = field("template", "Pod template (metadata and spec) of this runner's pods.",
                                  preserve_unknown=True, map_type="atomic")


@attrs.define(kw_only=True)
class Pacing(Model):
    """How a rollout group paces one component."""

    partition: int | None = field("partition", "Instances kept on their current revision (the lowest indexes).",
                                  minimum=0)
    max_unavailable: int | str | None = field("maxUnavailable", f"Instances moving at once: {INT_OR_PERCENT}.",
                                              int_or_string=True)
    rollback_to_revision: str | None = field("rollbackToRevision", "Move every Instance back to this revision "
                                             "(its hash): a canary rollback.")


@attrs.define(kw_only=True)
class InferenceReplicaSpec(Model):
    """Desired state of one component's Instances. A projected replica (parentRef set) is written by omenative from
    its InferenceService: change the InferenceService instead. A standalone replica (no parentRef) is the user's,
    rendered from exactly one template source: runners, or modelRef and/or runtimeRef."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    parent_ref: ParentReference | None = field("parentRef", "The owning InferenceService.")
    component: str | None = field("component", "engine, decoder or router.", enum=("engine", "decoder", "router"),
                                  required=True)
    replicas: int | None = field("replicas", "Desired Instances, set through the scale subresource by the "
                                 "autoscaler.", minimum=0)
    min_ready_seconds: int | None = field("minReadySeconds", "Seconds a pod must be Ready to be available.",
                                          minimum=0)
    topology_key: str | None = field("topologyKey", "Gang co-location node label.")
    topology_spread: str | None = field("topologySpread", "Spread policy.", enum=("Preferred", "Required"))
    topology_spread_key: str | None = field("topologySpreadKey", "Node label of spread domains.")
    pairing_protocol: str | None = field("pairingProtocol", "Prefill-decode pairing token.", max_length=63,
                                         pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
    runners: list[Runner] | None = field("runners", "Pod templates of an Instance, keyed by runner name.",
                                         list_map_keys=("name",))
    model_ref: ReplicaModelRef | None = field("modelRef", "Standalone only: the model to serve, rendered with the "
                                              "runtimeRef's runtime or the one selected for the model.")
    runtime_ref: ReplicaRuntimeRef | None = field("runtimeRef", "Standalone only: the runtime whose piece for the "
                                                  "component renders the pods (with no model mounted, unless "
                                                  "modelRef is set).")
    lifecycle: LifecycleSpec | None = field("lifecycle", "Effective lifecycle policies.")
    autoscaler: ComponentAutoscaler | None = field("autoscaler", "Effective autoscaler.")
    pacing: Pacing | None = field("pacing", "Pacing set by the InferenceService's rollout group; absent, the "
                                  "component rolls out on its own.")
    paused: bool | None = field("paused", "Stop creating and updating Instances.")
    pause_mode: str | None = field("pauseMode", "Recover (default) keeps repairing; Freeze stops repairs too.",
                                   enum=("Recover", "Freeze"))
    revision_history_limit: int | None = field("revisionHistoryLimit", "ControllerRevisions kept besides live "
                                               "ones.", minimum=1)


@attrs.define(kw_only=True)
class LastFailure(Model):
    """The most recent failure of an Instance."""

    pod_name: str | None = field("podName", "Pod that failed.")
    container_name: str | None = field("containerName", "Container that failed.")
    reason: str | None = field("reason", "OOMKilled, CrashLoopBackOff, PodFailed, Unschedulable, ...")
    exit_code: int | None = field("exitCode", "Exit code of the container.")
    message: str | None = field("message", "What happened.")
    time: str | None = field("time", "When.")


@attrs.define(kw_only=True)
class InstanceOperation(Model):
    """Work in flight on an Instance, recorded before it starts so a restarted controller carries it on."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    id: str | None = field("id", "Idempotency key.")
    type: str | None = field("type", "Create, Update, Restart, Delete or Migrate.",
                             enum=("Create", "Update", "Restart", "Delete", "Migrate"))
    step: str | None = field("step", "Step within the operation.")
    started_at: str | None = field("startedAt", "When it started.")
    retry_count: int | None = field("retryCount", "Attempts made before this one.", minimum=0)
    deadline: str | None = field("deadline", "When it fails if not done; absent when no timeout is configured.")
    reason: str | None = field("reason", "Why it started.")
    waiting: str | None = field("waiting", "What outside the Instance holds it, with its readiness clock stopped: "
                                "QuotaExceeded, Unschedulable, PodGroupTerminating, Paused, ...")
    capacity_refused_at: str | None = field("capacityRefusedAt", "When the API server last refused one of its pods "
                                            "for lack of quota.")
    target_revision: str | None = field("targetRevision", "Revision the operation moves to.")
    surge_index: int | None = field("surgeIndex", "Index of the Instance that replaces this one (SurgeThenDrain).")
    strategy: str | None = field("strategy", "Update strategy the operation runs under, pinned when it starts.")


@attrs.define(kw_only=True)
class InstanceStatus(Model):
    """One Instance: its phase, revisions, pod counts and last failure."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    index: int | None = field("index", "The Instance's index.", required=True, minimum=0)
    incarnation: int | None = field("incarnation", "Raised by one each time the Instance's pods are recreated.")
    phase: str | None = field("phase", "What the Instance is doing.", enum=INSTANCE_PHASES)
    running_revision: str | None = field("runningRevision", "Revision the pods run.")
    target_revision: str | None = field("targetRevision", "Revision the Instance should run.")
    pod_count: int | None = field("podCount", "Pods present.")
    serving_pod_count: int | None = field("servingPodCount", "Pods in rotation.")
    available_pod_count: int | None = field("availablePodCount", "Pods available.")
    conditions: list[Condition] | None = field("conditions", _CONDITIONS_DOC, list_map_keys=("type",))
    operation: InstanceOperation | None = field("operation", "Work in flight.")
    last_failure: LastFailure | None = field("lastFailure", "Most recent failure; kept after recovery.")
    announced: list[str] | None = field("announced", "One-time warnings already emitted, as reason@episode.")
    ready_since: str | None = field("readySince", "When every pod of the Instance was last serving.")
    active_ordinal: int | None = field(
        "activeOrdinal", "Which of two pod-name slots (0 or 1) holds a single-pod Instance's pod: a SurgeThenDrain "
        "update creates the new pod in the other slot, drains the old one, then moves here. Absent means 0.",
        minimum=0, maximum=1)
    admitted: bool | None = field("admitted", "False while a pod of the Instance is held by a scheduling gate (Kueue "
                                  "admits it by removing the gate): its readiness clock is stopped. Absent once every "
                                  "pod is admitted.")
    restart_baseline: dict[str, int] | None = field(
        "restartBaseline", "Serving-container restarts each pod had when the Instance became Ready (only pods that "
        "had any); restarts beyond them trigger the restart policy.")


@attrs.define(kw_only=True)
class RetryBlock(Model):
    """Failed updates to one target revision: attempts made, when the next may start, or Held."""

    target_revision: str | None = field("targetRevision", "The revision (ControllerRevision name).", required=True)
    state: str | None = field("state", "Backoff, RetryInProgress or Held.",
                              enum=("Backoff", "RetryInProgress", "Held"))
    attempts_started: int | None = field("attemptsStarted", "Attempts started on the revision.", minimum=0)
    next_retry_at: str | None = field("nextRetryAt", "When the next attempt may start (Backoff).")
    first_failure_at: str | None = field("firstFailureAt", "When the first counted failure happened.")
    last_failure_at: str | None = field("lastFailureAt", "When the last counted failure happened.")
    reason: str | None = field("reason", "The last failure's reason (ImagePullBackOff, ...).")


@attrs.define(kw_only=True)
class RolloutHold(Model):
    """The gate that last held a component's rollout."""

    gate: str | None = field("gate", "Pairing, Ratio, Sequential, Budget, RetryBlock, Held or Plan.")
    reason: str | None = field("reason", "Why.")
    target: str | None = field("target", "The revision the rollout moves to.")
    since: str | None = field("since", "Since when the gate holds (kept while gate and target stay).")


@attrs.define(kw_only=True)
class MigrationStatus(Model):
    """One migration request's record: where it is, and how it ended."""

    request_uuid: str | None = field("requestUUID", "The request's ID (the annotation's suffix).", required=True)
    trigger: str | None = field("trigger", "Manual: a migration request; Auto: a relocation (born Relocated).",
                                enum=("Manual", "Auto"))
    source_instance: int | None = field("sourceInstance", "The Instance moved away.", minimum=0)
    surge_instance: int | None = field("surgeInstance", "The replacement's index, once allocated.", minimum=0)
    allocated_at: str | None = field("allocatedAt", "When the replacement got its index: the move started.")
    from_node: str | None = field("fromNode", "The node to leave.")
    hint_target_nodes: list[str] | None = field("hintTargetNodes", "Nodes the replacement prefers.")
    phase: str | None = field("phase", "Where the migration is.", enum=(
        "Accepted", "SurgePending", "SurgeReady", "Draining", "Completed", "Failed", "Relocated"))
    attempt: int | None = field("attempt", "A relocation's number (Auto): N of autoMigrate.maxAttempts.", minimum=1)
    reason: str | None = field("reason", "The requester's reason, or what a relocation left (Auto).")
    message: str | None = field("message", "What it waits for, or how it ended.")
    requested_by: str | None = field("requestedBy", "Who asked.")
    started_at: str | None = field("startedAt", "When it was accepted.")
    deadline: str | None = field("deadline", "When a migration that has not ended fails.")
    completed_at: str | None = field("completedAt", "When it ended.")
    succeeded: bool | None = field("succeeded", "Whether it completed.")


@attrs.define(kw_only=True)
class InferenceReplicaStatus(Model):
    """Observed state of a component's Instances. Counts are of Instances."""

    __schema_preserve_unknown__: ClassVar[bool] = True
    observed_generation: int | None = field("observedGeneration", "Generation observed.")
    replicas: int | None = field("replicas", "Instances in any phase.")
    ready_replicas: int | None = field("readyReplicas", "Instances whose pods are all ready.")
    serving_replicas: int | None = field("servingReplicas", "Instances whose pods are all in rotation.")
    available_replicas: int | None = field("availableReplicas", "Instances whose pods are all available.")
    updated_replicas: int | None = field("updatedReplicas", "Instances on the update revision.")
    updated_ready_replicas: int | None = field("updatedReadyReplicas", "Ready Instances on the update revision.")
    current_revision: str | None = field("currentRevision", "ControllerRevision serving traffic.")
    update_revision: str | None = field("updateRevision", "ControllerRevision being rolled out.")
    collision_count: int | None = field("collisionCount", "Salt for revision hashes after a name collision.")
    label_selector: str | None = field("labelSelector", "Selector of the Instances' pods (scale subresource).")
    instance_statuses: list[InstanceStatus] | None = field(
        "instanceStatuses", "One row per Instance, keyed by index (the dense encoding).", list_map_keys=("index",))
    instance_status_encoding: str | None = field(
        "instanceStatusEncoding", "ColumnarV2 when the rows are in instanceStatusColumns.", enum=("ColumnarV2",))
    instance_status_columns: JSON | None = field(
        "instanceStatusColumns", "The rows in the compact columnar encoding: values shared by many Instances are "
        "written once with the Instances' indexes as ranges (0-8,10); fields only some Instances have are listed "
        "per Instance.", preserve_unknown=True)
    conditions: list[Condition] | None = field("conditions", _CONDITIONS_DOC, list_map_keys=("type",))
    retry_blocks: list[RetryBlock] | None = field(
        "retryBlocks", "Revisions whose updates failed: retried with backoff, then held.",
        list_map_keys=("targetRevision",))
    rollout_hold: RolloutHold | None = field("rolloutHold", "The gate that last held the rollout.")
    migrations: list[MigrationStatus] | None = field(
        "migrations", "Migration records, one per request: those running, and those ended within the audit window.",
        list_map_keys=("requestUUID",))
    traffic: list[ComponentTrafficTarget] | None = field(
        "traffic", "Each revision with serving Instances and its share of them, by revision Service.")


@attrs.define(kw_only=True)
class InferenceReplica(Model):
    api_version: str | None = field("apiVersion", "ome.io/v1beta1")
    kind: str | None = field("kind", "InferenceReplica")
    metadata: JSON | None = field("metadata", "Object metadata.")
    spec: InferenceReplicaSpec | None = field("spec", "Desired state.")
    status: InferenceReplicaStatus | None = field("status", "Observed state.")


def spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj.get("spec") or {})
