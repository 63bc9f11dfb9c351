"""The guide "Serve a prefill-decode model" (../shared/seeds/003_816e9764a7e4e549.txt), steps 1 to 5 and its
clean-up, with OME's catalog model and runtime.

Step 4 (a chat completion through the router) needs real model servers; here the entry Service `llama-pd` is
checked to reach the router, and the router's label selectors are evaluated against the API, which is how the router
finds its engine and decoder pods.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from omenative.api.instance_status import decode_rows
from omenative.api.types import InstanceStatus
from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.conftest import ModelAgent, wait_gone, write_yaml
from tests.e2e.test_serve_multi_node_model import table
from tests.support import faults
from tests.support.catalog import CATALOG, PD_SEED, seed_yaml_blocks
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.history import recorded
from tests.support.wait import wait_for

NS = "llama-demo"
MODEL = "llama-3-2-1b-instruct"
RUNTIME = "srt-llama-3-2-1b-instruct-pd"
# What the model agent reads from Llama-3.2-1B-Instruct's config.json.
LLAMA_LEARNED = {
    "modelFormat": {"name": "safetensors", "version": "1.0.0"},
    "modelFramework": {"name": "transformers", "version": "4.45.0.dev0"},
    "modelArchitecture": "LlamaForCausalLM",
    "modelParameterSize": "1.24B",
}
SEED_WARNING = (
    'Warning: runtime "srt-llama-3-2-1b-instruct-pd" does not declare support for model "llama-3-2-1b-instruct" '
    "(runtime srt-llama-3-2-1b-instruct-pd does not support model safetensors: model format "
    "'mt:safetensors:1.0.0:LlamaForCausalLM:transformers:4.45.0.dev0' not in supported formats: framework version "
    "mismatch (model=4.45.0.dev0, runtime=4.43.0)); proceeding because the runtime was named explicitly")
PODS_COLUMNS = ("custom-columns=NAME:.metadata.name,COMPONENT:.metadata.labels.component,"
                'SERVING:.status.conditions[?(@.type=="ome.io/serving")].status,NODE:.spec.nodeName,'
                "UID:.metadata.uid")


def instance_rows(replica: dict[str, Any]) -> list[InstanceStatus]:
    return decode_rows(replica.get("status"))


async def repaired(api: client.ApiClient, kubectl: Any, component: str, condition: str, pod: str,
                   break_it: Callable[[], Awaitable[Any]], describe: Callable[[], Awaitable[str]]) -> None:
    """Breaks one component's only pod and checks the repair: the same pod name comes back at the same
    incarnation, every other pod keeps its UID, the component's condition goes False and back True, and no version
    of the InferenceReplica's status (nor any `kubectl ome instance list` taken meanwhile) shows the Instance Ready
    without its pod."""
    uids = json.loads((await kubectl("get", "pods", "-n", NS, "-o", "json")).stdout)["items"]
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in uids}
    listed: list[tuple[str, str]] = []
    sampling = True

    async def sample() -> None:
        while sampling:
            out = await kubectl("ome", "instance", "list", "llama-pd", "-n", NS, check=False)
            listed.extend((r["PHASE"], r["PODS"]) for r in table(out.stdout) if r["COMP"] == component)

    async with recorded(api, "inferenceservices", NS, "llama-pd") as isvc_history, \
            recorded(api, "inferencereplicas", NS, f"llama-pd-{component}") as replica_history:
        sampler = asyncio.create_task(sample())
        await break_it()

        async def back() -> bool:
            got = json.loads((await kubectl("get", "pod", pod, "-n", NS, "-o", "json", check=False)).stdout or "{}")
            serving = next((c["status"] for c in (got.get("status") or {}).get("conditions") or []
                            if c["type"] == "ome.io/serving"), None)
            if not got or got["metadata"]["uid"] == before[pod] or serving != "True":
                return False
            out = await kubectl("get", "inferenceservice", "llama-pd", "-n", NS, "-o",
                                f'jsonpath={{.status.conditions[?(@.type=="{condition}")].status}}')
            return out.stdout == "True"

        await wait_for(back, timeout=90, what=f"{pod} replaced and {condition} True again", describe=describe)
        sampling = False
        await sampler
    after = json.loads((await kubectl("get", "pods", "-n", NS, "-o", "json")).stdout)["items"]
    now = {p["metadata"]["name"]: p for p in after}
    assert now[pod]["metadata"]["labels"]["ome.io/instance-incarnation"] == "1"  # same incarnation
    assert {n: p["metadata"]["uid"] for n, p in now.items() if n != pod} == \
        {n: u for n, u in before.items() if n != pod}
    statuses = isvc_history.values(lambda o: next((c["status"] for c in o.get("status", {}).get("conditions", [])
                                                   if c["type"] == condition), None))
    assert statuses[0] == "True" and "False" in statuses and statuses[-1] == "True", statuses
    rows = replica_history.values(lambda o: [(r.phase, r.pod_count) for r in instance_rows(o)])
    assert all(phase != "Ready" or count == 1 for versions in rows for phase, count in versions), rows
    assert any(phase != "Ready" for versions in rows for phase, _ in versions), rows
    assert listed and all(phase != "Ready" or pods.endswith("/1") for phase, pods in listed), listed


def selector_arg(args: list[str], flag: str, isvc: str) -> str:
    """A selector flag of the router as the router sees it: $(INFERENCESERVICE_NAME) expanded by the kubelet from
    the downward API (the pod's ome.io/inferenceservice label), label terms joined as kubectl expects."""
    value = args[args.index(flag) + 1].replace("$(INFERENCESERVICE_NAME)", isvc)
    return ",".join(shlex.split(value))


async def test_serve_a_prefill_decode_model(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, NS)  # noqa: E731
    for kind, name in (("clusterbasemodel", MODEL), ("clusterservingruntime", RUNTIME)):
        await kubectl("delete", kind, name, "--ignore-not-found")
    await kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=120s")
    (isvc,) = seed_yaml_blocks(PD_SEED)

    # Four GPU nodes (three for steps 1-4, a fourth for step 5) and a node without the GPU taint for the router.
    gpu = [await sim_nodes("gpu") for _ in range(4)]
    await sim_nodes("cpu", gpus=0, cpus=32, memory="128Gi")

    try:
        # Step 1: the model and the runtime.
        out = await kubectl("get", "clusterbasemodel", MODEL, check=False)
        assert out.stderr.strip() == f'Error from server (NotFound): clusterbasemodels.ome.io "{MODEL}" not found'
        out = await kubectl("get", "clusterservingruntime", RUNTIME, check=False)
        assert out.stderr.strip() == (
            f'Error from server (NotFound): clusterservingruntimes.ome.io "{RUNTIME}" not found')
        await kubectl("create", "namespace", "ome", check=False)
        await kubectl("create", "secret", "generic", "hf-token", "-n", "ome", "--from-literal=token=hf_test",
                      check=False)
        out = await kubectl("apply", "-f", str(CATALOG / "models" / "meta" / "Llama-3.2-1B-Instruct.yaml"))
        assert out.stdout.strip() == f"clusterbasemodel.ome.io/{MODEL} created"
        out = await kubectl("apply", "-f", str(CATALOG / "runtimes" / "srt" / "meta" /
                                                "llama-3-2-1b-instruct-pd-rt.yaml"))
        assert out.stdout.strip() == f"clusterservingruntime.ome.io/{RUNTIME} created"
        await model_agent.downloaded(MODEL, gpu, LLAMA_LEARNED)
        out = await kubectl("wait", "--for=jsonpath={.status.state}=Ready", f"clusterbasemodel/{MODEL}",
                            "--timeout=60s")
        assert out.stdout.strip() == f"clusterbasemodel.ome.io/{MODEL} condition met"
        out = await kubectl("get", "nodes", "-l", f"models.ome.io/clusterbasemodel.{MODEL}=Ready", "-o", "name")
        assert len(out.stdout.split()) == 4

        # Step 2: the InferenceService, admitted with the seed's warning.
        assert (await kubectl("create", "namespace", NS)).stdout.strip() == f"namespace/{NS} created"
        out = await kubectl("apply", "-f", write_yaml(tmp_path, "llama-pd.yaml", isvc))
        assert out.stdout.strip() == "inferenceservice.ome.io/llama-pd created"
        assert out.stderr.strip() == SEED_WARNING
        for condition in ("Ready", "DecoderReady", "RouterReady"):
            out = await kubectl("wait", f"--for=condition={condition}", "inferenceservice/llama-pd", "-n", NS,
                                "--timeout=120s", check=False)
            assert out.returncode == 0, out.output + await describe()
            assert out.stdout.strip() == "inferenceservice.ome.io/llama-pd condition met"

        # Step 3: one InferenceReplica per component, and the pods with their components and serving gates.
        out = await kubectl("get", "inferencereplicas", "-n", NS)
        rows = [(r["NAME"], r["COMPONENT"], r["DESIRED"], r["CURRENT"], r["READY"], r["AVAILABLE"])
                for r in table(out.stdout)]
        assert rows == [("llama-pd-decoder", "decoder", "1", "1", "1", "1"),
                        ("llama-pd-engine", "engine", "2", "2", "2", "2"),
                        ("llama-pd-router", "router", "1", "1", "1", "1")]
        out = await kubectl("get", "pods", "-n", NS, "-l", "ome.io/inferenceservice=llama-pd", "-o", PODS_COLUMNS)
        pods = {r["NAME"]: r for r in table(out.stdout)}
        assert {n: (r["COMPONENT"], r["SERVING"]) for n, r in pods.items()} == {
            "llama-pd-decoder-0-default-0": ("decoder", "True"),
            "llama-pd-engine-0-default-0": ("engine", "True"),
            "llama-pd-engine-1-default-0": ("engine", "True"),
            "llama-pd-router-0-default-0": ("router", "True"),
        }
        out = await kubectl("ome", "instance", "list", "llama-pd", "-n", NS)
        listed = [(r["COMP"], r["IDX/INC"], r["PHASE"], r["PODS"], r["AOF"], r["EVIDENCE"])
                  for r in table(out.stdout)]
        ready = ("Ready", "1/1/1", "A--", "OK")
        assert listed == [("engine", "0/1", *ready), ("engine", "1/1", *ready), ("decoder", "0/1", *ready),
                          ("router", "0/1", *ready)]
        out = await kubectl("ome", "instance", "status", "llama-pd", "0", "--component", "engine", "-n", NS)
        status_fields = dict(line.split(None, 1) for line in out.stdout.splitlines()[1:] if " " in line)
        assert status_fields["state"] == "Reported engine[0] evidence=OK"
        assert "phase=Ready" in out.stdout and "llama-pd-engine-0-default-0" in out.stdout
        assert re.fullmatch(r"activeOrdinal=0 readySince=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
                            status_fields["lifecycle"]), status_fields
        # Engine and decoder pods are on the node's network, so each has a node of its own.
        engine_decoder_nodes = [r["NODE"] for n, r in pods.items() if r["COMPONENT"] != "router"]
        assert len(set(engine_decoder_nodes)) == 3 and set(engine_decoder_nodes) <= set(gpu)

        # The router finds the pods by label, with the selectors the runtime gives it.
        router = json.loads((await kubectl("get", "pod", "llama-pd-router-0-default-0", "-n", NS, "-o",
                                           "json")).stdout)
        args = router["spec"]["containers"][0]["command"]
        assert router["spec"]["serviceAccountName"] == "llama-pd-router"
        for flag, expected in (("--prefill-selector", {"llama-pd-engine-0-default-0", "llama-pd-engine-1-default-0"}),
                               ("--decode-selector", {"llama-pd-decoder-0-default-0"})):
            out = await kubectl("get", "pods", "-n", NS, "-l", selector_arg(args, flag, "llama-pd"), "-o",
                                "jsonpath={.items[*].metadata.name}")
            assert set(out.stdout.split()) == expected
        for verb in ("list", "watch"):
            out = await kubectl("auth", "can-i", verb, "pods", "-n", NS,
                                f"--as=system:serviceaccount:{NS}:llama-pd-router", check=False)
            assert out.stdout.strip() == "yes"

        # Step 4: the Service llama-pd sends requests to the router (listed by the EndpointSlice controller a moment
        # after the pod is Ready: waited for, then checked).
        async def entry_targets() -> set[str]:
            entry = json.loads((await kubectl("get", "endpointslices", "-n", NS, "-l",
                                              "kubernetes.io/service-name=llama-pd", "-o", "json")).stdout)
            return {e["targetRef"]["name"] for s in entry["items"] for e in s.get("endpoints") or []}

        targets = await wait_for(entry_targets, timeout=60, what="the entry Service's EndpointSlice listing a pod",
                                 describe=describe)
        assert targets == {"llama-pd-router-0-default-0"}

        # Repairs under the restart policy None, the default of single-pod Instances (OME's instance restart
        # policy): a Failed router pod and an evicted decoder pod are each replaced alone.
        core = client.CoreV1Api(api)
        await repaired(api, kubectl, "router", "RouterReady", "llama-pd-router-0-default-0",
                       lambda: faults.fail_pod(core, NS, "llama-pd-router-0-default-0"), describe)
        await repaired(api, kubectl, "decoder", "DecoderReady", "llama-pd-decoder-0-default-0",
                       lambda: core.create_namespaced_pod_eviction(
                           "llama-pd-decoder-0-default-0", NS,
                           client.V1Eviction(metadata=client.V1ObjectMeta(name="llama-pd-decoder-0-default-0",
                                                                          namespace=NS))), describe)
        out = await kubectl("get", "pods", "-n", NS, "-l", "ome.io/inferenceservice=llama-pd", "-o", PODS_COLUMNS)
        pods = {r["NAME"]: r for r in table(out.stdout)}
        engine_decoder_nodes = [r["NODE"] for n, r in pods.items() if r["COMPONENT"] != "router"]

        # Step 5: scale prefill alone.
        before = {n: r["UID"] for n, r in pods.items() if r["COMPONENT"] != "engine"}
        out = await kubectl("patch", "inferenceservice", "llama-pd", "-n", NS, "--type", "merge", "-p",
                            '{"spec":{"engine":{"minReplicas":3,"maxReplicas":3}}}')
        assert out.stdout.strip() == "inferenceservice.ome.io/llama-pd patched"
        assert out.stderr.strip() == SEED_WARNING
        out = await kubectl("wait", "--for=jsonpath={.status.readyReplicas}=3", "inferencereplica/llama-pd-engine",
                            "-n", NS, "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await describe()
        out = await kubectl("get", "inferencereplicas", "-n", NS)
        assert [(r["NAME"], r["DESIRED"], r["CURRENT"], r["READY"], r["AVAILABLE"]) for r in table(out.stdout)] == [
            ("llama-pd-decoder", "1", "1", "1", "1"), ("llama-pd-engine", "3", "3", "3", "3"),
            ("llama-pd-router", "1", "1", "1", "1")]
        out = await kubectl("get", "pods", "-n", NS, "-l", "ome.io/inferenceservice=llama-pd", "-o", PODS_COLUMNS)
        after = {r["NAME"]: r for r in table(out.stdout)}
        fourth = set(gpu) - set(engine_decoder_nodes)
        assert after["llama-pd-engine-2-default-0"]["NODE"] in fourth
        assert {n: after[n]["UID"] for n in before} == before  # decoder and router untouched
        # The HPA owns the count; omenative's own writes never include it, so the two never fight.
        replica = json.loads((await kubectl("get", "inferencereplica", "llama-pd-engine", "-n", NS,
                                            "--show-managed-fields", "-o", "json")).stdout)
        owners = {(m["manager"], m.get("subresource", "")) for m in replica["metadata"]["managedFields"]
                  if "f:replicas" in (m["fieldsV1"].get("f:spec") or {})}
        assert owners == {("kube-controller-manager", "scale")}

        # Troubleshooting: a fourth engine finds port 8080 taken on every node that has the model, and waits.
        await kubectl("patch", "inferenceservice", "llama-pd", "-n", NS, "--type", "merge", "-p",
                      '{"spec":{"engine":{"minReplicas":4,"maxReplicas":4}}}')

        async def port_taken() -> str | None:
            got = await kubectl("get", "pod", "llama-pd-engine-3-default-0", "-n", NS, "-o",
                                'jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}', check=False)
            return got.stdout if "didn't have free ports for the requested pod ports" in got.stdout else None

        await wait_for(port_taken, timeout=90, what="the fourth engine Pending on port 8080", describe=describe)

        # Lowering it again removes the highest index first.
        await kubectl("patch", "inferenceservice", "llama-pd", "-n", NS, "--type", "merge", "-p",
                      '{"spec":{"engine":{"minReplicas":2,"maxReplicas":2}}}')

        async def scaled_down() -> bool:
            got = await kubectl("get", "pods", "-n", NS, "-l", "component=engine", "-o",
                                "jsonpath={.items[*].metadata.name}")
            return sorted(got.stdout.split()) == ["llama-pd-engine-0-default-0", "llama-pd-engine-1-default-0"]

        await wait_for(scaled_down, timeout=90, what="engine Instance 2 removed", describe=describe)

        # Clean up: the pods drain and go; the namespace, the model, the runtime and the Secret stay.
        out = await kubectl("delete", "inferenceservice", "llama-pd", "-n", NS)
        assert out.stdout.startswith('inferenceservice.ome.io "llama-pd" deleted')
        await wait_gone(control_plane, NS, "pods,services,inferencereplicas,hpa,pdb",
                        "ome.io/inferenceservice=llama-pd")
        for kind, name, namespace in (("namespace", NS, None), ("clusterbasemodel", MODEL, None),
                                      ("clusterservingruntime", RUNTIME, None), ("secret", "hf-token", "ome")):
            args_ns: list[str] = ["-n", namespace] if namespace else []
            assert (await kubectl("get", kind, name, *args_ns, "-o", "name")).stdout.strip()
    finally:
        await kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=false")
        for kind, name in (("clusterbasemodel", MODEL), ("clusterservingruntime", RUNTIME)):
            await kubectl("delete", kind, name, "--ignore-not-found")

