"""The real nodes hold machine-wide things (a bridge, fixed addresses, network namespaces, cgroups): a second
cluster asking for real nodes while another's run is refused with the reason, and its teardown leaves the running
nodes alone (a failed second sandbox once took down the nodes of the first)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from tests.realnode.conftest import REAL_NODES, host_state
from tests.support.cluster import REPO, ControlPlane

pytestmark = pytest.mark.e2e

NODE_SH = REPO / "hack" / "realnode" / "node.sh"


async def _node_sh(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(subprocess.run, ["bash", str(NODE_SH), *args], capture_output=True, text=True)


async def test_a_second_cluster_is_refused_and_its_teardown_leaves_the_running_nodes_alone(
        real_cluster: ControlPlane, tmp_path: Path) -> None:
    before = host_state()
    other = tmp_path / "other"
    other.mkdir()
    (other / "kubeconfig.yaml").write_text("")

    up = await _node_sh("up", str(other), "1")
    assert up.returncode == 1, up.stderr
    assert "this machine already runs the real nodes of another cluster (state in " \
           f"{real_cluster.workdir.resolve() / 'realnode'})" in up.stderr, up.stderr
    assert not (other / "realnode").exists()

    # What a crashed or refused run may leave: a state folder of its own. Its teardown removes that, nothing else.
    (other / "realnode" / "pids").mkdir(parents=True)
    down = await _node_sh("down", str(other))
    assert down.returncode == 0, down.stderr
    assert f"the real nodes on this machine belong to {real_cluster.workdir.resolve() / 'realnode'}: left running" \
           in down.stderr, down.stderr
    assert not (other / "realnode").exists()

    assert host_state() == before
    nodes = json.loads((await real_cluster.kubectl("get", "nodes", "-l", "omenative.io/real-node",
                                                   "-o", "json")).stdout)["items"]
    ready = sorted(node["metadata"]["name"] for node in nodes
                   if any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"]))
    assert ready == [f"real-node-{k}" for k in range(1, REAL_NODES + 1)]
