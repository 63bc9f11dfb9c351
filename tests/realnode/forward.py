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
    proc = await asyncio.create_subprocess_exec(*curl_command(body), stdout=asyncio.subprocess.PIPE,
                                                env=control_plane.env())
    out, _ = await proc.communicate()
    assert proc.returncode == 0, f"curl exited {proc.returncode}"
    try:
        answer: dict[str, object] = json.loads(out)
    except ValueError:
        raise AssertionError(f"not a chat completion: {out.decode(errors='replace')!r}") from None
    return answer


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
