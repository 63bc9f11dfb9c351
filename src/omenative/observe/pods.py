"""Facts about a pod, read from its status as the kubelet (or KWOK) reports it. Pure: a pod dict in, facts out."""

from __future__ import annotations

from typing import Any

import attrs

from omenative.api import constants as c
from omenative.api.times import parse_time
from omenative.obj import Obj, strip_server_fields

WEDGED_REASONS = frozenset({
    "CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError", "CreateContainerError",
    "InvalidImageName", "RunContainerError",
})


def condition(pod: Obj, kind: str) -> Obj | None:
    return next((cond for cond in (pod.get("status") or {}).get("conditions") or [] if cond.get("type") == kind),
                None)


def is_true(pod: Obj, kind: str) -> bool:
    cond = condition(pod, kind)
    return cond is not None and cond.get("status") == "True"


def labels(pod: Obj) -> dict[str, str]:
    return dict((pod.get("metadata") or {}).get("labels") or {})


@attrs.frozen
class ContainerRestart:
    container: str
    restarts: int
    reason: str
    exit_code: int | None
    finished_at: str | None


@attrs.frozen
class PodFacts:
    name: str
    uid: str
    runner: str
    ordinal: int  # ome.io/pod-ordinal: a worker's place in its runner, or a single pod's name slot (0 or 1)
    incarnation: int
    orphan: bool  # no ome.io/instance-incarnation label: no attempt of the Instance made it
    revision: str
    node: str | None
    phase: str
    terminating: bool
    deletion_at: float | None  # deletionTimestamp: the request plus the pod's grace period
    scheduled: bool
    unschedulable_since: float | None  # when the scheduler last refused it, while it is still refused
    unschedulable_message: str | None
    containers_ready: bool
    ready: bool
    ready_since: float | None
    serving_gate: bool | None  # None: the gate condition was never written
    restarts: tuple[ContainerRestart, ...]
    wedged: tuple[str, str, str] | None  # (container, reason, message) of a container stuck waiting
    created: float | None
    has_ip: bool
    reason: str  # the pod's own status reason (Evicted, ...)
    message: str
    finalizers: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()  # scheduling gates (Kueue's admission): the scheduler does not look at it yet
    # Every container runs the image its spec names (an in-place update is done once the kubelet restarted them).
    images_current: bool = True

    @property
    def terminal(self) -> bool:
        return self.phase in ("Failed", "Succeeded")

    @property
    def serving(self) -> bool:
        return self.containers_ready and bool(self.serving_gate) and not self.terminating

    def available(self, now: float, min_ready_seconds: int) -> bool:
        """Listed on the headless Service (it has an address and is not terminating), and Ready for
        minReadySeconds when that is set."""
        if self.terminating or not self.has_ip or self.terminal:
            return False
        if min_ready_seconds <= 0:
            return True
        return self.ready and self.ready_since is not None and now - self.ready_since >= min_ready_seconds

    def main_restarts(self) -> ContainerRestart | None:
        """The restart record of the serving container (sidecar and init restarts do not count)."""
        return next((r for r in self.restarts if r.container == c.MAIN_CONTAINER), None)


def _int_label(values: dict[str, str], key: str, default: int = 0) -> int:
    try:
        return int(values.get(key, default))
    except ValueError:
        return default


def pod_facts(pod: Obj) -> PodFacts:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    values = labels(pod)
    scheduled_cond = condition(pod, "PodScheduled")
    unschedulable = scheduled_cond is not None and scheduled_cond.get("status") == "False" and \
        scheduled_cond.get("reason") == "Unschedulable"
    ready_cond = condition(pod, "Ready")
    gate = condition(pod, c.SERVING_GATE)
    restarts: list[ContainerRestart] = []
    wedged: tuple[str, str, str] | None = None
    for cs in status.get("containerStatuses") or []:
        count = int(cs.get("restartCount") or 0)
        terminated = (cs.get("lastState") or {}).get("terminated") or {}
        if count:
            restarts.append(ContainerRestart(cs.get("name", ""), count, terminated.get("reason") or "Error",
                                             terminated.get("exitCode"), terminated.get("finishedAt")))
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in WEDGED_REASONS and wedged is None:
            wedged = (cs.get("name", ""), waiting["reason"], waiting.get("message") or "")
    return PodFacts(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        runner=values.get(c.LABEL_RUNNER, c.RUNNER_DEFAULT),
        ordinal=_int_label(values, c.LABEL_POD_ORDINAL, 0),
        incarnation=_int_label(values, c.LABEL_INCARNATION, 1),
        orphan=c.LABEL_INCARNATION not in values,
        revision=values.get(c.LABEL_REVISION_HASH, ""),
        node=(pod.get("spec") or {}).get("nodeName"),
        gates=tuple(str(g.get("name")) for g in (pod.get("spec") or {}).get("schedulingGates") or []
                    if isinstance(g, dict)),
        phase=status.get("phase") or "Pending",
        terminating=bool(meta.get("deletionTimestamp")),
        deletion_at=parse_time(meta.get("deletionTimestamp")),
        scheduled=bool((pod.get("spec") or {}).get("nodeName")),
        unschedulable_since=parse_time(scheduled_cond.get("lastTransitionTime")) if unschedulable and
        scheduled_cond else None,
        unschedulable_message=scheduled_cond.get("message") if unschedulable and scheduled_cond else None,
        containers_ready=is_true(pod, "ContainersReady"),
        ready=is_true(pod, "Ready"),
        ready_since=parse_time(ready_cond.get("lastTransitionTime")) if ready_cond and
        ready_cond.get("status") == "True" else None,
        serving_gate=None if gate is None else gate.get("status") == "True",
        restarts=tuple(restarts),
        wedged=wedged,
        created=parse_time(meta.get("creationTimestamp")),
        has_ip=bool(status.get("podIP")),
        reason=status.get("reason") or "",
        message=status.get("message") or "",
        finalizers=tuple(meta.get("finalizers") or ()),
        images_current=images_current(pod),
    )


