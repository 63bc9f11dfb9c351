"""An Instance's pods: `{isvc}-{component}-{index}-{runner}-{ordinal}`, from its runners' templates.

Each pod gets OME's labels, the `OME_*` environment contract (in every container but init containers, before and
over any variable of the same name), a hostname and subdomain so the leader's DNS name resolves through the
component's headless Service, and the `ome.io/serving` readiness gate: a pod is Ready, and in rotation, only while
omenative holds that gate True. Runtimes written for LeaderWorkerSet keep working: the `LWS_*` variables a container
uses are set from their OME equivalents.
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

import attrs

from omenative.api import constants as c
from omenative.api import naming

JSONDict = dict[str, Any]
SPREAD_REQUIRED, SPREAD_PREFERRED = "Required", "Preferred"
_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@attrs.frozen(kw_only=True)
class InstanceRef:
    isvc: str
    namespace: str
    component: str
    index: int
    incarnation: int
    revision: str
    replicas: int  # the component's desired Instances (OME_COMPONENT_REPLICAS)
    podgroup: str | None = None  # set for multi-pod Instances when PodGroups are in use
    owner: JSONDict | None = None  # ownerReference to the InferenceReplica
    avoid_nodes: tuple[str, ...] = ()  # a migration's surge never runs on the node it leaves
    prefer_nodes: tuple[str, ...] = ()  # and prefers the request's hints
    # topologySpread: (node label, whenUnsatisfiable) for the Instance's anchor pod, from the InferenceReplica's spec
    # when the pod is created; not part of the revision, so a change shapes new placements without a rollout.
    spread: tuple[str, str] | None = None
    # A single pod's name slot, 0 or 1 (the row's activeOrdinal, or the other one while a SurgeThenDrain update
    # brings the new pod up beside the old): `{isvc}-{component}-{index}-default-{ordinal}`.
    ordinal: int = 0
    # The other components a pod reaches by their Service (OME_<PEER>_ENDPOINT), when the InferenceService has
    # rollout groups; set when the pod is created, not part of the revision (no rollout when a component is added).
    peers: tuple[str, ...] = ()
    # (peer, revision hash) for each peer revision the pod pairs with (OME_<PEER>_REVISION_ENDPOINT), set likewise.
    peer_revisions: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class PodSlot:
    runner: str
    ordinal: int  # position within the runner (the pod name's suffix)
    rank: int  # position within the Instance: leader 0, worker k is k+1

    def name(self, ref: InstanceRef) -> str:
        return naming.pod_name(ref.isvc, ref.component, ref.index, self.runner, self.ordinal)


def slots(runners: list[JSONDict], ordinal: int = 0) -> list[PodSlot]:
    """The pods of one Instance: `leader-0` and `worker-0..size-1`, or one `default-{ordinal}` (a single pod's
    name slot alternates between 0 and 1 across SurgeThenDrain updates)."""
    if multi_pod(runners):
        workers = int(next((r for r in runners if r["name"] == c.RUNNER_WORKER), {}).get("size") or 0)
        return [PodSlot(c.RUNNER_LEADER, 0, 0)] + [PodSlot(c.RUNNER_WORKER, k, k + 1) for k in range(workers)]
    return [PodSlot(c.RUNNER_DEFAULT, ordinal, 0)]


def multi_pod(runners: list[JSONDict]) -> bool:
    """A leader with workers (a gang), not a single pod."""
    return any(r.get("name") == c.RUNNER_LEADER for r in runners)


def instance_env(ref: InstanceRef, slot: PodSlot, runners: list[JSONDict]) -> list[JSONDict]:
    by_name = {r["name"]: r for r in runners}
    multi = c.RUNNER_LEADER in by_name
    runner_size = int(by_name[slot.runner].get("size") or 1) if slot.runner == c.RUNNER_WORKER else 1
    env = [
        ("OME_INFERENCESERVICE_NAME", ref.isvc),
        ("OME_COMPONENT", ref.component),
        ("OME_COMPONENT_REPLICAS", str(ref.replicas)),
        ("OME_INSTANCE_INDEX", str(ref.index)),
        ("OME_RUNNER", slot.runner),
        ("OME_RUNNER_SIZE", str(runner_size)),
        ("OME_RUNNER_INDEX", str(slot.ordinal if slot.runner == c.RUNNER_WORKER else 0)),
        ("OME_INSTANCE_SUBDOMAIN", naming.instance_subdomain(ref.isvc, ref.component, ref.index)),
    ]
    if multi:
        pod_count = 1 + int(by_name.get(c.RUNNER_WORKER, {}).get("size") or 0)
        env += [
            ("OME_LEADER_ADDRESS", naming.leader_address(ref.isvc, ref.component, ref.index)),
            ("OME_INSTANCE_POD_RANK", str(slot.rank)),
            ("OME_INSTANCE_POD_COUNT", str(pod_count)),
        ]
    env += [(f"OME_{peer.upper()}_ENDPOINT", f"{naming.replica_name(ref.isvc, peer)}.{ref.namespace}.svc.cluster.local")
            for peer in ref.peers]
    env += [(f"OME_{peer.upper()}_REVISION_ENDPOINT",
             f"{naming.revision_service_name(ref.isvc, peer, revision)}.{ref.namespace}.svc.cluster.local")
            for peer, revision in ref.peer_revisions]
    return [{"name": k, "value": v} for k, v in env]


# What a LeaderWorkerSet sets, and the OME variable with the same meaning.
LWS_EQUIVALENTS = {
    "LWS_LEADER_ADDRESS": "OME_LEADER_ADDRESS",
    "LWS_GROUP_SIZE": "OME_INSTANCE_POD_COUNT",
    "LWS_WORKER_INDEX": "OME_INSTANCE_POD_RANK",
}


def referenced_vars(container: JSONDict) -> set[str]:
    """Names used as $(NAME) in a container's command, args and env values (expanded by the kubelet)."""
    texts = [*(container.get("command") or []), *(container.get("args") or [])]
    texts += [e.get("value") or "" for e in container.get("env") or [] if isinstance(e, dict)]
    return {m for text in texts for m in _VAR_REF.findall(str(text))}


