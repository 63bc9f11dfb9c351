"""Names that are contracts with users' scripts: API group, labels, annotations, condition types and reasons.

They follow OME v1.3's documentation (reference/api/labels-and-annotations.md, concepts/omenative/*); keep them exact.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "ome.io"
VERSION: Final = "v1beta1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

PODGROUP_GROUP: Final = "scheduling.x-k8s.io"
PODGROUP_VERSION: Final = "v1alpha1"
PODGROUP_CRD: Final = f"podgroups.{PODGROUP_GROUP}"
# The prometheus-operator's PodMonitor: one per component while its CRD is installed.
PODMONITOR_GROUP: Final = "monitoring.coreos.com"
PODMONITOR_CRD: Final = f"podmonitors.{PODMONITOR_GROUP}"
# KEDA's ScaledObject: one per component of autoscaler class KEDA while its CRD is installed, named as OME names it.
KEDA_GROUP: Final = "keda.sh"
SCALEDOBJECT_CRD: Final = f"scaledobjects.{KEDA_GROUP}"
# The Gateway API's HTTPRoute: one per InferenceService while ingress creation is on and its CRD is installed.
GATEWAY_GROUP: Final = "gateway.networking.k8s.io"
HTTPROUTE_CRD: Final = f"httproutes.{GATEWAY_GROUP}"

# Components
ENGINE: Final = "engine"
DECODER: Final = "decoder"
ROUTER: Final = "router"
COMPONENTS: Final = (ENGINE, DECODER, ROUTER)

# Runners
RUNNER_DEFAULT: Final = "default"
RUNNER_LEADER: Final = "leader"
RUNNER_WORKER: Final = "worker"

# Deployment modes
MODE_OMENATIVE: Final = "OMENative"
MODE_RAW: Final = "RawDeployment"
MODE_MULTINODE: Final = "MultiNode"
MODE_VIRTUAL: Final = "VirtualDeployment"
KNOWN_MODES: Final = (MODE_RAW, MODE_OMENATIVE, MODE_MULTINODE, MODE_VIRTUAL)

# Labels
LABEL_ISVC: Final = "ome.io/inferenceservice"
LABEL_COMPONENT: Final = "component"
LABEL_MANAGED_BY: Final = "ome.io/managed-by"
MANAGED_BY_OMENATIVE: Final = "OMENative"
LABEL_INSTANCE_INDEX: Final = "ome.io/instance-index"
LABEL_INCARNATION: Final = "ome.io/instance-incarnation"
LABEL_RUNNER: Final = "ome.io/runner"
LABEL_POD_ORDINAL: Final = "ome.io/pod-ordinal"
LABEL_REVISION_HASH: Final = "ome.io/revision-hash"
LABEL_PAIRING_PROTOCOL: Final = "ome.io/pairing-protocol"
LABEL_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"
LABEL_APP: Final = "app"
LABEL_SERVING_RUNTIME: Final = "serving-runtime"
LABEL_BASE_MODEL_NAME: Final = "base-model-name"
LABEL_BASE_MODEL_SIZE: Final = "base-model-size"
LABEL_BASE_MODEL_TYPE: Final = "base-model-type"
LABEL_BASE_MODEL_VENDOR: Final = "base-model-vendor"
LABEL_FINE_TUNED_SERVING: Final = "fine-tuned-serving"
COMPONENT_EXTERNAL_SERVICE: Final = "external-service"

# Annotations
ANN_DEPLOYMENT_MODE: Final = "ome.io/deploymentMode"
ANN_CONTROLLER_WRITE: Final = "ome.io/controller-write"
ANN_PARENT_GENERATION: Final = "ome.io/parent-generation"
ANN_TOPOLOGY_KEY: Final = "ome.io/topology-key"
ANN_AUTOSCALER_CLASS: Final = "ome.io/autoscalerClass"
ANN_BASE_MODEL_NAME: Final = "ome.io/base-model-name"
ANN_BASE_MODEL_VENDOR: Final = "ome.io/base-model-vendor"
ANN_BASE_MODEL_FORMAT: Final = "ome.io/base-model-format"
ANN_BASE_MODEL_FORMAT_VERSION: Final = "ome.io/base-model-format-version"
ANN_SERVING_RUNTIME: Final = "ome.io/serving-runtime"
# Operators' requests (OME's concepts/omenative/rollout-groups.md and instance-restart-policy.md), answered once and
# removed: on the InferenceService, the rollout's; on an InferenceReplica, the reset and the release.
ANN_ROLLOUT_PAUSED: Final = "ome.io/rollout-paused"
ANN_ROLLOUT_PROMOTE: Final = "ome.io/rollout-promote"
ANN_ROLLOUT_ROLLBACK: Final = "ome.io/rollout-rollback"
ANN_ROLLOUT_READY_TIMEOUT: Final = "ome.io/rollout-ready-timeout"
ANN_ROLLOUT_REPIN: Final = "ome.io/rollout-repin"
ANN_RESET_INSTANCES: Final = "ome.io/reset-instances"
ANN_REVISION_HISTORY_LIMIT: Final = "ome.io/revision-history-limit"
# Ingress overrides for one InferenceService (OME's labels-and-annotations page, "Ingress").
ANN_INGRESS_DISABLE_CREATION: Final = "ome.io/ingress-disable-creation"
ANN_INGRESS_DOMAIN: Final = "ome.io/ingress-domain"
ANN_INGRESS_DOMAIN_TEMPLATE: Final = "ome.io/ingress-domain-template"
ANN_INGRESS_URL_SCHEME: Final = "ome.io/ingress-url-scheme"
ANN_INGRESS_GATEWAY: Final = "ome.io/ingress-gateway"
ANN_RELEASE_HELD_REVISION: Final = "ome.io/release-held-revision"

# Held on an InferenceReplica while its Instances drain and its pods and PodGroups go (OME's teardown finalizer).
FINALIZER_TEARDOWN: Final = "ome.io/ir-teardown"
# The name an earlier omenative used; released where it is still found.
FINALIZER_LEGACY_DRAIN: Final = "ome.io/drain-instances"

# The readiness gate that puts a pod in rotation.
SERVING_GATE: Final = "ome.io/serving"

# Container name OME's runtimes use for the serving container.
MAIN_CONTAINER: Final = "ome-container"

# Environment
ENV_MODEL_PATH: Final = "MODEL_PATH"
ENV_PARALLELISM_SIZE: Final = "PARALLELISM_SIZE"
GPU_RESOURCE: Final = "nvidia.com/gpu"