def images_current(pod: Obj) -> bool:
    """Every container's status reports the image its spec names (none reported yet counts as not current)."""
    wanted = {str(x.get("name")): str(x.get("image")) for x in (pod.get("spec") or {}).get("containers") or []
              if isinstance(x, dict) and x.get("image")}
    if not wanted:
        return True  # a pod read without its containers (an older cache entry): nothing to compare
    running = {str(x.get("name")): str(x.get("image")) for x in (pod.get("status") or {}).get("containerStatuses")
               or [] if isinstance(x, dict) and x.get("image")}
    return all(name in running and normalized_image(running[name]) == normalized_image(image)
               for name, image in wanted.items())


def _restarts(pod: Obj) -> dict[str, int]:
    status = pod.get("status") or {}
    return {s.get("name", ""): int(s.get("restartCount") or 0)
            for s in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])}


def pod_got_worse(old: Obj, new: Obj) -> bool:
    """Whether a pod change is a failure its controller should act on at once rather than in the next batch: the pod
    is being deleted, ended or lost its node, restarted a container, or stopped being ready."""
    if new["metadata"].get("deletionTimestamp") and not old["metadata"].get("deletionTimestamp"):
        return True
    phase = (new.get("status") or {}).get("phase")
    if phase != (old.get("status") or {}).get("phase") and phase in ("Failed", "Succeeded", "Unknown"):
        return True
    before = _restarts(old)
    if any(count > before.get(name, 0) for name, count in _restarts(new).items()):
        return True
    return is_true(old, "Ready") and not is_true(new, "Ready")


# The cached pods keep only the fields read here (`pod_facts`, `pod_got_worse`) and by the controllers' indexes:
# `slim_pod` is the pods cache's transform. A field read anywhere must be in these lists.
POD_SPEC_READ = ("nodeName", "schedulerName", "readinessGates", "schedulingGates")
CONTAINER_SPEC_READ = ("name", "image")  # an in-place update compares and sets the images
POD_STATUS_READ = ("phase", "reason", "message", "conditions", "podIP")
# Of a container's status: its restarts, why its last run ended, and why it is waiting (a wedged pull or crash loop).
CONTAINER_STATUS_READ = {"state": ("waiting", ("reason", "message")),
                         "lastState": ("terminated", ("reason", "exitCode", "finishedAt"))}


def _slim_container_status(status: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: status[k] for k in ("name", "restartCount", "image") if k in status}
    for field, (kind, keep) in CONTAINER_STATUS_READ.items():
        part = (status.get(field) or {}).get(kind) if isinstance(status.get(field), dict) else None
        if isinstance(part, dict):
            out[field] = {kind: {k: part[k] for k in keep if k in part}}
    return out


def slim_pod(obj: Obj) -> Obj:
    """The pods' transform: only the fields the controllers read. The containers, with their environment, commands
    and probes, are most of a model server pod's size and never read back (the pod's revision is in its labels);
    of the status, the host and pod addresses, start times, images and container IDs are unique to each pod and
    never read either (a pod's address only as whether it has one)."""
    strip_server_fields(obj)
    spec = obj.get("spec")
    if isinstance(spec, dict):
        slim_spec = {k: spec[k] for k in POD_SPEC_READ if k in spec}
        if isinstance(containers := spec.get("containers"), list):
            slim_spec["containers"] = [{k: x[k] for k in CONTAINER_SPEC_READ if k in x} for x in containers
                                       if isinstance(x, dict)]
        obj["spec"] = slim_spec
    status = obj.get("status")
    if isinstance(status, dict):
        slim = {k: status[k] for k in POD_STATUS_READ if k in status}
        for field in ("initContainerStatuses", "containerStatuses"):
            if isinstance(statuses := status.get(field), list):
                slim[field] = [_slim_container_status(x) for x in statuses if isinstance(x, dict)]
        obj["status"] = slim
    return obj


def normalized_image(image: str) -> str:
    """An image name as the kubelet reports it in a container's status: `nginx:1.25` is
    `docker.io/library/nginx:1.25`, and an image without a tag is `:latest`."""
    name, _, digest = image.partition("@")
    first = name.split("/", 1)[0]
    if "/" not in name or ("." not in first and ":" not in first and first != "localhost"):
        name = f"docker.io/{name}"
    if name.startswith("docker.io/") and name.count("/") == 1:
        name = "docker.io/library/" + name.removeprefix("docker.io/")
    if not digest and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return f"{name}@{digest}" if digest else name