def _with_env(container: JSONDict, ome_env: list[JSONDict]) -> JSONDict:
    out = copy.deepcopy(container)
    values = {e["name"]: e["value"] for e in ome_env}
    extra = [{"name": lws, "value": values[ome]} for lws, ome in LWS_EQUIVALENTS.items()
             if ome in values and lws in referenced_vars(container)]
    ours = ome_env + extra
    names = {e["name"] for e in ours}
    # OME's variables come first, so the container's own variables can refer to them.
    out["env"] = ours + [e for e in container.get("env") or [] if e.get("name") not in names]
    return out


KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_RETRIABLE_IN_GROUP = "kueue.x-k8s.io/retriable-in-group"


def kueue_group_name(ref: InstanceRef) -> str:
    """The Kueue pod group of one attempt of an Instance: `{isvc}-{component}-{index}-{incarnation}`, shortened
    with a hash when it would not fit a label value."""
    name = f"{naming.instance_subdomain(ref.isvc, ref.component, ref.index)}-{ref.incarnation}"
    if len(name) <= naming.MAX_DNS_LABEL:
        return name
    return f"{name[:50]}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def render_pod(ref: InstanceRef, slot: PodSlot, runners: list[JSONDict]) -> JSONDict:
    by_name = {r["name"]: r for r in runners}
    template = by_name[slot.runner]["template"]
    spec = copy.deepcopy(template.get("spec") or {})
    meta = template.get("metadata") or {}
    name = slot.name(ref)
    ome_env = instance_env(ref, slot, runners)
    spec["containers"] = [_with_env(x, ome_env) for x in spec.get("containers") or []]
    if ref.avoid_nodes or ref.prefer_nodes:
        spec["affinity"] = with_placement(spec.get("affinity") or {}, ref.avoid_nodes, ref.prefer_nodes)
    if ref.spread and slot.rank == 0:
        spec["topologySpreadConstraints"] = with_spread(spec.get("topologySpreadConstraints") or [], ref, slot)
    spec["hostname"] = name
    spec["subdomain"] = naming.headless_service_name(ref.isvc, ref.component)
    gates = [g for g in spec.get("readinessGates") or [] if g.get("conditionType") != c.SERVING_GATE]
    spec["readinessGates"] = [*gates, {"conditionType": c.SERVING_GATE}]
    labels = dict(meta.get("labels") or {})
    labels.update({
        c.LABEL_ISVC: ref.isvc,
        c.LABEL_COMPONENT: ref.component,
        c.LABEL_MANAGED_BY: c.MANAGED_BY_OMENATIVE,
        c.LABEL_INSTANCE_INDEX: str(ref.index),
        c.LABEL_INCARNATION: str(ref.incarnation),
        c.LABEL_RUNNER: slot.runner,
        c.LABEL_POD_ORDINAL: str(slot.ordinal),
        c.LABEL_REVISION_HASH: ref.revision,
    })
    if ref.podgroup:
        labels[c.LABEL_POD_GROUP] = ref.podgroup
    annotations = dict(meta.get("annotations") or {})
    if labels.get(KUEUE_QUEUE) and c.RUNNER_LEADER in by_name:
        # Kueue admits the gang as one workload, as the scheduler places it as one PodGroup: a pod group per
        # attempt, of every pod. omenative replaces a gang whole, at the next incarnation (a new group), so the
        # group is not retriable: once none of its pods runs (the attempt was removed or replaced), Kueue finishes
        # its workload and releases its quota. (A serving group is never finished: the quota of a removed Instance
        # would stay taken.)
        labels[KUEUE_POD_GROUP] = kueue_group_name(ref)
        annotations[KUEUE_GROUP_TOTAL] = str(pod_count(runners))
        annotations[KUEUE_RETRIABLE_IN_GROUP] = "false"
    metadata: JSONDict = {"name": name, "namespace": ref.namespace, "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    if ref.owner:
        metadata["ownerReferences"] = [ref.owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def spread_of(spec: JSONDict, multi_pod: bool) -> tuple[str, str] | None:
    """An InferenceReplica's topologySpread as (node label, whenUnsatisfiable), or None without one: the key is
    topologySpreadKey, else (for a leader and workers) topologyKey; a single pod has no co-location key."""
    policy = spec.get("topologySpread")
    key = spec.get("topologySpreadKey") or (spec.get("topologyKey") if multi_pod else None)
    if policy not in (SPREAD_REQUIRED, SPREAD_PREFERRED) or not key:
        return None
    return str(key), "DoNotSchedule" if policy == SPREAD_REQUIRED else "ScheduleAnyway"


def with_spread(constraints: list[JSONDict], ref: InstanceRef, slot: PodSlot) -> list[JSONDict]:
    """The template's constraints and one that spreads the component's anchor pods (one per Instance) across the
    key's domains with a skew of at most one. A constraint of the template on the same key is the user's: kept."""
    assert ref.spread is not None
    key, when = ref.spread
    if any(x.get("topologyKey") == key for x in constraints if isinstance(x, dict)):
        return copy.deepcopy(constraints)
    return [*copy.deepcopy(constraints), {
        "maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {c.LABEL_ISVC: ref.isvc, c.LABEL_COMPONENT: ref.component,
                                          c.LABEL_RUNNER: slot.runner}},
    }]


