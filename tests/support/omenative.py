"""Installing omenative on a control plane and running it, shared by the integration and e2e tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.support.cluster import REPO, ControlPlane
from tests.support.controller import ControllerProcess, free_port

TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def inline_component(low: int = 1, high: int | None = None, *, image: str = "example.invalid/server:1",
                     ports: tuple[int, ...] = ()) -> dict[str, Any]:
    """A single-pod OMENative component that carries its own container (no runtime, no model)."""
    runner: dict[str, Any] = {"name": "ome-container", "image": image, "resources": {"requests": {"cpu": "1"}}}
    if ports:
        runner["ports"] = [{"containerPort": port} for port in ports]
    return {"minReplicas": low, "maxReplicas": low if high is None else high, "tolerations": TOLERATE_GPU,
            "runner": runner}


def inline_service(name: str, namespace: str, **components: dict[str, Any]) -> dict[str, Any]:
    """An OMENative InferenceService of inline components (by default one engine Instance)."""
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"deploymentMode": "OMENative", **(components or {"engine": inline_component()})}}


# Grace periods shortened through configuration, so the lifecycle paths run in seconds (never by sleeping).
FAST = ("--stuck-pod-grace-period", "20s", "--unschedulable-grace-period", "2m", "--update-retry-backoff", "5s",
        "--workers", "2", "--migration-max-per-window", "10", "--migration-window", "1h", "--migration-max-in-flight",
        "3")


async def install_crds(control_plane: ControlPlane) -> None:
    await control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "manifests" / "crds"))
    crds = ("crd/inferenceservices.ome.io", "crd/inferencereplicas.ome.io", "crd/clusterservingruntimes.ome.io",
            "crd/clusterbasemodels.ome.io")
    for attempt in range(5):
        out = await control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", *crds,
                                          check=attempt == 4)
        # kubectl wait fails at once, instead of waiting, on a CRD the API server has not given conditions yet.
        if out.returncode == 0 or "accessor error" not in out.stderr:
            break
        await asyncio.sleep(0.5)
    assert out.returncode == 0, out.output


async def start_controller(control_plane: ControlPlane, *args: str, webhook: bool = True,
                           name: str = "omenative", kubeconfig: Path | None = None) -> ControllerProcess:
    extra: tuple[str, ...] = ()
    if webhook:
        port = free_port()
        extra = ("--webhook-bind-address", f"127.0.0.1:{port}", "--webhook-url", f"https://127.0.0.1:{port}")
    process = ControllerProcess(control_plane, *extra, *FAST, *args, name=name, kubeconfig=kubeconfig)
    await process.start()
    return process


async def stop_controller(control_plane: ControlPlane, process: ControllerProcess) -> None:
    await process.stop()
    # The webhook configurations point at this process; leave none behind for the next tests.
    await control_plane.kubectl("delete", "validatingwebhookconfiguration,mutatingwebhookconfiguration",
                                "omenative", "--ignore-not-found")


@contextlib.asynccontextmanager
async def installed_and_running(control_plane: ControlPlane, *args: str,
                                kubeconfig: Path | None = None) -> AsyncIterator[ControllerProcess]:
    """omenative's CRDs installed and omenative running with its webhook, stopped (and unregistered) on exit."""
    await install_crds(control_plane)
    process = await start_controller(control_plane, *args, kubeconfig=kubeconfig)
    try:
        yield process
    finally:
        await stop_controller(control_plane, process)
    # --log-format=json holds for the whole run: library lines and tracebacks included.
    assert process.non_json_lines() == [], f"{process.log_path} has lines that are not JSON"
