"""A standalone InferenceReplica, as OME's "Run a standalone replica" guide runs one, step by step with its commands:
an inline-template replica (no InferenceService) is Ready with one Instance, its headless Service and revision; it
is scaled with `kubectl scale` and updated with the guide's JSON patch, a SurgeThenDrain rollout to a new revision;
a replica count of 0 runs one Instance. What the webhook refuses on a standalone replica is refused through kubectl
with OME's reasons. The guide's alternative renders a replica from a ServingRuntime: named before it exists, the
replica reports RuntimeNotFound and runs once it is created, with nothing written to its spec, and a change to the
runtime rolls it to a new revision. Deleting the replicas leaves no pod.

OME's "Run a standalone InferenceReplica" guide, with OME's catalog model and runtime: a replica of `spec.modelRef`
alone waits for the model (ModelNotFound), renders with the runtime selected for it once the model is Ready, shows
the guide's columns, pod, Service and scale; with no runtime left to select it says RuntimeSelectionFailed and leaves
its pods serving; a runtime named beside the model that does not declare support for it renders with OME's
RuntimeCompatibilityAdvisory event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from omenative.api import constants as c
from omenative.api.instance_status import decode_rows
from omenative.api.phases import DELETING
from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.conftest import write_yaml
from tests.support.catalog import CATALOG
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.history import recorded
from tests.support.model_agent import ModelAgent
from tests.support.wait import wait_for

Obj = dict[str, Any]
IMAGE = "docker.io/hashicorp/http-echo:1.0.0"


def replica(namespace: str) -> Obj:
    """The guide's inferencereplica.yaml."""
    return {"apiVersion": c.API_VERSION, "kind": "InferenceReplica",
            "metadata": {"name": "standalone-http", "namespace": namespace},
            "spec": {"component": "engine", "replicas": 1, "minReadySeconds": 5,
                     "lifecycle": {"instanceReadyTimeout": "2m", "updateStrategy": {
                         "type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}},
                     "runners": [{"name": "default", "size": 1, "template": {
                         "metadata": {"labels": {"app.kubernetes.io/name": "standalone-http"}},
                         "spec": {"terminationGracePeriodSeconds": 10, "containers": [{
                             "name": "ome-container", "image": IMAGE,
                             "args": ["-listen=:8080", "-text=hello from standalone v1"],
                             "ports": [{"name": "http", "containerPort": 8080}],
                             "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 2},
                             "resources": {"requests": {"cpu": "25m", "memory": "32Mi"},
                                           "limits": {"cpu": "100m", "memory": "64Mi"}}}]}}}]}}


def reference_replica(namespace: str) -> Obj:
    """The guide's runtime-ref-replica.yaml."""
    return {"apiVersion": c.API_VERSION, "kind": "InferenceReplica",
            "metadata": {"name": "standalone-http-ref", "namespace": namespace},
            "spec": {"component": "engine", "replicas": 1, "minReadySeconds": 5,
                     "runtimeRef": {"apiGroup": "ome.io", "kind": "ServingRuntime", "name": "http-echo"},
                     "lifecycle": {"instanceReadyTimeout": "2m", "updateStrategy": {
                         "type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}}


def runtime(namespace: str, text: str) -> Obj:
    """The guide's servingruntime.yaml, answering `hello from runtime <text>`."""
    return {"apiVersion": c.API_VERSION, "kind": "ServingRuntime", "metadata": {"name": "http-echo",
                                                                               "namespace": namespace},
            "spec": {"engineConfig": {"terminationGracePeriodSeconds": 10, "runner": {
                "name": "ome-container", "image": IMAGE, "args": ["-listen=:8080", f"-text=hello from runtime {text}"],
                "ports": [{"name": "http", "containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 2},
                "resources": {"requests": {"cpu": "25m", "memory": "32Mi"},
                              "limits": {"cpu": "100m", "memory": "64Mi"}}}}}}


async def _equal(got: Any, want: str) -> bool:
    return bool(await got == want)


async def test_the_standalone_replica_guide(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    await sim_nodes("cpu")
    ir = replica(namespace)
    ns = ("-n", namespace)

    # Step 1: create the inline-template replica and wait for it.
    out = await kubectl("apply", "-f", write_yaml(tmp_path, "inferencereplica.yaml", ir))
    assert "inferencereplica.ome.io/standalone-http created" in out.stdout, out.output
    out = await kubectl("wait", "inferencereplica/standalone-http", *ns, "--for=condition=Ready", "--timeout=120s",
                        check=False)
    assert out.returncode == 0, out.output + await describe()
    out = await kubectl("wait", "inferencereplica/standalone-http", *ns,
                        "--for=jsonpath={.status.availableReplicas}=1", "--timeout=120s", check=False)
    assert out.returncode == 0, out.output + await describe()
    pods = await kubectl("get", "pods", *ns, "-l", "app.kubernetes.io/name=standalone-http", "-o",
                         "jsonpath={range .items[*]}{.metadata.name} {.status.phase} "
                         "{.metadata.labels.ome\\.io/inferenceservice}{\"\\n\"}{end}")
    assert pods.stdout.split("\n")[0] == "standalone-http-engine-0-default-0 Running standalone-http", pods.stdout
    # A headless Service and a ControllerRevision for the pod set; no InferenceService, no other Service.
    services = await kubectl("get", "services", *ns, "-o", "custom-columns=NAME:.metadata.name,"
                             "CLUSTER-IP:.spec.clusterIP", "--no-headers")
    assert services.stdout.split() == ["standalone-http-engine-headless", "None"], services.stdout
    revisions = await kubectl("get", "controllerrevisions", *ns, "-o", "name")
    assert len(revisions.stdout.split()) == 1, revisions.stdout
    isvcs = await kubectl("get", "inferenceservices", *ns, "-o", "name")
    assert isvcs.stdout.strip() == ""

    # Step 2: the user's own Service over the template's label.
    user_service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "standalone-http",
                                                                        "namespace": namespace},
                    "spec": {"selector": {"app.kubernetes.io/name": "standalone-http"},
                             "ports": [{"name": "http", "port": 8080, "targetPort": "http"}]}}
    await kubectl("apply", "-f", write_yaml(tmp_path, "service.yaml", user_service))

    # Step 3: scale to two Instances, then update the response with the guide's JSON patch.
    out = await kubectl("scale", "inferencereplica", "standalone-http", *ns, "--replicas=2")
    assert "inferencereplica.ome.io/standalone-http scaled" in out.stdout, out.output
    out = await kubectl("wait", "inferencereplica/standalone-http", *ns,
                        "--for=jsonpath={.status.availableReplicas}=2", "--timeout=120s", check=False)
    assert out.returncode == 0, out.output + await describe()
    before = (await kubectl("get", "inferencereplica", "standalone-http", *ns, "-o",
                            "jsonpath={.status.updateRevision}")).stdout
    patch = [{"op": "replace", "path": "/spec/runners/0/template/spec/containers/0/args/1",
              "value": "-text=hello from standalone v2"}]
    (tmp_path / "update-response.json").write_text(json.dumps(patch))
    await kubectl("patch", "inferencereplica", "standalone-http", *ns, "--type=json",
                  f"--patch-file={tmp_path / 'update-response.json'}")

    async def rolled() -> list[str] | None:
        out = await kubectl("get", "inferencereplica", "standalone-http", *ns, "-o", "custom-columns="
                            "GENERATION:.metadata.generation,OBSERVED:.status.observedGeneration,"
                            "TARGET:.status.updateRevision,CURRENT:.status.currentRevision,"
                            "READY:.status.conditions[?(@.type==\"Ready\")].status,"
                            "UPDATED-READY:.status.updatedReadyReplicas,AVAILABLE:.status.availableReplicas",
                            "--no-headers")
        generation, observed, target, current, ready, updated, available = out.stdout.split()
        done = target != before and current == target and observed == generation and ready == "True" and \
            updated == available == "2"
        return out.stdout.split() if done else None

    await wait_for(rolled, timeout=120, what="the rollout to the new revision", describe=describe)
    args = await kubectl("get", "pods", *ns, "-l", "app.kubernetes.io/name=standalone-http", "-o",
                         "jsonpath={range .items[*]}{.metadata.deletionTimestamp}|{.spec.containers[0].args[1]}"
                         "{\"\\n\"}{end}")
    live = [line.split("|")[1] for line in args.stdout.splitlines() if line.startswith("|")]
    assert live == ["-text=hello from standalone v2"] * 2, args.stdout

    # 0 runs one Instance: a standalone replica does not scale to zero.
    await kubectl("scale", "inferencereplica", "standalone-http", *ns, "--replicas=0")
    out = await kubectl("wait", "inferencereplica/standalone-http", *ns,
                        "--for=jsonpath={.status.replicas}=1", "--timeout=60s", check=False)
    assert out.returncode == 0, out.output + await describe()

    # What the webhook refuses on a standalone replica, in OME's reasons.
    async def refused(obj: Obj) -> str:
        out = await kubectl("apply", "-f", write_yaml(tmp_path, "refused.yaml", obj), check=False)
        assert out.returncode != 0, out.output
        return out.stderr

    ref = reference_replica(namespace)
    both = {**ref, "spec": {**ref["spec"], "runners": ir["spec"]["runners"]}}
    assert "are two template sources" in await refused(both)
    none = {**ref, "spec": {"component": "engine"}}
    assert "TemplateSourceMissing" in await refused(none)
    model = {**ref, "spec": {"component": "engine", "modelRef": {"kind": "ClusterBaseModel"}}}
    assert "spec.modelRef.name: Required value" in await refused(model)
    pinned = {**ref, "spec": {**ref["spec"], "runtimeRef": {**ref["spec"]["runtimeRef"], "autoSync": False}}}
    assert "pin a runtime, which a replica does not honor" in await refused(pinned)
    hpa = {**ir, "metadata": {"name": "scaled", "namespace": namespace},
           "spec": {**ir["spec"], "autoscaler": {"class": "HPA"}}}
    assert "spec.autoscaler.class HPA: only the InferenceService controller creates a scaler" in await refused(hpa)
    nested = {**ir, "metadata": {"name": "nested", "namespace": namespace},
              "spec": {**ir["spec"], "lifecycle": {"minReadySeconds": 5}}}
    assert "spec.lifecycle.minReadySeconds is not read on a replica" in await refused(nested)
    role = {**ir, "spec": {**ir["spec"], "component": "decoder"}}
    assert "spec.component is immutable" in await refused(role)
    parent = {"apiVersion": c.API_VERSION, "kind": "InferenceService",
              "metadata": {"name": "llm", "namespace": namespace},
              "spec": {"deploymentMode": "RawDeployment", "engine": {"runner": {"name": "c", "image": IMAGE}}}}
    await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", parent))
    clash = {**ir, "metadata": {"name": "llm-engine", "namespace": namespace}}
    assert "collides with InferenceService 'llm'" in await refused(clash)

    # The guide's alternative: render from a runtime. Named before it exists, the replica says so and waits.
    await kubectl("apply", "-f", write_yaml(tmp_path, "runtime-ref-replica.yaml", ref))

    async def reason() -> str:
        out = await kubectl("get", "inferencereplica", "standalone-http-ref", *ns, "-o",
                            "jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}")
        return out.stdout

    await wait_for(lambda: _equal(reason(), "RuntimeNotFound"), timeout=30, what="Ready=False RuntimeNotFound",
                   describe=describe)
    events = await kubectl("get", "events", *ns, "--field-selector", "reason=RuntimeNotFound", "-o",
                           "jsonpath={.items[*].message}")
    assert events.stdout == f'runtime "http-echo" not found in namespace {namespace}', events.stdout
    await kubectl("apply", "-f", write_yaml(tmp_path, "servingruntime.yaml", runtime(namespace, "reference")))
    out = await kubectl("wait", "inferencereplica/standalone-http-ref", *ns, "--for=condition=Ready",
                        "--timeout=120s", check=False)
    assert out.returncode == 0, out.output + await describe()
    selector = (await kubectl("get", "inferencereplica", "standalone-http-ref", *ns, "-o",
                              "jsonpath={.status.labelSelector}")).stdout
    pods = await kubectl("get", "pods", *ns, "-l", selector, "-o",
                         "jsonpath={.items[0].metadata.name} {.items[0].spec.containers[0].args[1]}")
    assert pods.stdout == "standalone-http-ref-engine-0-default-0 -text=hello from runtime reference", pods.stdout
    stored = await kubectl("get", "inferencereplica", "standalone-http-ref", *ns, "-o", "jsonpath={.spec.runners}")
    assert stored.stdout == ""  # rendered in memory, never written to the spec
    # The live runtime: changing it rolls the replica to a new revision.
    first = (await kubectl("get", "inferencereplica", "standalone-http-ref", *ns, "-o",
                           "jsonpath={.status.updateRevision}")).stdout
    await kubectl("apply", "-f", write_yaml(tmp_path, "servingruntime.yaml", runtime(namespace, "reference v2")))

    async def followed() -> bool:
        out = await kubectl("get", "inferencereplica", "standalone-http-ref", *ns, "-o",
                            "jsonpath={.status.updateRevision} {.status.currentRevision} {.status.readyReplicas}")
        target, current, ready = [*out.stdout.split(), "", "", ""][:3]
        pods = await kubectl("get", "pods", *ns, "-l", selector, "-o",
                             "jsonpath={range .items[*]}{.metadata.deletionTimestamp}|{.spec.containers[0].args[1]}"
                             "{\"\\n\"}{end}")
        live = [line.split("|")[1] for line in pods.stdout.splitlines() if line.startswith("|")]
        return target != first and current == target and ready == "1" and \
            live == ["-text=hello from runtime reference v2"]

    await wait_for(followed, timeout=120, what="the replica on the runtime's new revision", describe=describe)
    await kubectl("delete", "inferencereplica", "standalone-http-ref", *ns, "--wait=true", "--timeout=120s")

    # Clean up: the replica goes with its pods and its headless Service.
    await kubectl("delete", "service", "standalone-http", *ns)
    await kubectl("delete", "inferencereplica", "standalone-http", *ns, "--wait=true", "--timeout=120s")

    async def gone() -> bool:
        left = await kubectl("get", "pods,services", *ns, "-o", "name")
        return left.stdout.strip() == ""

    await wait_for(gone, timeout=60, what="no pod or Service left", describe=describe)


LLAMA = "llama-3-2-1b-instruct"
VLLM = "vllm-llama-3-2-1b-instruct"
LLAMA_LEARNED = {"modelFormat": {"name": "safetensors", "version": "1.0.0"},
                 "modelFramework": {"name": "transformers", "version": "4.45.0.dev0"},
                 "modelArchitecture": "LlamaForCausalLM", "modelParameterSize": "1.24B"}


async def test_the_standalone_inferencereplica_guide_from_a_model(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    ns = ("-n", "llama-demo")
    describe = lambda: describe_namespace(api, "llama-demo")  # noqa: E731
    gpu = [await sim_nodes("gpu") for _ in range(2)]
    await kubectl("delete", "namespace", "llama-demo", "--ignore-not-found", "--wait=true", "--timeout=120s")
    # Step 1 needs the model absent: another test of the shared control plane may have left the catalog's.
    await kubectl("delete", "clusterbasemodel", LLAMA, "--ignore-not-found", "--wait=true", "--timeout=60s")
    pool = {"apiVersion": c.API_VERSION, "kind": "InferenceReplica",
            "metadata": {"name": "llama-pool", "namespace": "llama-demo"},
            "spec": {"component": "engine", "modelRef": {"name": LLAMA}, "replicas": 1}}

    async def ready_reason(name: str) -> str:
        out = await kubectl("get", "inferencereplica", name, *ns, "-o",
                            "jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}")
        return out.stdout

    async def events(reason: str) -> list[str]:
        out = await kubectl("get", "events", *ns, "--field-selector", f"reason={reason}", "-o",
                            "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
        return out.stdout.splitlines()

    try:
        # Step 1: the namespace and the replica, created before the model exists: it waits and says why.
        out = await kubectl("create", "namespace", "llama-demo")
        assert out.stdout.strip() == "namespace/llama-demo created"
        out = await kubectl("apply", "-f", write_yaml(tmp_path, "llama-pool.yaml", pool))
        assert out.stdout.strip() == "inferencereplica.ome.io/llama-pool created", out.output
        assert out.stderr == "", out.stderr  # nothing in it is warned about
        await wait_for(lambda: _equal(ready_reason("llama-pool"), "ModelNotFound"), timeout=30,
                       what="Ready=False ModelNotFound", describe=describe)
        assert await events("ModelNotFound") == [
            f'model "{LLAMA}" not found: no ClusterBaseModel of that name'], await describe()
        # The guide's prerequisites: the catalog's model and runtime, the model Ready on the two GPU nodes. Before
        # the model agent has it, the model is not ready and the replica still waits.
        await kubectl("apply", "-f", str(CATALOG / "models" / "meta" / "Llama-3.2-1B-Instruct.yaml"))
        await kubectl("apply", "-f", str(CATALOG / "runtimes" / "vllm" / "llama-3-2-1b-instruct-rt.yaml"))

        async def not_ready_said() -> bool:
            return f'model "{LLAMA}" is not ready yet (state: none)' in await events("ModelNotFound")

        await wait_for(not_ready_said, timeout=30, what="ModelNotFound: not ready yet", describe=describe)
        assert (await kubectl("get", "pods", *ns, "-o", "name")).stdout == ""
        await model_agent.downloaded(LLAMA, gpu, LLAMA_LEARNED)
        out = await kubectl("wait", "--for=condition=Ready", "inferencereplica/llama-pool", *ns, "--timeout=120s",
                            check=False)
        assert out.stdout.strip() == "inferencereplica.ome.io/llama-pool condition met", out.output + await describe()

        # Step 2: what OME runs. The guide's columns, then kubectl ome's PARENT of a standalone replica.
        out = await kubectl("get", "inferencereplicas", *ns)
        head, row = out.stdout.splitlines()
        assert head.split() == ["NAME", "COMPONENT", "DESIRED", "CURRENT", "READY", "AVAILABLE", "AGE"], out.stdout
        assert row.split()[:6] == ["llama-pool", "engine", "1", "1", "1", "1"], out.stdout
        plugin = await kubectl("ome", "get", "inferencereplicas", *ns)
        head, row = plugin.stdout.splitlines()
        assert head.split()[:3] == ["NAME", "COMPONENT", "PARENT"] and row.split()[:3] == [
            "llama-pool", "engine", "-"], plugin.stdout
        out = await kubectl("get", "pods", *ns, "-l", "ome.io/inferenceservice=llama-pool", "-o",
                            'custom-columns=NAME:.metadata.name,SERVING:.status.conditions[?(@.type=="ome.io/serving")]'
                            ".status")
        assert [line.split() for line in out.stdout.splitlines()] == [
            ["NAME", "SERVING"], ["llama-pool-engine-0-default-0", "True"]], out.stdout
        out = await kubectl("get", "services", *ns, "-o",
                            "custom-columns=NAME:.metadata.name,TYPE:.spec.type,CLUSTER-IP:.spec.clusterIP")
        assert [line.split() for line in out.stdout.splitlines()] == [
            ["NAME", "TYPE", "CLUSTER-IP"], ["llama-pool-engine-headless", "ClusterIP", "None"]], out.stdout
        # Rendered from the model and the runtime selected for it (vLLM's image, the model's path, the nodes that
        # hold it), in memory: nothing is written to the spec.
        pod = json.loads((await kubectl("get", "pod", "llama-pool-engine-0-default-0", *ns, "-o", "json")).stdout)
        ctr = pod["spec"]["containers"][0]
        assert ctr["image"] == "docker.io/vllm/vllm-openai:v0.9.0.1"
        assert {"name": "MODEL_PATH", "value": "/raid/models/meta/llama-3-2-1b-instruct"} in ctr["env"]
        assert pod["spec"]["nodeName"] in gpu
        assert (await kubectl("get", "inferencereplica", "llama-pool", *ns, "-o",
                              "jsonpath={.spec.runners}")).stdout == ""

        # Step 3: scale by hand; the new Instance takes index 1.
        out = await kubectl("scale", "inferencereplica", "llama-pool", *ns, "--replicas=2")
        assert out.stdout.strip() == "inferencereplica.ome.io/llama-pool scaled"
        out = await kubectl("wait", "inferencereplica/llama-pool", *ns,
                            "--for=jsonpath={.status.availableReplicas}=2", "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await describe()
        out = await kubectl("get", "inferencereplica", "llama-pool", *ns)
        assert out.stdout.splitlines()[1].split()[:6] == ["llama-pool", "engine", "2", "2", "2", "2"], out.stdout

        # Troubleshooting: with the only runtime disabled, none serves the model; the pods stay as they are.
        uids = (await kubectl("get", "pods", *ns, "-o", "jsonpath={.items[*].metadata.uid}")).stdout.split()
        await kubectl("patch", "clusterservingruntime", VLLM, "--type=merge", "-p", '{"spec":{"disabled":true}}')
        await wait_for(lambda: _equal(ready_reason("llama-pool"), "RuntimeSelectionFailed"), timeout=30,
                       what="Ready=False RuntimeSelectionFailed", describe=describe)
        (said,) = await events("RuntimeSelectionFailed")
        assert said.startswith("no runtime found to support model safetensors with format safetensors in namespace "
                               "llama-demo.") and f"{VLLM} (cluster-scoped runtime {VLLM} is disabled)" in said, said
        await kubectl("patch", "clusterservingruntime", VLLM, "--type=merge", "-p", '{"spec":{"disabled":false}}')
        out = await kubectl("wait", "--for=condition=Ready", "inferencereplica/llama-pool", *ns, "--timeout=60s",
                            check=False)
        assert out.returncode == 0, out.output + await describe()
        after = (await kubectl("get", "pods", *ns, "-o", "jsonpath={.items[*].metadata.uid}")).stdout.split()
        assert sorted(after) == sorted(uids)  # the same render: no new revision, no pod replaced

        # A runtime named beside the model that does not declare support for it: rendered all the same, said once.
        # Its pod spec places the pods: it tolerates the GPU nodes' taint, where the model is.
        echo = {"apiVersion": c.API_VERSION, "kind": "ServingRuntime",
                "metadata": {"name": "http-echo", "namespace": "llama-demo"},
                "spec": {"engineConfig": {**runtime("llama-demo", "named")["spec"]["engineConfig"], "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
                         "supportedModelFormats": [{"modelFormat": {"name": "gguf"}, "autoSelect": False}]}}
        await kubectl("apply", "-f", write_yaml(tmp_path, "http-echo.yaml", echo))
        named = {**pool, "metadata": {"name": "llama-named", "namespace": "llama-demo"},
                 "spec": {"component": "engine", "modelRef": {"name": LLAMA}, "replicas": 1,
                          "runtimeRef": {"kind": "ServingRuntime", "name": "http-echo"}}}
        await kubectl("apply", "-f", write_yaml(tmp_path, "llama-named.yaml", named))
        out = await kubectl("wait", "--for=condition=Ready", "inferencereplica/llama-named", *ns, "--timeout=120s",
                            check=False)
        assert out.returncode == 0, out.output + await describe()
        (advisory,) = await events("RuntimeCompatibilityAdvisory")
        assert advisory.startswith(f"Runtime http-echo does not declare support for model {LLAMA}") and \
            advisory.endswith("proceeding because the runtime was named explicitly"), advisory
        # The named runtime was rendered, with the model mounted.
        pod = json.loads((await kubectl("get", "pod", "llama-named-engine-0-default-0", *ns, "-o", "json")).stdout)
        assert pod["spec"]["containers"][0]["args"][1] == "-text=hello from runtime named"
        assert {"name": "MODEL_PATH", "value": "/raid/models/meta/llama-3-2-1b-instruct"} in \
            pod["spec"]["containers"][0]["env"]

        # Clean up: the replicas, then the namespace; the model and the runtime are cluster-scoped and stay. The
        # replica holds OME's teardown finalizer, so its Instances drain (phase Deleting) before their pods go.
        out = await kubectl("get", "inferencereplica", "llama-pool", *ns, "-o", "jsonpath={.metadata.finalizers}")
        assert out.stdout == '["ome.io/ir-teardown"]', out.stdout
        async with recorded(api, "inferencereplicas", "llama-demo", "llama-pool") as history:
            out = await kubectl("delete", "inferencereplica", "llama-pool", *ns)
        assert out.stdout.strip() == 'inferencereplica.ome.io "llama-pool" deleted from llama-demo namespace'
        phases = history.values(lambda o: sorted({row.phase for row in decode_rows(o.get("status") or {})})
                                if o["metadata"].get("deletionTimestamp") else None)
        assert [DELETING] in phases, phases
        assert (await kubectl("get", "pods", *ns, "-l", "ome.io/inferenceservice=llama-pool", "-o", "name")).stdout \
            == ""
        out = await kubectl("delete", "namespace", "llama-demo", "--timeout=120s")
        assert out.stdout.strip() == 'namespace "llama-demo" deleted'
        assert (await kubectl("get", "clusterbasemodel", LLAMA, "-o", "name")).stdout.strip() == \
            f"clusterbasemodel.ome.io/{LLAMA}"
    finally:
        await kubectl("delete", "namespace", "llama-demo", "--ignore-not-found", "--wait=false")
        for kind, name in (("clusterbasemodel", LLAMA), ("clusterservingruntime", VLLM)):
            await kubectl("delete", kind, name, "--ignore-not-found")
