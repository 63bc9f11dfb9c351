"""The local control plane as the tests see it: started once per run by hack/cluster.sh, used through its kubeconfig."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import yaml

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / "hack" / "cluster.sh"


def bin_dir() -> Path:
    """The folder hack/build-binaries.sh fills (kubectl among them)."""
    out = subprocess.run(
        ["bash", "-c", f"source {REPO}/hack/lib/versions.sh && echo $OMENATIVE_BIN_DIR"],
        check=True, capture_output=True, text=True,
    )
    return Path(out.stdout.strip())


@attrs.frozen
class KubectlResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@attrs.frozen
class ControlPlane:
    name: str
    kubeconfig: Path
    bin_dir: Path

    @classmethod
    def up(cls, name: str, *args: str) -> ControlPlane:
        """Brings the named cluster up (idempotent) and returns a handle on it."""
        subprocess.run(["bash", str(CLUSTER_SH), "up", "--name", name, *args], check=True)
        env = subprocess.run(
            ["bash", str(CLUSTER_SH), "env", "--name", name], check=True, capture_output=True, text=True
        ).stdout
        match = re.search(r"export KUBECONFIG=(\S+)", env)
        assert match, f"hack/cluster.sh env printed no KUBECONFIG: {env!r}"
        return cls(name=name, kubeconfig=Path(match.group(1)), bin_dir=bin_dir())

    @staticmethod
    def discard(name: str) -> None:
        """Removes the named cluster if it exists."""
        subprocess.run(["bash", str(CLUSTER_SH), "down", "--name", name], check=True, capture_output=True)

    def down(self) -> None:
        subprocess.run(["bash", str(CLUSTER_SH), "down", "--name", self.name], check=True)

    @property
    def log_dir(self) -> Path:
        return self.kubeconfig.parent / "logs"

    @property
    def workdir(self) -> Path:
        """kwokctl's folder for this cluster (pids/, logs/, kwok.yaml)."""
        return self.kubeconfig.parent

    def options(self) -> dict[str, Any]:
        """kwokctl's resolved options for this cluster (ports among them)."""
        with open(self.workdir / "kwok.yaml") as f:
            for doc in yaml.safe_load_all(f):
                if doc and doc.get("kind") == "KwokctlConfiguration":
                    return dict(doc["options"])
        raise AssertionError("no KwokctlConfiguration in kwok.yaml")

    def stop_component(self, component: str) -> None:
        """Stops one component (kube-apiserver, etcd, ...) as a crash does: SIGKILL, no graceful shutdown."""
        pid = int((self.workdir / "pids" / f"{component}.pid").read_text().strip())
        os.kill(pid, signal.SIGKILL)

    def dead_components(self) -> dict[str, str]:
        """The components whose process is gone, each with the last lines of its log."""
        dead = {}
        for pid_file in sorted((self.workdir / "pids").glob("*.pid")):
            try:
                os.kill(int(pid_file.read_text().strip()), 0)
            except (ProcessLookupError, ValueError):
                log = self.log_dir / f"{pid_file.stem}.log"
                lines = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
                dead[pid_file.stem] = "\n".join(lines)
        return dead

    def start_stopped_components(self) -> None:
        """Starts again whatever component is not running (hack/cluster.sh up is idempotent)."""
        subprocess.run(["bash", str(CLUSTER_SH), "up", "--name", self.name], check=True, capture_output=True)

    @staticmethod
    def module_dir(module: str) -> Path:
        """Where the Go module cache holds `module`, as `path@$VERSION_VARIABLE` of hack/lib/versions.sh."""
        out = subprocess.run(
            ["bash", "-c", f"source {REPO}/hack/lib/versions.sh && go mod download -json {module}"],
            check=True, capture_output=True, text=True)
        return Path(json.loads(out.stdout)["Dir"])

    @staticmethod
    def podgroup_crd_path() -> Path:
        """The PodGroup CRD from the scheduler-plugins module the scheduler is built from."""
        folder = ControlPlane.module_dir("sigs.k8s.io/scheduler-plugins@$SCHEDULER_PLUGINS_VERSION")
        return folder / "manifests" / "coscheduling" / "crd.yaml"

    @staticmethod
    def prometheus_operator_crd_paths() -> list[Path]:
        """The prometheus-operator's published CRDs that deploy/ and omenative use."""
        folder = ControlPlane.module_dir(
            "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION") / "example" / \
            "prometheus-operator-crd"
        return [folder / f"monitoring.coreos.com_{plural}.yaml"
                for plural in ("servicemonitors", "podmonitors", "prometheusrules")]

    @staticmethod
    def gateway_api_crd_paths() -> list[Path]:
        """The Gateway API's standard CRDs that ingress creation uses: GatewayClass, Gateway and HTTPRoute."""
        folder = ControlPlane.module_dir("sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION") / "config" / "crd" / \
            "standard"
        return [folder / f"gateway.networking.k8s.io_{plural}.yaml"
                for plural in ("gatewayclasses", "gateways", "httproutes")]

    def env(self) -> dict[str, str]:
        """An environment in which `kubectl` (the one we built) talks to this cluster."""
        # kubectl finds the kubectl-ome plugin next to the Python running the tests.
        scripts = Path(sys.executable).parent
        return os.environ | {
            "KUBECONFIG": str(self.kubeconfig),
            # A discovery cache per cluster: a new cluster on a reused port never sees an old one's resources.
            "KUBECACHEDIR": str(self.workdir / "kubectl-cache"),
            "PATH": os.pathsep.join([str(self.bin_dir), str(scripts), os.environ.get("PATH", "")]),
        }

    async def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> KubectlResult:
        """Runs kubectl against this cluster without blocking the event loop."""
        proc = await asyncio.create_subprocess_exec(
            str(self.bin_dir / "kubectl"), *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=self.env(),
        )
        out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
        result = KubectlResult(proc.returncode or 0, out.decode(), err.decode())
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.output}")
        return result

    async def event_messages(self, namespace: str, reason: str) -> list[str]:
        """The messages of the namespace's Events with that reason, as `kubectl get events` shows them."""
        out = await self.kubectl("get", "events", "-n", namespace, "--field-selector", f"reason={reason}", "-o",
                                 'jsonpath={range .items[*]}{.message}{"\\n"}{end}')
        return [line for line in out.stdout.splitlines() if line]
