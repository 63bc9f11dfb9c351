"""Names of the objects omenative creates. They are contracts: users' scripts and the router's selectors use them."""

from __future__ import annotations

import hashlib

MAX_DNS_LABEL = 63


def replica_name(isvc: str, component: str) -> str:
    """InferenceReplica, Service, HorizontalPodAutoscaler and PodDisruptionBudget of a component."""
    return f"{isvc}-{component}"


def headless_service_name(isvc: str, component: str) -> str:
    return f"{isvc}-{component}-headless"


def pod_name(isvc: str, component: str, index: int, runner: str, ordinal: int) -> str:
    return f"{isvc}-{component}-{index}-{runner}-{ordinal}"


def instance_subdomain(isvc: str, component: str, index: int) -> str:
    return f"{isvc}-{component}-{index}"


def podgroup_name(isvc: str, component: str, index: int) -> str:
    return f"{isvc}-{component}-{index}"


def revision_name(isvc: str, component: str, revision_hash: str) -> str:
    return f"{isvc}-{component}-{revision_hash}"


def revision_hash_of(isvc: str, component: str, controller_revision: object) -> str:
    """The hash at the end of a ControllerRevision's name (as status.currentRevision names it); "" for a name of
    another component, or none."""
    prefix = revision_name(isvc, component, "")
    name = str(controller_revision or "")
    return name[len(prefix):] if name.startswith(prefix) else ""


def revision_service_name(isvc: str, component: str, revision_hash: str) -> str:
    """A revision's own Service (OME's per-revision Service): what status.traffic, the analysis templates'
    {{.CanaryService}} and OME_<PEER>_REVISION_ENDPOINT name."""
    return f"{isvc}-{component}-rev-{revision_hash}"


def revision_headless_service_name(isvc: str, component: str, revision_hash: str) -> str:
    return f"{revision_service_name(isvc, component, revision_hash)}-headless"


def leader_address(isvc: str, component: str, index: int) -> str:
    """The leader's DNS name through the component's headless Service (resolves once the leader has an IP)."""
    return f"{pod_name(isvc, component, index, 'leader', 0)}.{headless_service_name(isvc, component)}"


def router_rbac_name(isvc: str) -> str:
    """ServiceAccount, Role and RoleBinding the router's service discovery runs with."""
    return f"{isvc}-router"


def _shorten(name: str, keep: int) -> str:
    return f"{hashlib.sha256(name.encode()).hexdigest()[:8]}-{name[-keep:]}"


def cluster_model_label(model: str) -> str:
    """Node label the model agent sets where a ClusterBaseModel is (Ready, Updating, Failed).

    A name longer than 32 characters is shortened to the first 8 hex digits of its SHA-256 and its last 23
    characters, as OME does, so the label key stays valid.
    """
    part = model if len(model) <= 32 else _shorten(model, 23)
    return f"models.ome.io/clusterbasemodel.{part}"


def namespaced_model_label(namespace: str, model: str) -> str:
    """Node label for a namespaced BaseModel; shortened when namespace and name exceed 38 characters."""
    if len(namespace) + len(model) <= 38:
        return f"models.ome.io/{namespace}.basemodel.{model}"
    return f"models.ome.io/{_shorten(namespace, 10)}.basemodel.{_shorten(model, 10)}"


def longest_pod_name(isvc: str, component: str, max_index: int, workers: int) -> str:
    """The longest pod (host) name an Instance of this shape can get, for admission's length check.

    A multi-pod one numbers its workers from 0 ("leader" and "worker" are the same length).
    """
    if workers:
        return pod_name(isvc, component, max_index, "worker", workers - 1)
    return pod_name(isvc, component, max_index, "default", 0)


def max_instance_index(isvc: str, component: str, workers: int) -> int:
    """The highest Instance index whose pod names still fit a DNS label (-1 when not even index 0 does). Names grow
    with the index's digits: a name with room for d digits allows indexes up to 10**d - 1."""
    room = MAX_DNS_LABEL - (len(longest_pod_name(isvc, component, 0, workers)) - 1)
    return 10 ** room - 1 if room > 0 else -1


def max_replicas_for_names(isvc: str, component: str, workers: int) -> int:
    """The most Instances a component may be asked for so that every child name fits: indexes reach up to twice
    the count during surges and migrations (2 * replicas - 1), the same room admission keeps for maxReplicas."""
    return (max_instance_index(isvc, component, workers) + 1) // 2
