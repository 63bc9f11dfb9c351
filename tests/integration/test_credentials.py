"""Credentials that expire or are revoked, against the real API server's ServiceAccount token authenticator.

omenative runs with a kubeconfig whose user is an exec plugin (a script here). The plugin hands out a ServiceAccount
token bound to a Secret (`kubectl create token --bound-object-kind Secret`), and tells the client the token expires
after `lifetime` seconds. Deleting the Secret revokes every token bound to it: the API server answers 401 from then
on. So the test can make a token expire (the plugin's stated expiry), be revoked (delete its Secret), and stay
refused (no Secret the plugin can bind to), with no mocked client:

- before the stated expiry the plugin is run again, with no 401 on the way;
- after a revocation the next request's 401 reloads the credentials, and omenative serves an InferenceService;
- with every token refused, /readyz turns not ready after the configured window, and the log says why; once the
  plugin can hand out a good token again, it turns ready by itself.
"""

from __future__ import annotations

import json
import time
import urllib.error
from pathlib import Path

import yaml

from tests.conftest import NodeFactory
from tests.support.cluster import ControlPlane
from tests.support.omenative import inline_component, inline_service, install_crds, start_controller, stop_controller
from tests.support.wait import wait_for

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


def calls(state: Path) -> list[tuple[float, str]]:
    path = state / "calls"
    if not path.exists():
        return []
    return [(float(t), s) for t, s in (line.split() for line in path.read_text().splitlines() if line)]


async def test_expiring_and_revoked_tokens_are_refreshed_and_sustained_refusal_is_not_ready(
    control_plane: ControlPlane, sim_nodes: NodeFactory, namespace: str, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    await install_crds(control_plane)
    account = "omenative-credentials"
    await kubectl("create", "serviceaccount", account, "-n", namespace)
    binding = f"{namespace}-credentials"
    # The test is about who the controller is, not what it may do: its account may do anything.
    await kubectl("create", "clusterrolebinding", binding, "--clusterrole=cluster-admin",
                  f"--serviceaccount={namespace}:{account}")
    state = tmp_path / "state"
    state.mkdir()
    (state / "current").write_text("cred-1")
    (state / "lifetime").write_text("40")
    await kubectl("create", "secret", "generic", "cred-1", "-n", namespace)
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(PLUGIN)
    plugin.chmod(0o755)
    admin = yaml.safe_load(control_plane.kubeconfig.read_text())
    kubeconfig = tmp_path / "exec.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": [admin["clusters"][0]],
        "users": [{"name": "exec", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin),
            "env": [{"name": "STATE", "value": str(state)}, {"name": "SA", "value": account},
                    {"name": "NS", "value": namespace}, {"name": "ADMIN", "value": str(control_plane.kubeconfig)},
                    {"name": "KUBECTL", "value": str(control_plane.bin_dir / "kubectl")}]}}}],
        "contexts": [{"name": "exec", "context": {"cluster": admin["clusters"][0]["name"], "user": "exec"}}],
        "current-context": "exec"}))
    # Leader election renews its Lease every few seconds: requests keep coming even when nothing else happens.
    process = await start_controller(control_plane, "--namespace", namespace, "--leader-elect",
                                     "--leader-election-namespace", namespace, "--unready-after-refused-credentials",
                                     "10", webhook=False, kubeconfig=kubeconfig)
    try:
        # 1. Refreshed before the stated expiry, without a 401.
        first = calls(state)[0][0]

        async def refreshed() -> bool:
            return len(calls(state)) >= 2

        await wait_for(refreshed, timeout=45, what="the plugin run again before the token's expiry")
        second = calls(state)[1][0]
        assert second < first + 40, (first, second)
        assert await process.metric("rest_client_requests_total", code="401") == 0
        print(f"refreshed {second - first:.1f} s after the first token, which was said to last 40 s")

        # 2. Revoked: the next 401 reloads the credentials and the controller carries on.
        (state / "lifetime").write_text("3600")
        await kubectl("create", "secret", "generic", "cred-2", "-n", namespace)
        (state / "current").write_text("cred-2")
        await kubectl("delete", "secret", "cred-1", "-n", namespace)

        async def reloaded() -> bool:
            return any(s == "cred-2" for _, s in calls(state)) and \
                await process.metric("rest_client_requests_total", code="401") >= 1

        await wait_for(reloaded, timeout=30, what="a 401 and a token bound to cred-2")
        await sim_nodes("gpu")
        manifest = tmp_path / "isvc.yaml"
        manifest.write_text(yaml.safe_dump(inline_service("after-revocation", namespace,
                                                          engine=inline_component())))
        await kubectl("apply", "-f", str(manifest))
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/after-revocation", "-n", namespace,
                            "--timeout=60s", check=False)
        assert out.returncode == 0, out.output + process.log_tail()
        assert process._get(process.health_port, "/readyz").strip() == "ok"

        # 3. Refused for good: no Secret to bind to. Not ready after the window, and the log says why.
        (state / "current").write_text("missing")
        await kubectl("delete", "secret", "cred-2", "-n", namespace)
        refused_at = time.monotonic()

        async def not_ready() -> str | None:
            try:
                process._get(process.health_port, "/readyz")
            except urllib.error.HTTPError as exc:
                return str(exc.read().decode())
            return None

        body = await wait_for(not_ready, timeout=60, what="/readyz not ready")
        print(f"not ready {time.monotonic() - refused_at:.1f} s after the last good token was revoked")
        assert "[-]credentials failed" in body
        lines = [json.loads(line) for line in process.log_path.read_text().splitlines() if line.startswith("{")]
        why = [line for line in lines if line.get("event") == "not ready: the API server has refused our credentials"]
        assert why and why[-1]["last"].startswith("401"), why[-3:]

        # 4. The plugin can hand out a good token again: ready without a restart.
        await kubectl("create", "secret", "generic", "cred-3", "-n", namespace)
        (state / "current").write_text("cred-3")

        async def ready_again() -> bool:
            return await not_ready() is None

        await wait_for(ready_again, timeout=30, what="/readyz ok again")
        assert process.process is not None and process.process.returncode is None
    finally:
        await stop_controller(control_plane, process)
        await kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")
