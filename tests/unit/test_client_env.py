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


async def test_tls_connections_share_one_small_read_buffer(tmp_path: Path) -> None:
    """asyncio's default TLS read buffer is 256 KiB per connection, zero-filled and so resident; with the runtime
    tweak `omenative run` applies, the TLS connections of a thread read into one shared buffer of TLS_READ_BUFFER,
    and connections that read at the same time each still get their own whole answer."""
    import asyncio
    import datetime as dt
    import ssl

    from omenative.kube.tweaks import TLS_READ_BUFFER, shared_tls_read_buffer
    from omenative.webhook.certs import make_bundle

    bundle = make_bundle(["localhost"], dt.datetime.now(dt.UTC))
    (tmp_path / "tls.crt").write_bytes(bundle.cert)
    (tmp_path / "tls.key").write_bytes(bundle.key)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    # Several buffers' worth each, in pieces, so that the connections' reads interleave.
    bodies = [bytes([ord("a") + i]) * (3 * TLS_READ_BUFFER + 17 + i) for i in range(3)]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = bodies[int(await reader.readexactly(1))]
        for start in range(0, len(body), 20_000):
            writer.write(body[start:start + 20_000])
            await writer.drain()
            await asyncio.sleep(0)
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_tls)
    port = server.sockets[0].getsockname()[1]
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    kube = await KubeClient.connect(str(tmp_path / "kubeconfig"))
    assert shared_tls_read_buffer()
    try:
        client_tls = ssl.create_default_context()
        client_tls.check_hostname = False
        client_tls.verify_mode = ssl.CERT_NONE
        connections = [await asyncio.open_connection("127.0.0.1", port, ssl=client_tls) for _ in bodies]
        protocols = [writer.transport._ssl_protocol for _, writer in connections]  # type: ignore[attr-defined]
        assert len(protocols[0]._ssl_buffer) == TLS_READ_BUFFER < 256 * 1024
        assert all(p._ssl_buffer is protocols[0]._ssl_buffer for p in protocols)

        async def fetch(i: int) -> bytes:
            reader, writer = connections[i]
            writer.write(str(i).encode())
            got = await reader.read()
            writer.close()
            return got

        assert await asyncio.gather(*(fetch(i) for i in range(len(bodies)))) == bodies
    finally:
        await kube.close()
        server.close()
        await server.wait_closed()
