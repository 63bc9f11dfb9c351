"""The short version of hack/chaos.sh: each lifecycle operation once, with omenative SIGKILLed at a random moment of
it (drawn from how long the operation takes without a kill) and started again; the invariants must hold."""

from __future__ import annotations

import random

from kubernetes_asyncio import client

from tests.conftest import NodeFactory
from tests.support.chaos import SCENARIOS, Chaos, log_excerpt
from tests.support.cluster import ControlPlane
from tests.support.omenative import install_crds, stop_controller


async def test_every_operation_survives_a_sigkill(control_plane: ControlPlane, api: client.ApiClient,
                                                  namespace: str, sim_nodes: NodeFactory) -> None:
    await install_crds(control_plane)
    for _ in range(2):
        await sim_nodes("gpu")
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    chaos = Chaos(control_plane, api, namespace)
    try:
        for scenario in SCENARIOS:
            calibration = await chaos.run(scenario, 0, rng, window=None)
            assert calibration.violations == [] and calibration.converged_after is not None, (scenario, calibration)
            run = await chaos.run(scenario, 1, rng, window=calibration.converged_after)
            print(f"{scenario}: killed {run.kill_after:.2f}s in (mid-operation: {run.mid_operation}), converged "
                  f"{run.converged_after}s after the restart")
            report = [f"seed {seed}, {scenario}: {run.violations}", *run.timeline, f"pods seen: {run.pods_created}",
                      *log_excerpt(run.logs, run.name)]
            assert run.violations == [], "\n".join(report)
    finally:
        if chaos.process is not None:
            await stop_controller(control_plane, chaos.process)
