"""The rollout progress deadline (off by default; --rollout-progress-deadline): a group rollout whose new Instances
can never start is rolled back once it made no progress for the deadline, with an event and a condition, and the
rejected revision is held until another appears."""

from __future__ import annotations

import json

from kubernetes_asyncio import client

from tests.conftest import NodeFactory, describe_namespace
from tests.support.cluster import ControlPlane
from tests.support.omenative import inline_component, inline_service, install_crds, start_controller, stop_controller
from tests.support.wait import wait_for


async def test_a_stalled_group_rollout_is_rolled_back(control_plane: ControlPlane, api: client.ApiClient,
                                                      namespace: str, sim_nodes: NodeFactory) -> None:
    kubectl = control_plane.kubectl
    await install_crds(control_plane)
    await sim_nodes("gpu")
    process = await start_controller(control_plane, "--namespace", namespace, "--rollout-progress-deadline", "5s",
                                     webhook=False)
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    try:
        isvc = inline_service("stall", namespace, engine=inline_component(1, image="example.invalid/server:1"),
                              decoder=inline_component(1, image="example.invalid/server:1"))
        isvc["spec"]["rollout"] = {"groups": [{"components": ["engine", "decoder"]}]}
        await kubectl("apply", "-f", "-", stdin=json.dumps(isvc))
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/stall", "-n", namespace,
                            "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await describe()
        # The new revision's pods can never be scheduled: no node has the label.
        patch = {"spec": {comp: {"runner": {"image": "example.invalid/server:2"},
                                 "nodeSelector": {"omenative-test/nowhere": "true"}} for comp in ("engine", "decoder")}}
        await kubectl("patch", "inferenceservice", "stall", "-n", namespace, "--type", "merge", "-p", json.dumps(patch))

        async def rolled_back() -> dict[str, object] | None:
            got = json.loads((await kubectl("get", "inferenceservice", "stall", "-n", namespace, "-o",
                                            "json")).stdout).get("status") or {}
            cond = next((c for c in got.get("conditions") or [] if c["type"] == "RolloutProgressing"), {})
            return got if cond.get("reason") == "ProgressDeadlineExceeded" and \
                (got.get("rollout") or {}).get("lastRun", {}).get("outcome") == "RolledBack" else None

        status = await wait_for(rolled_back, timeout=90, what="the stalled rollout rolled back", describe=describe)
        rejected = {e["component"] for e in status["rollout"]["rejectedRevisions"]}  # type: ignore[index]
        assert rejected == {"engine", "decoder"}
        messages = await control_plane.event_messages(namespace, "RolloutProgressDeadlineExceeded")
        assert len(messages) == 1 and "no progress for 5s" in messages[0], messages

        async def back_on_the_old_image() -> bool:
            pods = json.loads((await kubectl("get", "pods", "-n", namespace, "-o", "json")).stdout)["items"]
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            return len(live) == 2 and all(p["status"].get("phase") == "Running" and
                                          p["spec"]["containers"][0]["image"] == "example.invalid/server:1"
                                          for p in live)

        await wait_for(back_on_the_old_image, timeout=90, what="both components back on the old image",
                       describe=describe)
        hold = status["components"]["engine"]["lifecycle"]["rolloutHold"]  # type: ignore[index]
        assert hold["gate"] == "Held", hold
    finally:
        await kubectl("delete", "inferenceservice", "stall", "-n", namespace, "--wait=false")
        await stop_controller(control_plane, process)
