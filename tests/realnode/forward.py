"""A guide's step 4 from the test's side: `kubectl port-forward svc/NAME 8080:8080`, left running, and requests to
localhost:8080 through it (with curl, as the guides write them, or every 100 ms from a client)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import aiohttp

from tests.support.cluster import ControlPlane

URL = "http://localhost:8080/v1/chat/completions"
FORWARDING = ["Forwarding from 127.0.0.1:8080 -> 8080", "Forwarding from [::1]:8080 -> 8080"]


@asynccontextmanager
async def port_forward(control_plane: ControlPlane, service: str, namespace: str) -> AsyncIterator[list[str]]:
    """Yields the lines kubectl prints, the first two once it forwards, and the rest (a line per connection, and
    any error) as they come; stops it on the way out."""
    proc = await asyncio.create_subprocess_exec(
        str(control_plane.bin_dir / "kubectl"), "port-forward", f"svc/{service}", "8080:8080", "-n", namespace,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=control_plane.env())
    assert proc.stdout is not None
    stdout = proc.stdout
    lines = [(await asyncio.wait_for(stdout.readline(), 30)).decode().strip() for _ in range(2)]

    async def read_on() -> None:  # also keeps the pipe from filling up
        while line := await stdout.readline():
            lines.append(f"{time.strftime('%H:%M:%S')} {line.decode().strip()}")

    reader = asyncio.create_task(read_on())
    try:
        yield lines
    finally:
        proc.terminate()
        await proc.wait()
        await reader


def curl_command(body: dict[str, object]) -> list[str]:
    return ["curl", "-s", URL, "-H", "Content-Type: application/json", "-d", json.dumps(body)]


async def curl(control_plane: ControlPlane, body: dict[str, object]) -> dict[str, object]:
    """The guide's curl through the port-forward; the chat completion it printed."""
    return await _chat_completion(curl_command(body), control_plane.env())


async def _chat_completion(command: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    proc = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE, env=env)
    out, _ = await proc.communicate()
    assert proc.returncode == 0, f"curl exited {proc.returncode}"
    try:
        answer: dict[str, object] = json.loads(out)
    except ValueError:
        raise AssertionError(f"not a chat completion: {out.decode(errors='replace')!r}") from None
    return answer


def gateway_address(control_plane: ControlPlane) -> str:
    """host:port of the cluster's Gateway (hack/cluster.sh up --gateway)."""
    return (control_plane.workdir / "gateway" / "address").read_text().strip()


async def through_gateway(control_plane: ControlPlane, host: str, body: dict[str, object]) -> dict[str, object]:
    """The guide's request with curl to the Gateway's address and the route's host, as a client outside the cluster
    sends it once ingress creation is on."""
    return await _chat_completion([
        "curl", "-s", "--max-time", "10", f"http://{gateway_address(control_plane)}/v1/chat/completions",
        "-H", f"Host: {host}", "-H", "Content-Type: application/json", "-d", json.dumps(body)])


async def ingress_on(control_plane: ControlPlane, namespace: str, isvc: str) -> str:
    """Turns ingress creation on for the InferenceService, on the cluster's Gateway, and waits until the Gateway has
    accepted its HTTPRoute (Ready again); the route's host."""
    await control_plane.kubectl("annotate", "inferenceservice", isvc, "-n", namespace, "--overwrite",
                                "ome.io/ingress-disable-creation=false",
                                "ome.io/ingress-gateway=omenative-gateway/public")
    out = await control_plane.kubectl("wait", "--for=jsonpath={.status.conditions[?(@.type==\"IngressReady\")]"
                                      ".reason}=HTTPRouteAccepted", f"inferenceservice/{isvc}", "-n", namespace,
                                      "--timeout=60s", check=False)
    assert out.returncode == 0, out.output + (await control_plane.kubectl(
        "get", "httproute", isvc, "-n", namespace, "-o", "yaml", check=False)).output
    return f"{isvc}.{namespace}.example.com"


def content(answer: dict[str, object]) -> str:
    return str(answer["choices"][0]["message"]["content"])  # type: ignore[index]


class SteadyClient:
    """Sends the request every `interval` seconds until stopped; keeps every answer's content and every failure."""

    def __init__(self, body: dict[str, object], interval: float = 0.1) -> None:
        self.body = body
        self.interval = interval
        self.answers: list[str] = []
        self.failures: list[str] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            while not self._stop.is_set():
                try:
                    async with session.post(URL, json=self.body) as resp:
                        text = await resp.text()
                        if resp.status == 200:
                            self.answers.append(content(json.loads(text)))
                        else:
                            self.failures.append(f"{time.strftime('%H:%M:%S')} HTTP {resp.status}: {text.strip()}")
                except (TimeoutError, aiohttp.ClientError) as exc:
                    self.failures.append(f"{time.strftime('%H:%M:%S')} {type(exc).__name__}: {exc}")
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.interval)

    async def __aenter__(self) -> SteadyClient:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
