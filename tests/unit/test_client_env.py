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


async def test_tls_connections_read_into_small_buffers(tmp_path: Path) -> None:
    """asyncio's default TLS read buffer is 256 KiB per connection, zero-filled and so resident; after connect, a
    TLS connection's buffer is TLS_READ_BUFFER (and a request still gets its whole answer)."""
    import asyncio
    import datetime as dt
    import ssl

    from omenative.kube.client import TLS_READ_BUFFER
    from omenative.webhook.certs import make_bundle

    bundle = make_bundle(["localhost"], dt.datetime.now(dt.UTC))
    (tmp_path / "tls.crt").write_bytes(bundle.cert)
    (tmp_path / "tls.key").write_bytes(bundle.key)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    body = b"x" * (3 * TLS_READ_BUFFER + 17)  # several buffers' worth

    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_tls)
    port = server.sockets[0].getsockname()[1]
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    kube = await KubeClient.connect(str(tmp_path / "kubeconfig"))
    try:
        client_tls = ssl.create_default_context()
        client_tls.check_hostname = False
        client_tls.verify_mode = ssl.CERT_NONE
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_tls)
        protocol = writer.transport._ssl_protocol  # type: ignore[attr-defined]
        assert len(protocol._ssl_buffer) == TLS_READ_BUFFER < 256 * 1024
        assert await reader.read() == body
        writer.close()
    finally:
        await kube.close()
        server.close()
        await server.wait_closed()