def with_placement(affinity: JSONDict, avoid: tuple[str, ...], prefer: tuple[str, ...]) -> JSONDict:
    """The template's affinity, with `avoid` excluded from every required node term (terms are ORed, so each needs
    it) and `prefer` added as a preferred term. Node names, matched by field: hostname labels can differ."""
    out = copy.deepcopy(affinity)
    node = out.setdefault("nodeAffinity", {})
    if avoid:
        required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        terms = required.get("nodeSelectorTerms") or [{}]
        exclude = {"key": "metadata.name", "operator": "NotIn", "values": list(avoid)}
        required["nodeSelectorTerms"] = [{**term, "matchFields": [*(term.get("matchFields") or []), exclude]}
                                         for term in terms]
    if prefer:
        node.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
            {"weight": 100, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": list(prefer)}]}})
    return out


def pod_count(runners: list[JSONDict]) -> int:
    """Pods per Instance (a multi-pod Instance's PodGroup minMember)."""
    return len(slots(runners))


def render_instance(ref: InstanceRef, runners: list[JSONDict]) -> list[JSONDict]:
    return [render_pod(ref, slot, runners) for slot in slots(runners, ref.ordinal)]


def scale_limit(replica: JSONDict) -> tuple[int, str] | None:
    """(the most Instances whose names fit, a name that the next index would give) of an InferenceReplica."""
    spec = replica.get("spec") or {}
    runners = [r for r in spec.get("runners") or [] if isinstance(r, dict)]
    isvc = str((spec.get("parentRef") or {}).get("name") or replica["metadata"]["name"])
    component = str(spec.get("component") or c.ENGINE)
    if not runners:
        return None
    workers = max(pod_count(runners) - 1, 0)
    cap = naming.max_replicas_for_names(isvc, component, workers)
    return cap, naming.longest_pod_name(isvc, component, 2 * cap + 1, workers)
