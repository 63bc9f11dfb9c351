"""The process's HTTP endpoints: /metrics on one address, /healthz and /readyz on another (controller-runtime's
split, so a scrape never shares a port with the kubelet's probes)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

Check = Callable[[], bool]


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """`:8080`, `127.0.0.1:8080` or `0` (off, as in controller-runtime)."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    return host or "0.0.0.0", int(port)


async def _metrics(_: web.Request) -> web.Response:
    return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})


def _probe(checks: dict[str, Check]) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(_: web.Request) -> web.Response:
        failed = [name for name, check in checks.items() if not check()]
        if failed:
            return web.Response(status=500, text="".join(f"[-]{n} failed\n" for n in failed))
        return web.Response(text="ok")

    return handler


class Endpoints:
    def __init__(self, metrics_address: str, health_address: str, *, ready_checks: dict[str, Check] | None = None,
                 health_checks: dict[str, Check] | None = None) -> None:
        self.metrics_address = parse_bind_address(metrics_address)
        self.health_address = parse_bind_address(health_address)
        self.ready_checks = ready_checks if ready_checks is not None else {}
        self.health_checks = health_checks if health_checks is not None else {}
        self._runners: list[web.AppRunner] = []
        self.bound: dict[str, tuple[str, int]] = {}

    async def start(self) -> None:
        if self.metrics_address is not None:
            app = web.Application()
            app.router.add_get("/metrics", _metrics)
            await self._serve("metrics", app, self.metrics_address)
        if self.health_address is not None:
            app = web.Application()
            app.router.add_get("/healthz", _probe(self.health_checks))
            app.router.add_get("/readyz", _probe(self.ready_checks))
            await self._serve("health", app, self.health_address)

    async def _serve(self, name: str, app: web.Application, address: tuple[str, int]) -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, address[0], address[1])
        await site.start()
        self._runners.append(runner)
        bound = runner.addresses  # the real port when port 0 was asked for
        self.bound[name] = (str(bound[0][0]), int(bound[0][1])) if bound else address

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners = []
