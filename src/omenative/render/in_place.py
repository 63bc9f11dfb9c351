"""In-place updates (OME's update-strategies page): under InPlaceIfPossible and InPlaceOnly, a single-pod Instance
whose revisions differ only in the images of regular containers keeps its pod; omenative sets the new images on it
and the kubelet restarts those containers. Labels and annotations of the template are not compared: a label added
there reaches the pod only when the pod is recreated, as in OME. Pure."""

from __future__ import annotations

import copy
from typing import Any

from omenative.api import constants as c

JSONDict = dict[str, Any]
IN_PLACE_STEP = "InPlace"  # the operation step of an Instance whose pod is updated in place


def _without_images(runners: list[JSONDict]) -> list[JSONDict]:
    out = []
    for runner in runners:
        runner = copy.deepcopy(runner)
        template: JSONDict = runner["template"] if isinstance(runner.get("template"), dict) else {}
        template.pop("metadata", None)
        for container in (template.get("spec") or {}).get("containers") or []:
            if isinstance(container, dict):
                container.pop("image", None)
        out.append(runner)
    return out


def images_only(old: list[JSONDict] | None, new: list[JSONDict] | None) -> bool:
    """Whether a single-pod Instance on `old` reaches `new` by changing container images alone."""
    if not old or not new or len(new) != 1 or new[0].get("name") != c.RUNNER_DEFAULT:
        return False
    return _without_images(old) == _without_images(new)


def container_images(pod: JSONDict) -> dict[str, str]:
    return {str(x.get("name")): str(x.get("image")) for x in (pod.get("spec") or {}).get("containers") or []
            if isinstance(x, dict)}


def image_patch(pod: JSONDict, wanted: JSONDict, revision: str) -> JSONDict | None:
    """The strategic-merge patch that moves a pod onto `wanted`'s images and revision label, or None when it is
    there. The pod's UID goes with it, so a patch never lands on a pod that replaced this one."""
    have, want = container_images(pod), container_images(wanted)
    changed = {name: image for name, image in want.items() if have.get(name) != image}
    label = ((pod.get("metadata") or {}).get("labels") or {}).get(c.LABEL_REVISION_HASH)
    if not changed and label == revision:
        return None
    patch: JSONDict = {"metadata": {"uid": pod["metadata"].get("uid"), "labels": {c.LABEL_REVISION_HASH: revision}}}
    if changed:
        patch["spec"] = {"containers": [{"name": name, "image": image} for name, image in sorted(changed.items())]}
    return patch



def mark_not_ready(replica_spec: JSONDict) -> bool:
    """inPlaceUpdateStrategy.markNotReadyDuringLifecycle: the pod leaves rotation before its images change, unless
    it is set to false."""
    strategy = ((replica_spec.get("lifecycle") or {}).get("updateStrategy") or {}).get("inPlaceUpdateStrategy")
    return not (isinstance(strategy, dict) and strategy.get("markNotReadyDuringLifecycle") is False)
