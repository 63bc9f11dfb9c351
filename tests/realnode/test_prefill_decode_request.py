"""The prefill-decode guide (../shared/seeds/003_816e9764a7e4e549.txt) on real nodes: step 4's port-forward to
svc/llama-pd and its curl answered through the stand-in router by one engine (prefill) and the decoder, each a host-
network pod on a node of its own; a SurgeThenDrain update of the engine under a client sending a request every
100 ms, none of which fails; and step 5, after which requests reach the new engine."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import write_yaml
from tests.e2e.test_serve_prefill_decode_model import LLAMA_LEARNED
from tests.realnode.conftest import REAL_NODES
from tests.realnode.forward import (
    FORWARDING,
    SteadyClient,
    content,
    curl,
    ingress_on,
    port_forward,
    through_gateway,
)
from tests.support.catalog import CATALOG, PD_SEED, seed_yaml_blocks
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.wait import wait_for

pytestmark = pytest.mark.e2e

NS = "llama-demo"
ISVC = "llama-pd"
MODEL = "llama-3-2-1b-instruct"
RUNTIME = "srt-llama-3-2-1b-instruct-pd"
# Step 4's request, as the guide writes it.
REQUEST: dict[str, object] = {
    "model": "meta-llama/Llama-3.2-1B-Instruct",
    "messages": [{"role": "user", "content": "What is Kubernetes? Answer in one sentence."}], "max_tokens": 100}
# A single pod's SurgeThenDrain update moves it to its Instance's other name slot (`default-0` <-> `default-1`).
ANSWER = re.compile(r"stand-in router: prefill on (llama-pd-engine-\d+-default-[01]), decode on "
                    r"(llama-pd-decoder-\d+-default-[01])")


def served_by(text: str) -> tuple[str, str]:
    found = ANSWER.search(text)
    assert found, text
    return found.group(1), found.group(2)


async def test_step_4_through_the_router_an_update_without_errors_and_step_5(
    real_cluster: ControlPlane, real_omenative: ControllerProcess, tmp_path: Path,
) -> None:
    kubectl = real_cluster.kubectl

    async def listed(component: str) -> list[dict[str, Any]]:
        """The component's pods that are not going away."""
        got = json.loads((await kubectl("get", "pods", "-n", NS, "-l", f"component={component}",
                                        "-o", "json")).stdout)["items"]
        return [p for p in got if not p["metadata"].get("deletionTimestamp")]

    async def pods(component: str) -> dict[str, str]:
        """The component's pods by name, with their nodes."""
        return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in await listed(component)}

    async def uids(component: str) -> set[str]:
        return {p["metadata"]["uid"] for p in await listed(component)}

    async def describe() -> str:
        state = await kubectl("get", "pods,inferencereplicas", "-n", NS, "-o", "wide")
        router = await kubectl("logs", "-n", NS, "-l", "component=router", "--tail=20", check=False)
        before = await kubectl("logs", "-n", NS, "-l", "component=router", "--tail=20", "--previous", check=False)
        events = await kubectl("get", "events", "-n", NS, "--sort-by=.lastTimestamp", check=False)
        return (f"{state.output}\nrouter log:\n{router.output}\nits previous container's:\n{before.output}\n"
                f"events:\n{events.output}")

    # Step 1: the model Ready on every real node, and the guide's runtime.
    await kubectl("apply", "--server-side", "-f", str(CATALOG / "models" / "meta" / "Llama-3.2-1B-Instruct.yaml"))
    await kubectl("patch", "clusterbasemodel", MODEL, "--type", "merge", "-p", json.dumps({"spec": LLAMA_LEARNED}))
    await kubectl("patch", "clusterbasemodel", MODEL, "--subresource", "status", "--type", "merge",
                  "-p", json.dumps({"status": {"state": "Ready", "lifecycle": "Ready"}}))
    await kubectl("apply", "-f", str(CATALOG / "runtimes" / "srt" / "meta" / "llama-3-2-1b-instruct-pd-rt.yaml"))
    ready_nodes = await kubectl("get", "nodes", "-l", f"models.ome.io/clusterbasemodel.{MODEL}=Ready", "-o", "name")
    assert len(ready_nodes.stdout.split()) == REAL_NODES == 4  # three for step 4, a fourth for step 5

    # Steps 2-3, as the guide writes them: each host-network engine and decoder pod on a node of its own.
    (isvc,) = seed_yaml_blocks(PD_SEED)
    await kubectl("create", "namespace", NS)
    try:
        await kubectl("apply", "-f", write_yaml(tmp_path, "llama-pd.yaml", isvc))
        # Ready follows the engine alone, so the guide waits for DecoderReady and RouterReady too.
        for condition in ("Ready", "DecoderReady", "RouterReady"):
            out = await kubectl("wait", f"--for=condition={condition}", f"inferenceservice/{ISVC}", "-n", NS,
                                "--timeout=400s", check=False)
            assert out.returncode == 0, out.output + await describe()
        engines, decoders, engine_uids = await pods("engine"), await pods("decoder"), await uids("engine")
        assert len(engines) == 2 and len(decoders) == 1
        assert len({*engines.values(), *decoders.values()}) == 3, await describe()

        async with port_forward(real_cluster, ISVC, NS) as printed:
            # Step 4: the router ran the prefill on one of the engine pods and the decode on the decoder pod.
            assert printed[:2] == FORWARDING
            try:
                answer = await curl(real_cluster, REQUEST)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{await describe()}") from None
            assert answer["object"] == "chat.completion" and answer["model"] == "meta-llama/Llama-3.2-1B-Instruct"
            prefill, decode = served_by(content(answer))
            assert prefill in engines and decode in decoders

            # An update of the engine (a new runtime revision) by SurgeThenDrain, the default: each new engine pod
            # serves (on the spare node) before the old one drains, so a client sending a request every 100 ms
            # through the port-forward sees no error.
            before = json.loads((await kubectl("get", "inferencereplica", f"{ISVC}-engine", "-n", NS, "-o",
                                               "json")).stdout)["status"]
            async with SteadyClient(REQUEST, interval=0.1) as client:
                await kubectl("patch", "clusterservingruntime", RUNTIME, "--type", "json", "-p", json.dumps([
                    {"op": "add", "path": "/spec/engineConfig/runner/env",
                     "value": [{"name": "STANDIN_REVISION", "value": "2"}]}]))

                async def rolled_out() -> bool:
                    got = json.loads((await kubectl("get", "inferencereplica", f"{ISVC}-engine", "-n", NS, "-o",
                                                    "json")).stdout)["status"]
                    return got["updateRevision"] != before["updateRevision"] and \
                        got["currentRevision"] == got["updateRevision"] and got.get("updatedReplicas") == 2 and \
                        got.get("readyReplicas") == 2 and got.get("replicas") == 2 and \
                        len(await pods("engine")) == 2

                await wait_for(rolled_out, timeout=420, interval=1, what="both engine Instances replaced",
                               describe=describe)
                # Both replaced: each Instance's new pod came up in its other name slot before the old one drained.
                # The router picks an engine per request at random, and the last new pod may have entered rotation
                # a moment ago: the client goes on until both new pods have served.
                updated = await pods("engine")

                async def new_pods_served() -> bool:
                    return set(updated) <= {served_by(text)[0] for text in client.answers}

                await wait_for(new_pods_served, timeout=60, interval=0.5, what="both new engine pods serving",
                               describe=describe)
            assert not (await uids("engine")) & engine_uids, (updated, engines)
            assert client.failures == [], (client.failures[:10], [line for line in printed if "rror" in line][:10],
                                           await describe())
            assert len(client.answers) > 300, len(client.answers)  # more than a minute of requests
            used = {served_by(text)[0] for text in client.answers}
            assert set(engines) <= used and set(updated) <= used, used  # old pods, then new ones, served

            # Step 5: a third engine Instance on the fourth node, which the router finds by its labels.
            await kubectl("patch", "inferenceservice", ISVC, "-n", NS, "--type", "merge",
                          "-p", '{"spec":{"engine":{"minReplicas":3,"maxReplicas":3}}}')
            out = await kubectl("wait", "--for=jsonpath={.status.readyReplicas}=3", f"inferencereplica/{ISVC}-engine",
                                "-n", NS, "--timeout=300s", check=False)
            assert out.returncode == 0, out.output + await describe()
            (new,) = set(await pods("engine")) - set(updated)

            async def reached_new_engine() -> bool:
                return served_by(content(await curl(real_cluster, REQUEST)))[0] == new

            await wait_for(reached_new_engine, timeout=30, interval=0.5, what=f"a request served by {new}",
                           describe=describe)
        assert len({*(await pods("engine")).values(), *(await pods("decoder")).values()}) == 4
        # Minutes of probes later, no container was restarted (a probe the stand-ins did not answer would have).
        restarts = {p["metadata"]["name"]: s["restartCount"] for component in ("engine", "decoder", "router")
                    for p in await listed(component) for s in p["status"].get("containerStatuses") or []}
        assert set(restarts.values()) == {0}, restarts

        # With ingress creation on, step 4 through the Gateway (Traefik, a real one): the route goes to the router,
        # which answers as through the port-forward.
        host = await ingress_on(real_cluster, NS, ISVC)
        prefill, decode = served_by(content(await through_gateway(real_cluster, host, REQUEST)))
        assert prefill in await pods("engine") and decode in await pods("decoder")
    finally:
        await kubectl("delete", "namespace", NS, "--wait=true", "--timeout=180s", check=False)
        await kubectl("delete", "clusterservingruntime", RUNTIME, "--ignore-not-found")

