"""A control plane with real nodes only (hack/cluster.sh --real-nodes 4 --gateway): containerd, kubelets,
kube-proxies and CoreDNS on this machine, running the stand-in images, and Traefik as the Gateway API gateway.
Skipped, with the reason printed, where the machine cannot run one."""

from __future__ import annotations

import glob
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.cluster import REPO, ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.omenative import installed_and_running

NAME = "omenative-real"
# The prefill-decode guide's step 5 runs three engine pods and a decoder, each on its own node's port 8080.
REAL_NODES = 4
LIB = REPO / "hack" / "realnode" / "lib.sh"


def unsupported_reason() -> str | None:
    """Why this machine cannot run a real node, or None when it can."""
    out = subprocess.run(["bash", "-c", f"source {LIB} && realnode_supported"], capture_output=True, text=True)
    return None if out.returncode == 0 else (out.stdout.strip() or out.stderr.strip() or "unknown")


def _run(*args: str) -> list[str]:
    out = subprocess.run(args, capture_output=True, text=True)
    return sorted(line for line in out.stdout.splitlines() if line.strip())


DAEMONS = {"containerd", "containerd-shim", "kubelet", "kube-proxy", "coredns"}


def _live_daemons() -> list[str]:
    """The node's daemons still alive; a zombie (dead, not yet reaped by whoever inherited it) holds nothing."""
    out = subprocess.run(["ps", "-eo", "pid=,stat=,comm="], capture_output=True, text=True, check=True)
    rows = [line.split(None, 2) for line in out.stdout.splitlines()]
    return sorted(f"{pid} {comm}" for pid, stat, comm in rows if comm in DAEMONS and not stat.startswith("Z"))


def host_state() -> dict[str, list[str]]:
    """What a real node adds to the host: processes, mounts, links, routes, nf_tables, netns, cgroups, sysctl."""
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return {
        # The node's daemons by process name (its containers' processes live in its cgroups, checked below).
        "processes": _live_daemons(),
        "mounts": sorted(m for m in mounts if "realnode" in m or m.startswith("/run/netns")),
        "links": [line.split(":")[1].strip() for line in _run("ip", "-o", "link")],
        "routes": _run("ip", "route"),
        "nft tables": _run("nft", "list", "tables"),
        "iptables chains": [line for line in _run("iptables-save") if line.startswith((":", "-A", "*"))],
        "netns": sorted(glob.glob("/run/netns/*")),
        "run": sorted(glob.glob("/run/containerd") + glob.glob("/run/omenative-node")),
        "logs": sorted(glob.glob("/var/log/pods/*") + glob.glob("/var/log/containers/*")),
        "cgroups": sorted(glob.glob("/sys/fs/cgroup/*/omenative")),
        "sysctls": [Path(f"/proc/sys/net/{name}").read_text().strip() for name in
                    ("ipv4/ip_forward", "bridge/bridge-nf-call-iptables") if Path(f"/proc/sys/net/{name}").exists()],
    }


@pytest.fixture(scope="package")
def real_cluster() -> Iterator[ControlPlane]:
    reason = unsupported_reason()
    if reason is not None:
        print(f"\nreal-node tests skipped: this machine cannot run a real node: {reason}")
        pytest.skip(f"this machine cannot run a real node: {reason}")
    ControlPlane.discard(NAME)
    before = host_state()
    control_plane = ControlPlane.up(NAME, "--real-nodes", str(REAL_NODES), "--gpu-nodes", "0", "--cpu-nodes", "0",
                                    "--model", "qwen3-0-6b", "--model", "llama-3-2-1b-instruct", "--gateway")
    yield control_plane
    control_plane.down()
    # `down` leaves the host as it found it, and removes the node's state folder.
    assert host_state() == before
    assert not (control_plane.workdir / "realnode").exists()


@pytest_asyncio.fixture(scope="package")
async def real_omenative(real_cluster: ControlPlane) -> AsyncIterator[ControllerProcess]:
    async with installed_and_running(real_cluster) as process:
        yield process
