"""`omenative run` as the tests run it: a real process against the local control plane, with its grace periods
shortened through configuration (never by sleeping), its metrics read over HTTP, and its log kept for failures."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from omenative.kube.cache import IN_PLACE_CHANGE
from tests.support.cluster import ControlPlane


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ControllerProcess:
    def __init__(self, control_plane: ControlPlane, *args: str, name: str = "omenative",
                 kubeconfig: Path | None = None, check_cache: bool = True) -> None:
        self.control_plane = control_plane
        # Whose rights it runs with: the cluster's admin unless a ServiceAccount's kubeconfig is given.
        self.kubeconfig = kubeconfig or control_plane.kubeconfig
        self.args = args
        self.name = name
        # Every cached object is checked for changes in place (see kube/cache.py); the benchmark turns it off, as
        # it costs a JSON encoding of each object stored.
        self.check_cache = check_cache
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.log_path = Path(tempfile.mkstemp(prefix=f"{name}-", suffix=".log")[1])
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, *, wait_ready: bool = True) -> ControllerProcess:
        log = self.log_path.open("ab")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "omenative", "run",
            "--kubeconfig", str(self.kubeconfig),
            "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
            "--health-probe-bind-address", f"127.0.0.1:{self.health_port}",
            "--log-format", "json", *self.args,
            stdout=log, stderr=log,
            env=os.environ | {"PYTHONUNBUFFERED": "1", "OMENATIVE_CACHE_CHECK": "1" if self.check_cache else "0"},
        )
        if wait_ready:
            await self.wait_ready()
        return self

    async def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.returncode is not None:
                raise AssertionError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                body = await asyncio.to_thread(self._get, self.health_port, "/readyz")
                if body.strip() == "ok":
                    return
            except OSError:
                pass
            await asyncio.sleep(0.2)
        raise AssertionError(f"{self.name} did not become ready in {timeout:.0f}s:\n{self.log_tail()}")

    @staticmethod
    def _get(port: int, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return str(response.read().decode())

    async def metrics(self) -> str:
        return await asyncio.to_thread(self._get, self.metrics_port, "/metrics")

    async def metric(self, metric_name: str, **labels: str) -> float:
        """The value of one sample (0 when absent)."""
        text = await self.metrics()
        for line in text.splitlines():
            if not line.startswith(metric_name + "{") and not line.startswith(metric_name + " "):
                continue
            found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0])) if "{" in line else {}
            if all(found.get(k) == v for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    async def writes(self) -> float:
        """Requests that could change something (anything but GET), from rest_client_requests_total."""
        text = await self.metrics()
        total = 0.0
        for line in text.splitlines():
            if line.startswith("rest_client_requests_total{") and 'method="GET"' not in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = 40.0) -> int | None:
        if self.process is None or self.process.returncode is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(sig)
        try:
            code = await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            self.process.kill()
            code = await self.process.wait()
        changed = self.in_place_changes()
        assert not changed, f"{self.name} changed cached objects in place:\n" + "\n".join(changed[:10])
        return code

    def in_place_changes(self) -> list[str]:
        """The log's reports of a cached object changed in place (a consumer that broke the caches' contract)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if IN_PLACE_CHANGE in line]

    def non_json_lines(self) -> list[str]:
        """Lines of the log (written with --log-format json) that do not parse as one JSON object."""
        bad = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                if not isinstance(json.loads(line), dict):
                    bad.append(line)
            except ValueError:
                bad.append(line)
        return bad

    async def kill(self) -> None:
        await self.stop(signal.SIGKILL)
