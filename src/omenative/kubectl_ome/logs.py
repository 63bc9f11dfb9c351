"""`kubectl ome logs`: the logs of an InferenceService's pods, narrowed by component, Instance or revision.

Selection and container rules follow the reference (reference/kubectl-ome/logs.md): pods labelled
`ome.io/inferenceservice=<name>`, the container `ome-container` (else the pod's only one), one pod after another in
name order, or, with --follow, every stream at once up to --max-log-requests, lines prefixed `[<component>/<pod>]`
when more than one pod matches.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from omenative.api import constants as c
from omenative.api.units import InvalidValue, parse_duration
from omenative.kubectl_ome.cluster import Cluster
from omenative.kubectl_ome.common import CommandError
from omenative.obj import Obj

MAIN_CONTAINER = "ome-container"
_HASH = re.compile(r"^[0-9a-f]{8}$")


class LogsError(Exception):
    """A refusal before any log is read (exit 1)."""


def selector(isvc: str, component: str | None, instance: int, revision: str | None) -> str:
    """The label selector of the pods to read."""
    labels = {c.LABEL_ISVC: isvc}
    if revision:
        if _HASH.match(revision):
            if not component:
                raise LogsError("--revision HASH needs --component (or give the full revision name)")
            labels[c.LABEL_REVISION_HASH] = revision
        else:
            prefix = f"{isvc}-"
            rest = revision[len(prefix):] if revision.startswith(prefix) else ""
            named, _, digest = rest.rpartition("-")
            if named not in c.COMPONENTS or not _HASH.match(digest) or (component and component != named):
                raise LogsError(f"--revision {revision!r} is neither a hash nor {isvc}-<component>-<hash>")
            component, labels[c.LABEL_REVISION_HASH] = named, digest
        labels[c.LABEL_MANAGED_BY] = c.MANAGED_BY_OMENATIVE
    if instance >= 0:
        if not component:
            raise LogsError("--instance needs --component or a full --revision")
        labels[c.LABEL_MANAGED_BY] = c.MANAGED_BY_OMENATIVE
        labels[c.LABEL_INSTANCE_INDEX] = str(instance)
    if component:
        if component not in c.COMPONENTS:
            raise LogsError(f"--component must be one of {', '.join(c.COMPONENTS)}")
        labels[c.LABEL_COMPONENT] = component
    return ",".join(f"{k}={v}" for k, v in labels.items())


def container_of(pod: Obj, asked: str | None) -> str:
    names = [x.get("name") for x in (pod.get("spec") or {}).get("containers") or []]
    if asked:
        if asked not in names:
            raise LogsError(f"container {asked} is not in pod {pod['metadata']['name']}")
        return asked
    if MAIN_CONTAINER in names:
        return MAIN_CONTAINER
    if len(names) == 1 and names[0]:
        return str(names[0])
    raise LogsError(f"pod {pod['metadata']['name']} has no {MAIN_CONTAINER} and several containers: "
                    "choose one with --container")


def prefix(pod: Obj, many: bool) -> str:
    component = (pod["metadata"].get("labels") or {}).get(c.LABEL_COMPONENT, "-")
    return f"[{component}/{pod['metadata']['name']}] " if many else ""


def read_all(pods: list[Obj], containers: dict[str, str], read: Callable[[Obj, str], Iterable[str]],
             out: Any = sys.stdout) -> None:
    """One pod after another, in name order (a pod not on a node yet prints nothing)."""
    many = len(pods) > 1
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        if not (pod.get("spec") or {}).get("nodeName"):
            continue
        for line in read(pod, containers[pod["metadata"]["name"]]):
            out.write(prefix(pod, many) + line + "\n")
        out.flush()


def follow_all(pods: list[Obj], containers: dict[str, str], stream: Callable[[Obj, str], Iterable[str]],
               max_requests: int, out: Any = sys.stdout) -> None:
    """Every pod's stream at once; whole lines, interleaved; ends when all streams end (a failure stops all)."""
    if len(pods) > max_requests:
        raise LogsError(f"you are attempting to follow {len(pods)} log streams, but maximum allowed concurrency is "
                        f"{max_requests}, use --max-log-requests to increase the limit")
    many, lock, failures = len(pods) > 1, threading.Lock(), []
    done = threading.Semaphore(0)

    def pump(pod: Obj) -> None:
        try:
            if not (pod.get("spec") or {}).get("nodeName"):
                return  # not on a node yet: its stream ends at once
            for line in stream(pod, containers[pod["metadata"]["name"]]):
                with lock:
                    out.write(prefix(pod, many) + line + "\n")
                    out.flush()
        except Exception as exc:
            failures.append(exc)
        finally:
            done.release()

    for pod in pods:
        threading.Thread(target=pump, args=(pod,), daemon=True).start()
    for _ in pods:
        done.acquire()
        if failures:
            raise failures[0]  # the other streams are daemon threads: they end with the command


def command(cluster: Cluster, namespace: str, args: argparse.Namespace) -> int:
    try:
        chosen = selector(args.inferenceservice, args.component, args.instance, args.revision)
        pods = cluster.pods_selected(namespace, chosen)
        containers = {p["metadata"]["name"]: container_of(p, args.container) for p in pods}
        options: dict[str, Any] = {}
        if args.tail >= 0:
            options["tail_lines"] = args.tail
        if args.since:
            options["since_seconds"] = max(1, int(parse_duration(args.since)))
        if args.limit_bytes > 0 and not args.follow:
            options["limit_bytes"] = args.limit_bytes

        def read(pod: Obj, container: str, follow: bool = False) -> Iterable[str]:
            return cluster.pod_log(namespace, pod["metadata"]["name"], container, follow, options)

        if args.follow:
            follow_all(pods, containers, lambda pod, name: read(pod, name, True), args.max_log_requests)
        else:
            read_all(pods, containers, read)
    except (LogsError, InvalidValue) as exc:
        raise CommandError(str(exc)) from None
    except KeyboardInterrupt:
        return 1
    return 0
