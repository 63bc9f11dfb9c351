"""Fields of OME's update strategies that omenative honors as OME documents them, on the multi-node guide's
lifecycle example: `rollingUpdate.partition` holds the lowest-indexed Instances on their revision with the `Staged`
reason until it is lifted, and `ome.io/revision-history-limit` prunes idle ControllerRevisions, never one in use."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from omenative.api import constants as c
from tests.e2e.test_lifecycle import Deployment, deploy  # noqa: F401  (the fixture)
from tests.support.controller import ControllerProcess
from tests.support.wait import wait_for

IMAGES = [f"docker.io/lmsysorg/sglang:v0.5.{n}-cu129-amd64" for n in (6, 7, 8)]
Obj = dict[str, Any]


async def staged_on_new_revision(d: Deployment, before: str) -> Obj:
    """Waits until the replica moved what the partition allows onto a revision other than `before`."""
    async def staged() -> Obj | None:
        status = (await d.replica()).get("status") or {}
        ready = next((x for x in status.get("conditions") or [] if x["type"] == "Ready"), {})
        if status.get("updateRevision") != before and ready.get("reason") == "Staged":
            return status
        return None

    return await wait_for(staged, timeout=180, what="the update staged at the partition", describe=d.describe)


async def images_by_index(d: Deployment) -> dict[int, set[str]]:
    pods = json.loads((await d.kubectl("get", "pods", "-n", d.namespace, "-l", f"{c.LABEL_ISVC}={d.name}", "-o",
                                       "json")).stdout)["items"]
    out: dict[int, set[str]] = {}
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        index = int(pod["metadata"]["labels"][c.LABEL_INSTANCE_INDEX])
        out.setdefault(index, set()).update(x["image"] for x in pod["spec"]["containers"])
    return out


async def revisions(d: Deployment) -> set[str]:
    out = await d.kubectl("get", "controllerrevisions", "-n", d.namespace, "-l", f"{c.LABEL_ISVC}={d.name}", "-o",
                          "jsonpath={.items[*].metadata.name}")
    return set(out.stdout.split())


async def test_a_partition_stages_an_update_and_idle_revisions_are_pruned_past_the_limit(
    omenative: ControllerProcess, deploy: Callable[..., Awaitable[Deployment]],  # noqa: F811
) -> None:
    d = await deploy("staged")
    first = str(((await d.replica())["status"])["updateRevision"])
    old_image = d.runtime["spec"]["engineConfig"]["leader"]["runner"]["image"]
    d.isvc["metadata"]["annotations"] = {c.ANN_REVISION_HISTORY_LIMIT: "1"}
    d.isvc["spec"]["engine"]["lifecycle"]["updateStrategy"]["rollingUpdate"]["partition"] = 1
    await d.apply()
    out = await d.kubectl("get", "inferencereplica", f"{d.name}-engine", "-n", d.namespace, "-o",
                          "jsonpath={.spec.revisionHistoryLimit}")
    assert out.stdout == "1"

    # Each new image moves one Instance and holds instance 0, the lowest index, on the first revision.
    seen = [first]
    for image in IMAGES:
        await d.set_image(image)
        status = await staged_on_new_revision(d, seen[-1])
        seen.append(str(status["updateRevision"]))
        ready = await d.kubectl("get", "inferencereplica", f"{d.name}-engine", "-n", d.namespace, "-o",
                                'jsonpath={.status.conditions[?(@.type=="Ready")].message}')
        assert ready.stdout == (f"Staged at partition 1: 1/2 Instances on {seen[-1]}, 1 held on the prior "
                                "revision")
        images = await images_by_index(d)
        assert images[0] == {old_image}, images
        assert [v for k, v in images.items() if k != 0] == [{image}], images
    # Kept: the first revision (instance 0 still runs it, though it is the oldest), the update revision, and one
    # idle revision, the newest; the idle one before it was deleted.
    await wait_for(lambda: _equal(revisions(d), {seen[0], seen[2], seen[3]}), timeout=30,
                   what="the history pruned to one idle revision", describe=d.describe)

    # Lifting the partition finishes the rollout; then the first revision is idle and older than the one kept.
    d.isvc["spec"]["engine"]["lifecycle"]["updateStrategy"]["rollingUpdate"]["partition"] = 0
    await d.apply()
    await d.rolled_out(IMAGES[-1])
    out = await d.kubectl("wait", "--for=condition=Ready", f"inferencereplica/{d.name}-engine", "-n", d.namespace,
                          "--timeout=60s", check=False)
    assert out.returncode == 0, out.output
    await wait_for(lambda: _equal(revisions(d), {seen[2], seen[3]}), timeout=30,
                   what="the first revision pruned once idle", describe=d.describe)


async def _equal(got: Awaitable[set[str]], want: set[str]) -> bool:
    return await got == want
