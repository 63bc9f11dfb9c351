"""How long leader handover and shutdown take, measured rather than asserted (hack/measure-manager.sh).

- handover: two `omenative run --leader-elect` processes; the leader is SIGKILLed; the time from the kill to the
  standby's acquireTime on the Lease (same host clock);
- shutdown: SIGTERM to a leading process until it has exited (it releases the Lease first).

    python -m tests.support.measure_manager [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from tests.support.cluster import REPO, ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.omenative import install_crds, start_controller
from tests.support.wait import wait_for

LEASE = "omenative-leader"


async def lease_spec(control_plane: ControlPlane, namespace: str) -> dict[str, str]:
    out = await control_plane.kubectl("get", "lease", LEASE, "-n", namespace, "-o", "json", check=False)
    return dict(json.loads(out.stdout)["spec"]) if out.returncode == 0 else {}


def stamp(text: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def leader_of(processes: list[ControllerProcess]) -> ControllerProcess | None:
    for process in processes:
        if await process.metric("leader_election_master_status", name=LEASE) == 1:
            return process
    return None


async def one_run(control_plane: ControlPlane, namespace: str) -> tuple[float, float]:
    """(seconds from a SIGKILL of the leader to the standby's acquireTime, seconds a SIGTERMed leader takes to exit)."""
    args = ("--leader-elect", "--leader-election-namespace", namespace, "--namespace", namespace)
    await control_plane.kubectl("delete", "lease", LEASE, "-n", namespace, "--ignore-not-found")
    first = await start_controller(control_plane, *args, webhook=False, name="first")
    second = await start_controller(control_plane, *args, webhook=False, name="second")
    try:
        leader = await wait_for(lambda: leader_of([first, second]), timeout=60, what="a leader")
        standby = second if leader is first else first
        held = await lease_spec(control_plane, namespace)
        killed = time.time()  # the same host clock as the standby's acquireTime
        await leader.kill()

        async def taken() -> dict[str, str] | None:
            spec = await lease_spec(control_plane, namespace)
            return spec if spec.get("holderIdentity") not in (None, "", held.get("holderIdentity")) else None

        spec = await wait_for(taken, timeout=60, what="the standby to take the lease")
        await wait_for(lambda: leader_of([standby]), timeout=30, what="the standby to lead")
        started = time.monotonic()
        code = await standby.stop()
        if code != 0:
            raise AssertionError(f"the SIGTERMed controller exited {code}")
        return stamp(spec["acquireTime"]) - killed, time.monotonic() - started
    finally:
        for process in (first, second):
            await process.stop()


async def measure(control_plane: ControlPlane, runs: int) -> dict[str, list[float]]:
    namespace = "measure-manager"
    await control_plane.kubectl("create", "namespace", namespace, check=False)
    await install_crds(control_plane)
    handovers: list[float] = []
    shutdowns: list[float] = []
    for run in range(runs):
        handover, shutdown = await one_run(control_plane, namespace)
        handovers.append(handover)
        shutdowns.append(shutdown)
        print(f"[measure] run {run + 1}: handover {handover:.1f}s after SIGKILL, shutdown {shutdown:.1f}s after "
              "SIGTERM", flush=True)
    return {"handover_s": handovers, "shutdown_s": shutdowns}


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cluster", default="omenative-measure")
    parser.add_argument("--output", default=str(REPO / ".work" / "measure-manager.json"))
    args = parser.parse_args(argv)
    control_plane = ControlPlane.up(args.cluster)
    figures = await measure(control_plane, args.runs)
    report = {k: {"runs": v, "median": round(statistics.median(v), 2), "max": round(max(v), 2)}
              for k, v in figures.items()}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2))
    for key, value in report.items():
        print(f"[measure] {key}: median {value['median']}s, max {value['max']}s over {len(value['runs'])} runs")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
