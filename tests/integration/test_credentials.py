"""Credentials that expire or are revoked, against the real API server's ServiceAccount token authenticator.

The kubeconfig's user is an exec plugin (a script here). It hands out a ServiceAccount token bound to a Secret
(`kubectl create token --bound-object-kind Secret`), and tells the client the token expires after `lifetime`
seconds. Deleting the Secret revokes every token bound to it: the API server answers 401 from then on. So a token
can expire (the plugin's stated expiry), be revoked (its Secret deleted) and stay refused (no Secret to bind to),
with no mocked client:

- omenative's client (`KubeClient`, as `omenative run` connects it) runs the plugin again before the stated expiry
  with no 401 on the way, and after a revocation reloads on the 401 and sends the refused request again, so the
  caller never sees it;
- `omenative run` with that kubeconfig serves an InferenceService; with every token refused, its /readyz turns not
  ready after the configured window and the log says why; once tokens are good again, it is ready by itself.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
import yaml
from prometheus_client import REGISTRY

from omenative.kube.client import ApiError, KubeClient
from omenative.kube.resources import NAMESPACES
from tests.conftest import NodeFactory
from tests.support.cluster import ControlPlane
from tests.support.omenative import inline_component, inline_service, install_crds, start_controller, stop_controller
from tests.support.wait import wait_for

ACCOUNT = "omenative-credentials"
PLUGIN = """#!/usr/bin/env bash
# An exec credential plugin: a token of ServiceAccount $SA bound to the Secret named in $STATE/current.
set -euo pipefail
secret=$(cat "$STATE/current")
token=$("$KUBECTL" --kubeconfig "$ADMIN" create token "$SA" -n "$NS" --bound-object-kind Secret \\
  --bound-object-name "$secret" --duration 10m)
expiry=$(date -u -d "+$(cat "$STATE/lifetime") seconds" +%Y-%m-%dT%H:%M:%SZ)
echo "$(date +%s.%N) $secret" >> "$STATE/calls"
printf '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",'
printf '"status":{"token":"%s","expirationTimestamp":"%s"}}\\n' "$token" "$expiry"
"""


class Plugin:
    """The plugin's state: which Secret its tokens are bound to, the lifetime it states, and its calls."""

    def __init__(self, control_plane: ControlPlane, namespace: str, folder: Path) -> None:
        self.control_plane = control_plane
        self.namespace = namespace
        self.state = folder / "state"
        self.state.mkdir()
        self.script = folder / "plugin.sh"
        self.script.write_text(PLUGIN)
        self.script.chmod(0o755)
        self.kubeconfig = folder / "exec.kubeconfig"
        admin = yaml.safe_load(control_plane.kubeconfig.read_text())
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "clusters": [admin["clusters"][0]],
            "users": [{"name": "exec", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(self.script),
                "env": [{"name": "STATE", "value": str(self.state)}, {"name": "SA", "value": ACCOUNT},
                        {"name": "NS", "value": namespace},
                        {"name": "ADMIN", "value": str(control_plane.kubeconfig)},
                        {"name": "KUBECTL", "value": str(control_plane.bin_dir / "kubectl")}]}}}],
            "contexts": [{"name": "exec", "context": {"cluster": admin["clusters"][0]["name"], "user": "exec"}}],
            "current-context": "exec"}))

    async def bind(self, secret: str, lifetime: int = 3600, *, create: bool = True) -> None:
        if create:
            await self.control_plane.kubectl("create", "secret", "generic", secret, "-n", self.namespace)
        (self.state / "lifetime").write_text(str(lifetime))
        (self.state / "current").write_text(secret)

    async def revoke(self, secret: str, token: str | None = None) -> None:
        """Deletes the Secret and waits until the API server refuses `token` (one bound to the Secret). Its
        authenticator reads Secrets from a cache, and remembers a token it accepted for a few seconds."""
        kubectl = self.control_plane.kubectl
        if token is None:
            token = (await kubectl("create", "token", ACCOUNT, "-n", self.namespace, "--bound-object-kind", "Secret",
                                   "--bound-object-name", secret, "--duration", "10m")).stdout.strip()
        await kubectl("delete", "secret", secret, "-n", self.namespace)
        server = yaml.safe_load(self.control_plane.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]

        async def refused() -> bool:
            out = await kubectl("--kubeconfig=/dev/null", f"--server={server}", f"--token={token}",
                                "--insecure-skip-tls-verify", "get", "--raw", "/api", check=False)
            return out.returncode != 0 and "Unauthorized" in out.stderr

        await wait_for(refused, timeout=30, what=f"tokens bound to {secret} refused")

    def calls(self) -> list[tuple[float, str]]:
        path = self.state / "calls"
        if not path.exists():
            return []
        return [(float(t), s) for t, s in (line.split() for line in path.read_text().splitlines() if line)]


@pytest_asyncio.fixture
async def plugin(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> AsyncIterator[Plugin]:
    kubectl = control_plane.kubectl
    await kubectl("create", "serviceaccount", ACCOUNT, "-n", namespace)
    binding = f"{namespace}-credentials"
    # The test is about who the controller is, not what it may do: its account may do anything.
    await kubectl("create", "clusterrolebinding", binding, "--clusterrole=cluster-admin",
                  f"--serviceaccount={namespace}:{ACCOUNT}")
    yield Plugin(control_plane, namespace, tmp_path)
    await kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")


async def test_the_client_refreshes_before_the_stated_expiry_and_reloads_a_revoked_token(plugin: Plugin) -> None:
    await plugin.bind("cred-1", lifetime=20)
    kube = await KubeClient.connect(str(plugin.kubeconfig))
    assert kube.credentials is not None and kube.credentials.kind == "exec"
    async with kube:
        # Requests every half second for 25 s: the plugin runs again before the 20 s it stated, with no 401.
        first = plugin.calls()[0][0]
        statuses: list[int] = []
        until = time.time() + 25
        while time.time() < until:
            try:
                await kube.get(NAMESPACES, plugin.namespace)
                statuses.append(200)
            except ApiError as exc:
                statuses.append(exc.status)
            await asyncio.sleep(0.5)
        assert set(statuses) == {200}, statuses
        calls = plugin.calls()
        assert len(calls) >= 2 and first < calls[1][0] < first + 20, calls
        print(f"refreshed {calls[1][0] - first:.1f} s into a token said to last 20 s; "
              f"{len(statuses)} requests, none refused")

        # Revoked: the next request is answered 401, the client reloads and sends it again: the caller sees 200.
        await plugin.bind("cred-2", lifetime=3600)
        reloads = kube.credentials.reloads
        labels = {"code": "401", "method": "GET", "host": kube.host}
        refused_before = REGISTRY.get_sample_value("rest_client_requests_total", labels) or 0.0
        await plugin.revoke("cred-1", kube.api_client.configuration.api_key["BearerToken"].removeprefix("Bearer "))
        namespace = await kube.get(NAMESPACES, plugin.namespace)
        assert namespace["metadata"]["name"] == plugin.namespace
        assert kube.credentials.reloads == reloads + 1 and plugin.calls()[-1][1] == "cred-2"
        assert kube.credentials.healthy()
        refused = REGISTRY.get_sample_value("rest_client_requests_total", labels) or 0.0
        assert refused - refused_before == 1  # the 401 happened, inside the client


async def test_sustained_refusal_makes_omenative_not_ready_and_it_recovers_by_itself(
    control_plane: ControlPlane, plugin: Plugin, sim_nodes: NodeFactory, namespace: str, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    await install_crds(control_plane)
    await plugin.bind("cred-1")
    process = await start_controller(control_plane, "--namespace", namespace, "--unready-after-refused-credentials",
                                     "10", webhook=False, kubeconfig=plugin.kubeconfig)
    manifest = tmp_path / "isvc.yaml"

    async def serve(replicas: int) -> None:
        manifest.write_text(yaml.safe_dump(inline_service("creds", namespace, engine=inline_component(replicas))))
        await kubectl("apply", "-f", str(manifest))

    async def readyz() -> str | None:
        """None when ready, else the body of the refusal."""
        try:
            process._get(process.health_port, "/readyz")
        except urllib.error.HTTPError as exc:
            return str(exc.read().decode())
        return None

    try:
        await sim_nodes("gpu")
        await serve(1)
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/creds", "-n", namespace,
                            "--timeout=60s", check=False)
        assert out.returncode == 0, out.output + process.log_tail()

        # Every token refused: the plugin has no Secret to bind to. Changes keep the controller writing, and its
        # writes are refused (and retried with backoff) until it reports not ready.
        await plugin.bind("missing", create=False)
        await plugin.revoke("cred-1")
        refused_at = time.monotonic()
        changing = True

        async def keep_changing() -> None:
            replicas = 2
            while changing:
                await serve(replicas)
                replicas = 3 - replicas
                await asyncio.sleep(2)

        changes = asyncio.create_task(keep_changing())
        try:
            body = await wait_for(readyz, timeout=60, what="/readyz not ready")
        finally:
            changing = False
            await changes
        print(f"not ready {time.monotonic() - refused_at:.1f} s after every token was refused (window 10 s)")
        assert "[-]credentials failed" in body
        lines = [json.loads(line) for line in process.log_path.read_text().splitlines() if line.startswith("{")]
        why = [line for line in lines if line.get("event") == "not ready: the API server has refused our credentials"]
        assert why and why[-1]["last"].startswith("401"), why[-3:]
        assert process.process is not None and process.process.returncode is None

        # Tokens are good again: the next request goes through, and it is ready without a restart.
        await plugin.bind("cred-3")
        await serve(1)

        async def ready_again() -> bool:
            return await readyz() is None

        async def tail() -> str:
            return process.log_tail()

        await wait_for(ready_again, timeout=60, what="/readyz ok again", describe=tail)
        out = await kubectl("wait", "--for=jsonpath={.status.replicas}=1", "inferencereplica/creds-engine", "-n",
                            namespace, "--timeout=60s", check=False)
        assert out.returncode == 0, out.output + process.log_tail()
    finally:
        await stop_controller(control_plane, process)

