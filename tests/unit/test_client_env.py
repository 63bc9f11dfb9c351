"""The API client reads the proxy environment once, when it connects, and then never again (aiohttp would read it,
and ~/.netrc, in a worker thread for every request)."""

from __future__ import annotations

from pathlib import Path

import pytest

from omenative.kube.client import KubeClient

pytestmark = pytest.mark.unit

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://api.example.invalid:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.mark.parametrize(("env", "proxy"), [
    ({}, None),
    ({"HTTPS_PROXY": "http://proxy.example.invalid:3128"}, "http://proxy.example.invalid:3128"),
    ({"HTTPS_PROXY": "http://proxy.example.invalid:3128", "NO_PROXY": "api.example.invalid"}, None),
])
async def test_the_proxy_is_resolved_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                          proxy: str | None) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    kube = await KubeClient.connect(str(tmp_path / "kubeconfig"))
    try:
        rest = kube.api_client.rest_client
        assert rest.proxy == proxy
        assert rest.pool_manager.trust_env is False
        assert not rest.pool_manager.closed  # the connection pool moved to the new session
    finally:
        await kube.close()
