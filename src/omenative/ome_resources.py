"""OME's resources and its partners' (the scheduler-plugins PodGroup, Prometheus Operator's PodMonitor, KEDA's
ScaledObject), as the
runtime's descriptors, built from the names in `api`: what the controllers, the manager and the webhook read and
write besides Kubernetes' own resources (`kube.resources`)."""

from __future__ import annotations

from omenative.api import constants as c
from omenative.kube.resources import Resource

PODGROUPS = Resource(c.PODGROUP_GROUP, c.PODGROUP_VERSION, "podgroups", "PodGroup")
PODMONITORS = Resource(c.PODMONITOR_GROUP, "v1", "podmonitors", "PodMonitor")
SCALED_OBJECTS = Resource(c.KEDA_GROUP, "v1alpha1", "scaledobjects", "ScaledObject")
HTTPROUTES = Resource(c.GATEWAY_GROUP, "v1", "httproutes", "HTTPRoute")

INFERENCE_SERVICES = Resource(c.GROUP, c.VERSION, "inferenceservices", "InferenceService")
INFERENCE_REPLICAS = Resource(c.GROUP, c.VERSION, "inferencereplicas", "InferenceReplica")
SERVING_RUNTIMES = Resource(c.GROUP, c.VERSION, "servingruntimes", "ServingRuntime")
CLUSTER_SERVING_RUNTIMES = Resource(c.GROUP, c.VERSION, "clusterservingruntimes", "ClusterServingRuntime",
                                    namespaced=False)
BASE_MODELS = Resource(c.GROUP, c.VERSION, "basemodels", "BaseModel")
CLUSTER_BASE_MODELS = Resource(c.GROUP, c.VERSION, "clusterbasemodels", "ClusterBaseModel", namespaced=False)
