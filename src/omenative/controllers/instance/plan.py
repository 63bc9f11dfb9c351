"""The Instance planner: what to do so an Instance's pods and PodGroup match its row. Pure.

- The PodGroup (multi-pod Instances, when the CRD is installed) is applied before any pod; a Failed PodGroup (a
  pod of a running gang failed) is replaced; one owned by something else blocks the Instance.
- Pods of the row's incarnation are created when missing (once any older pod of the same name is gone); an ended
  pod is deleted and made again while the Instance is being created or restarted.
- Pods of other incarnations, orphans (no incarnation label) and every pod of a Deleting Instance are drained first:
  the `ome.io/serving` gate is set False, and the pod is deleted once no EndpointSlice of the component's Services
  lists it as ready or serving any more (or the operation's deadline passed), so no request is sent to a pod that
  is already going.
- When every pod of the Instance is there with its containers ready, the gate is set True on all of them, so the
  gang enters rotation together.
- A single pod lives in one of two name slots (`ref.ordinal`). While a SurgeThenDrain update brings its new pod up in
  the other slot, the old pod (`keep_ordinal`) is left serving as it is; a pod in neither slot is drained like a pod
  of another incarnation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

from omenative.api.events import Event
from omenative.api.phases import CREATING, DELETING, MIGRATING, READY, RESTARTING, UPDATING
from omenative.api.units import format_duration
from omenative.obj import Obj
from omenative.observe.nodes import GONE, NodeHealth, dead_evidence
from omenative.observe.pods import PodFacts, pod_facts
from omenative.render.in_place import image_patch
from omenative.render.pods import InstanceRef, multi_pod, pod_count, render_pod, slots

DEFAULT_SCHEDULERS = ("", "default-scheduler")


@attrs.frozen(kw_only=True)
class InstanceView:
    ref: InstanceRef
    phase: str
    runners: list[Obj] | None  # the target revision's runners; None when not known yet
    pods: list[Obj]  # every pod with this Instance's index
    podgroup: Obj | None  # the PodGroup in the cache
    podgroup_intent: Obj | None  # the PodGroup to apply (None: no gang scheduling)
    owner_uid: str  # the InferenceReplica's UID, to tell our PodGroup from another's
    scheduler_name: str | None = None  # of the pods; "" and default-scheduler ignore PodGroups
    routed: frozenset[str] = frozenset()  # pods an EndpointSlice of the component's Services still sends to
    drain_deadline: float | None = None  # past it, a drained pod goes even while still routed
    now: float = 0.0
    # The force-delete escalation, when on: (overdueSlack, nodeUnreachableThreshold) in seconds, and the health of
    # the pods' nodes (a node missing from the map is gone).
    force_delete: tuple[float, float] | None = None
    nodes: Mapping[str, NodeHealth] = attrs.field(factory=dict)
    # A create of this attempt has been refused since then for a cause that clears by itself (a full quota), and
    # how long OME lets a gang wait unscheduled (its PodGroup's scheduleTimeoutSeconds; None: as long as it takes).
    refused_since: float | None = None
    gang_timeout: float | None = None
    # An in-place update (the row's operation step InPlace): the pod takes the target revision's images, out of
    # rotation first unless inPlaceUpdateStrategy.markNotReadyDuringLifecycle is false.
    in_place: bool = False
    mark_not_ready: bool = True
    # A failed restart (OME's instances.md): the Instance stays Failed until its pods are ready, and lost ones are
    # replaced; its pods enter rotation once they all are.
    replace_lost: bool = False
    # A single-pod surge's source slot: its pod keeps serving, untouched, until the update moves on to drain it.
    keep_ordinal: int | None = None


@attrs.frozen(kw_only=True)
class InstanceActions:
    apply_podgroup: Obj | None = None
    delete_podgroup: Obj | None = None
    create_pods: tuple[Obj, ...] = ()
    delete_pods: tuple[Obj, ...] = ()
    gates: tuple[tuple[Obj, bool, str], ...] = ()  # (pod, value, reason)
    events: tuple[Event, ...] = ()
    wake_in: float | None = None  # a drain waits for its Services, at most until its deadline
    force_delete_pods: tuple[Obj, ...] = ()  # stuck pods on dead nodes, deleted with no grace
    release_gang: bool = False  # the created members of a partly refused gang are deleted (their GPUs freed)
    patch_pods: tuple[tuple[Obj, Obj], ...] = ()  # (pod, strategic-merge patch): new images set in place
    conflict: str | None = None  # the PodGroup of this name belongs to another owner: the Instance fails

    @property
    def empty(self) -> bool:
        return not (self.apply_podgroup or self.delete_podgroup or self.create_pods or self.delete_pods
                    or self.gates or self.events or self.force_delete_pods or self.patch_pods)


def owned_by(obj: Obj, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


def escalate(view: InstanceView, facts: list[tuple[Obj, PodFacts]]) -> tuple[list[Obj], list[Event], float | None]:
    """The force-delete escalation: a pod stuck Terminating past its deletion deadline plus the slack, with no
    finalizer, on a dead node, while the Instance is removed or updated; or a pod held in phase Unknown on a dead
    node, which keeps a name the Instance needs. (A restart waits for its old pods without it, as in OME.)"""
    if view.force_delete is None:
        return [], [], None
    slack, threshold = view.force_delete
    prefix = f"OMENative component={view.ref.component} instance={view.ref.index}:"
    forced: list[Obj] = []
    events: list[Event] = []
    wakes: list[float] = []
    for pod, f in facts:
        stuck = f.terminating and view.phase in (DELETING, UPDATING)
        unknown = f.phase == "Unknown" and not f.terminating
        if not (stuck or unknown) or not f.node:
            continue
        past = view.now - (f.deletion_at or view.now)
        if stuck:
            if past < slack:
                wakes.append((f.deletion_at or view.now) + slack)
                continue
            if f.finalizers:
                events.append(Event(type="Warning", reason="PodDeleteBlockedByFinalizer", message=(
                    f"{prefix} pod {f.name} is {format_duration(past)} past its own deletion deadline but pinned by "
                    f"finalizers [{' '.join(f.finalizers)}]; OME never strips another controller's finalizer — the "
                    "finalizer owner must resolve it")))
                continue
        evidence, when = dead_evidence(view.nodes.get(f.node, GONE), view.now, threshold)
        if evidence is None:
            if when is not None:
                wakes.append(when)
            continue
        forced.append(pod)
        detail = f"{format_duration(past)} past the pod's own deletion deadline" if stuck else "held in phase Unknown"
        what = "stuck-Terminating pod" if stuck else "pod"
        events.append(Event(type="Warning", reason="PodForceDeleted", message=(
            f"{prefix} force-deleted {what} {f.name} on node {f.node} (evidence={evidence}, {detail})")))
    wake = min(wakes) - view.now if wakes else None
    return forced, events, wake


def plan(view: InstanceView) -> InstanceActions:
    ref = view.ref
    facts = [(pod, pod_facts(pod)) for pod in view.pods]
    alternating = view.runners is not None and not multi_pod(view.runners)

    def elsewhere(f: PodFacts) -> bool:  # a single pod's other name slot
        return alternating and f.ordinal != ref.ordinal

    def kept(f: PodFacts) -> bool:  # the surge source, left serving
        return elsewhere(f) and f.ordinal == view.keep_ordinal and f.incarnation == ref.incarnation and not f.orphan

    current = [(pod, f) for pod, f in facts if f.incarnation == ref.incarnation and not f.terminating
               and not f.orphan and not elsewhere(f)]
    drain = [(pod, f) for pod, f in facts if not f.terminating and
             (f.incarnation != ref.incarnation or f.orphan or view.phase == DELETING or (elsewhere(f) and not kept(f)))]
    gates: list[tuple[Obj, bool, str]] = []
    deletes: list[Obj] = []
    creates: list[Obj] = []
    events: list[Event] = []
    prefix = f"OMENative component={ref.component} instance={ref.index}"
    forced, forced_events, wake_in = escalate(view, facts)
    events += forced_events

    # Drain, then delete, what must go: out of rotation first, deleted once the Services stopped sending to it.
    for pod, f in drain:
        if f.orphan:
            events.append(Event(type="Warning", reason="FoundOrphan", message=(
                f"{prefix} found pod {f.name} without the ome.io/instance-incarnation label; it holds up the "
                "Instance until it is gone, so it is drained and deleted")))
        if f.serving_gate:
            gates.append((pod, False, "Draining"))
        elif f.name in view.routed and (view.drain_deadline is None or view.now < view.drain_deadline):
            if view.drain_deadline is not None:
                wake_in = min(wake_in or math.inf, view.drain_deadline - view.now)
        else:
            deletes.append(pod)

    if view.phase == DELETING:
        podgroup_gone = view.podgroup if view.podgroup is not None and not facts and \
            owned_by(view.podgroup, view.owner_uid) else None
        return InstanceActions(delete_podgroup=podgroup_gone, delete_pods=tuple(deletes), gates=tuple(gates),
                               events=tuple(events), wake_in=wake_in, force_delete_pods=tuple(forced))

    apply_podgroup = delete_podgroup = None
    conflict: str | None = None
    podgroup_ready = True
    if view.podgroup_intent is not None and view.phase in (CREATING, RESTARTING, UPDATING, READY, MIGRATING):
        if view.podgroup is None:
            apply_podgroup = view.podgroup_intent
            podgroup_ready = False
            if view.scheduler_name in DEFAULT_SCHEDULERS:
                events.append(Event(type="Warning", reason="MaybeNoGangScheduler", message=(
                    f"OMENative component={ref.component} created scheduler-plugins PodGroup objects but pod "
                    f"template's spec.schedulerName is \"{view.scheduler_name}\" (default kube-scheduler does not "
                    "enforce PodGroup gang); set runtime.spec.schedulerName to a gang-aware scheduler (e.g. "
                    "scheduler-plugins-scheduler) or install scheduler-plugins as a plugin in the default "
                    "scheduler")))
        elif not owned_by(view.podgroup, view.owner_uid):
            podgroup_ready = False
            conflict = view.podgroup["metadata"]["name"]
            events.append(Event(type="Warning", reason="InstanceFailed", message=(
                f"{prefix} blocked: PodGroupOwnershipConflict: PodGroup {conflict} belongs to another owner")))
        elif (view.podgroup.get("status") or {}).get("phase") == "Failed" and view.phase != READY:
            delete_podgroup = view.podgroup
            podgroup_ready = False
            events.append(Event(type="Warning", reason="PodGroupReset", message=(
                f"{prefix} PodGroup {view.podgroup['metadata']['name']} was Failed; replaced it")))
        elif view.podgroup.get("metadata", {}).get("deletionTimestamp"):
            podgroup_ready = False  # an earlier attempt's PodGroup is still going away
        else:
            apply_podgroup = view.podgroup_intent  # keep it current (a no-op when it already is)

    release = released_gang(view, current)
    if release:
        refused_for = format_duration(view.now - (view.refused_since or view.now))
        events.append(Event(type="Warning", reason="GangReleased", message=(
            f"{prefix} released {len(release)} created pod(s) ({', '.join(sorted(f.name for _, f in release))}): "
            f"the API server has refused the rest of the gang for {refused_for}, longer than a gang may wait "
            "unscheduled; the whole gang is created again")))
        deletes += [pod for pod, _ in release]
    elif (view.phase in (CREATING, RESTARTING, UPDATING) or view.replace_lost) and view.runners is not None:
        by_name = {f.name: (pod, f) for pod, f in facts}
        for slot in slots(view.runners, ref.ordinal):
            name = slot.name(ref)
            existing = by_name.get(name)
            if existing is not None:
                pod, f = existing
                if f.incarnation == ref.incarnation and f.terminal and not f.terminating:
                    deletes.append(pod)
                    events.append(Event(type="Warning", reason="TerminalPodRecycled", message=(
                        f"{prefix} pod {name} ended in phase {f.phase} ({f.reason or 'no reason'}); recreating it")))
                continue  # present, or an older pod of that name still has to go
            if podgroup_ready:
                creates.append(render_pod(ref, slot, view.runners))

    patches: list[tuple[Obj, Obj]] = []
    if view.in_place and view.phase == UPDATING and view.runners is not None:
        wake = in_place(view, current, gates, patches)
        if wake is not None:
            wake_in = min(wake_in or math.inf, wake)

    # The gang enters rotation together, once every pod's containers are ready (after an in-place update: on the
    # new images, which the kubelet reports once it restarted them).
    if (view.phase in (CREATING, RESTARTING, UPDATING, READY, MIGRATING) or view.replace_lost) and \
            view.runners is not None and not patches:
        wanted = pod_count(view.runners)
        live: list[tuple[Obj, PodFacts]] = [(p, f) for p, f in current if not f.terminal]
        moved = not view.in_place or all(f.revision == ref.revision and f.images_current for _, f in live)
        if len(live) >= wanted and moved and all(f.containers_ready for _, f in live):
            gates += [(pod, True, "InstanceReady") for pod, f in live if not f.serving_gate]

    return InstanceActions(apply_podgroup=apply_podgroup, delete_podgroup=delete_podgroup, create_pods=tuple(creates),
                           delete_pods=tuple(deletes), gates=tuple(gates), events=tuple(events), wake_in=wake_in,
                           force_delete_pods=tuple(forced), release_gang=bool(release), patch_pods=tuple(patches),
                           conflict=conflict)


def in_place(view: InstanceView, current: list[tuple[Obj, PodFacts]], gates: list[tuple[Obj, bool, str]],
             patches: list[tuple[Obj, Obj]]) -> float | None:
    """An in-place update of the Instance's pod: out of rotation (its gate False, then no EndpointSlice sending to
    it, or the operation's deadline), then the target revision's images and revision label set on it. Returns when
    to look again while it waits for its Services."""
    assert view.runners is not None
    by_name = {f.name: (pod, f) for pod, f in current if not f.terminal}
    for slot in slots(view.runners, view.ref.ordinal):
        found = by_name.get(slot.name(view.ref))
        if found is None:
            continue  # a lost pod: made again on the target revision by the create above
        pod, f = found
        patch = image_patch(pod, render_pod(view.ref, slot, view.runners), view.ref.revision)
        if patch is None:
            continue
        if view.mark_not_ready and f.serving_gate:
            gates.append((pod, False, "InPlaceUpdate"))
        elif view.mark_not_ready and f.name in view.routed and \
                (view.drain_deadline is None or view.now < view.drain_deadline):
            if view.drain_deadline is not None:
                return view.drain_deadline - view.now
        else:
            patches.append((pod, patch))
    return None


def released_gang(view: InstanceView, current: list[tuple[Obj, PodFacts]]) -> list[tuple[Obj, PodFacts]]:
    """The created members of a gang the API server keeps refusing in part (a quota with room for some of its pods),
    once the refusal has outlasted the wait OME allows an unscheduled gang: they hold nodes (and GPUs) for an
    Instance that cannot start. None of them may serve; the next attempt creates the whole gang again."""
    if view.refused_since is None or view.gang_timeout is None or view.runners is None or \
            view.phase not in (CREATING, RESTARTING, UPDATING) or view.now - view.refused_since < view.gang_timeout:
        return []
    wanted = pod_count(view.runners)
    if wanted < 2 or len(current) >= wanted or any(f.serving_gate for _, f in current):
        return []
    return [(pod, f) for pod, f in current if not f.terminal]
