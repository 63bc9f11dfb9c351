"""A real Prometheus server (Debian's package, as hack/lib/prometheus.sh installs it) scraping omenative, queried
over its HTTP API."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml

from tests.support.controller import free_port

JOB = "omenative-metrics"  # the job name the production ServiceMonitor gives, which the alerts select on


class Prometheus:
    def __init__(self, port: int, folder: Path) -> None:
        self.port = port
        self.folder = folder

    def query(self, promql: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def value(self, promql: str) -> float | None:
        """The single sample of an instant query (None when it returns nothing)."""
        result = self.query(promql)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def targets_up(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/targets", timeout=5) as response:
            active = json.loads(response.read())["data"]["activeTargets"]
        return bool(active) and all(t["health"] == "up" for t in active)


@contextlib.asynccontextmanager
async def running_prometheus(targets: list[str], interval: str = "1s") -> AsyncIterator[Prometheus]:
    """Prometheus scraping `targets` (host:port of /metrics) as job omenative-metrics, stopped on exit."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: hack/test.sh installs Debian's prometheus package"
    folder = Path(tempfile.mkdtemp(prefix="omenative-prometheus-"))
    config = {"global": {"scrape_interval": interval, "evaluation_interval": interval},
              "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": targets}]}]}
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (folder / "prometheus.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        binary, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", stdout=log, stderr=log)
    server = Prometheus(port, folder)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if await asyncio.to_thread(server.targets_up):
                    break
            except OSError:
                pass
            assert process.returncode is None, (folder / "prometheus.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "Prometheus did not scrape its target within 30 s"
            await asyncio.sleep(0.5)
        yield server
    finally:
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 15)
        except TimeoutError:
            process.kill()
            await process.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
