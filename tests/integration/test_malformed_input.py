"""Thirty malformed InferenceServices through `kubectl apply` against the real API server and omenative's webhook:
each is refused with a message that names the field (by the CRD schema or by the webhook), and none gets a 500."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from tests.support.cluster import ControlPlane
from tests.support.omenative import inline_component, inline_service, installed_and_running

Obj = dict[str, Any]
BIG = "x" * (2_500_000)


def engine(**fields: Any) -> Callable[[Obj], None]:
    def change(isvc: Obj) -> None:
        isvc["spec"]["engine"].update(fields)
    return change


def runner(**fields: Any) -> Callable[[Obj], None]:
    def change(isvc: Obj) -> None:
        isvc["spec"]["engine"]["runner"].update(fields)
    return change


def lifecycle(**fields: Any) -> Callable[[Obj], None]:
    return engine(lifecycle=fields)


def spec(**fields: Any) -> Callable[[Obj], None]:
    def change(isvc: Obj) -> None:
        isvc["spec"].update(fields)
    return change


# (case, change, a field the refusal must name)
CASES: list[tuple[str, Callable[[Obj], None], str]] = [
    # containers
    ("command as a string", runner(command="python"), "spec.engine.runner.command"),
    ("args with a number", runner(args=["--port", 8080]), "spec.engine.runner.args[1]"),
    ("env as a map", runner(env={"A": "b"}), "spec.engine.runner.env"),
    ("env value a number", runner(env=[{"name": "A", "value": 1}]), "spec.engine.runner.env[0].value"),
    ("port as a string", runner(ports=[{"containerPort": "8080"}]), "spec.engine.runner.ports[0].containerPort"),
    ("image a number", runner(image=7), "spec.engine.runner.image"),
    ("probe port a boolean", runner(readinessProbe={"httpGet": {"port": True}}),
     "spec.engine.runner.readinessProbe.httpGet.port"),
    ("securityContext a list", runner(securityContext=["privileged"]), "spec.engine.runner.securityContext"),
    ("containers[0] command", engine(containers=[{"name": "ome-container", "command": "python"}]),
     "spec.engine.containers[0].command"),
    ("volumeMounts a string", runner(volumeMounts="/data"), "spec.engine.runner.volumeMounts"),
    # resources
    ("gpu 1.2.3", runner(resources={"limits": {"nvidia.com/gpu": "1.2.3"}}),
     "spec.engine.runner.resources.limits[nvidia.com/gpu]"),
    ("resources a string", runner(resources="lots"), "spec.engine.runner.resources"),
    ("memory request a word", runner(resources={"requests": {"memory": "plenty"}}),
     "spec.engine.runner.resources.requests[memory]"),
    ("emptyDir sizeLimit", engine(volumes=[{"name": "v", "emptyDir": {"sizeLimit": "big"}}]),
     "spec.engine.volumes[0].emptyDir.sizeLimit"),
    ("tolerations a string", engine(tolerations="all"), "spec.engine.tolerations"),
    ("affinity a list", engine(affinity=["zone-a"]), "spec.engine.affinity"),
    # lifecycle
    ("rollingUpdate a string", lifecycle(updateStrategy={"rollingUpdate": "x"}),
     "spec.engine.lifecycle.updateStrategy.rollingUpdate"),
    ("instanceReadyTimeout a word", lifecycle(instanceReadyTimeout="soon"),
     "engine.lifecycle.instanceReadyTimeout"),
    ("restartPolicy unknown", lifecycle(restartPolicy="Sometimes"), "spec.engine.lifecycle.restartPolicy"),
    ("maxSurge a bad percent", lifecycle(updateStrategy={"rollingUpdate": {"maxSurge": "x%"}}),
     "engine.lifecycle.updateStrategy.rollingUpdate.maxSurge"),
    ("minReadySeconds a string", lifecycle(minReadySeconds="ten"), "spec.engine.lifecycle.minReadySeconds"),
    # rollout
    ("rollout a list", spec(rollout=["canary"]), "spec.rollout"),
    ("rollout groups a string", spec(rollout={"groups": "engine"}), "spec.rollout.groups"),
    # autoscaler and replicas
    ("minReplicas a string", engine(minReplicas="one"), "spec.engine.minReplicas"),
    ("minReplicas above maxReplicas", engine(minReplicas=3, maxReplicas=2), "engine.minReplicas"),
    ("autoscaler a string", engine(autoscaler="HPA"), "spec.engine.autoscaler"),
    ("hostNetwork a string", engine(hostNetwork="yes"), "spec.engine.hostNetwork"),
    # huge strings and bodies
    ("a 300-character name", lambda isvc: isvc["metadata"].update(name="a" * 300), "metadata.name"),
    ("a 2.5 MiB env value", runner(env=[{"name": "BLOB", "value": BIG}]), "spec.engine.runner.env[0].value"),
    ("a 2.5 MiB args list", runner(args=[BIG[:500_000]] * 5), "spec.engine.runner.args"),
]


@pytest_asyncio.fixture(scope="module")
async def webhook_controller(control_plane: ControlPlane) -> AsyncIterator[None]:
    """omenative with its webhook, for all the cases (nothing is admitted, so nothing else runs)."""
    async with installed_and_running(control_plane):
        yield


def test_there_are_thirty_cases() -> None:
    assert len(CASES) == 30 and len({name for name, _, _ in CASES}) == 30


@pytest.mark.parametrize(("name", "change", "field"), CASES, ids=[name for name, _, _ in CASES])
async def test_a_malformed_inferenceservice_is_refused_naming_its_field(
    webhook_controller: None, control_plane: ControlPlane, namespace: str, tmp_path: Path, name: str,
    change: Callable[[Obj], None], field: str,
) -> None:
    isvc = copy.deepcopy(inline_service("malformed", namespace, engine=inline_component()))
    change(isvc)
    path = tmp_path / "isvc.yaml"
    path.write_text(yaml.safe_dump(isvc))
    out = await control_plane.kubectl("apply", "--server-side", "-f", str(path), check=False)
    assert out.returncode != 0, f"{name}: admitted\n{out.output}"
    for sign in ("Internal Server Error", "got itself in trouble", "(500)", "could not judge"):
        assert sign not in out.stderr, f"{name}: {out.stderr[:2000]}"
    assert field in out.stderr, f"{name}: the refusal does not name {field}: {out.stderr[:2000]}"
    print(f"{name}: {out.stderr.strip()[:300]}")
