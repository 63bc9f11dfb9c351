"""hack/sandbox.sh --detach brings the guides' examples to Ready, every command it prints works, and
hack/sandbox.sh down leaves no process behind."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.cluster import REPO

SANDBOX = REPO / "hack" / "sandbox.sh"


async def run(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(subprocess.run, list(args), env=env, capture_output=True, text=True,
                                   timeout=timeout, cwd=REPO)


def processes_under(folder: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-af", str(folder)], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


async def test_the_sandbox_runs_the_examples_and_its_commands_work(tmp_path: Path) -> None:
    env = os.environ | {"OMENATIVE_SANDBOX": "omenative-sandbox-test", "OMENATIVE_STATE_DIR": str(tmp_path)}
    started = await run("bash", str(SANDBOX), "--detach", "--with-prometheus", env=env)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert "is Ready" in started.stderr
        lines = started.stdout.splitlines()
        commands = [line.strip() for line in lines[lines.index("Try next (kubectl and kubectl-ome from the sandbox):")
                                                   + 1:] if line.strip()]
        export, tries = commands[0], commands[1:-1]
        assert export.startswith("export KUBECONFIG=") and commands[-1] == "hack/sandbox.sh down"
        assert any("kubectl ome instance list llama-pd" in c for c in tries)
        for command in tries:
            if command.startswith("#"):
                continue
            result = await run("bash", "-c", f"{export} && {command}", env=env, timeout=360)
            assert result.returncode == 0, f"{command}\n{result.stdout}{result.stderr}"
            assert result.stdout.strip(), command
            if "api/v1/query" in command:  # Prometheus scraped omenative: Ready engine Instances by PromQL
                answer = json.loads(result.stdout)["data"]["result"]
                engine = [r for r in answer if r["metric"].get("component") == "engine"]
                assert engine and float(engine[0]["value"][1]) >= 1, result.stdout
        assert any("api/v1/query" in c for c in tries)
        printed = await run("bash", str(SANDBOX), "env", env=env)
        assert printed.stdout.startswith("export KUBECONFIG=") and printed.stdout.split()[1] in export
        # The README's next step, from a shell whose PATH has neither kubectl nor kubectl-ome.
        bare = env | {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        listed = await run("bash", "-c", f'eval "$(bash {SANDBOX} env)" && kubectl ome instance list llama-pd '
                                         "-n llama-demo", env=bare)
        assert listed.returncode == 0 and listed.stdout.startswith("COMP ") and "\nrouter " in listed.stdout, \
            listed.stdout + listed.stderr
    finally:
        stopped = await run("bash", str(SANDBOX), "down", env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert processes_under(tmp_path) == []


async def test_the_sandbox_with_a_real_node_runs_omenative_as_pods_and_answers_step_4() -> None:
    """hack/sandbox.sh --detach --real-node --in-cluster: omenative runs from deploy/ on the real node, the
    multi-node example runs there as real processes, and step 4's request is answered."""
    from tests.realnode.conftest import host_state, unsupported_reason

    reason = unsupported_reason()
    if reason is not None:
        print(f"\nskipped: this machine cannot run a real node: {reason}")
        pytest.skip(f"this machine cannot run a real node: {reason}")
    # kubelet makes unix sockets under its folder, whose paths may not exceed 107 bytes: a short state folder.
    state = Path(tempfile.mkdtemp(prefix="sbr-", dir="/tmp"))
    env = os.environ | {"OMENATIVE_SANDBOX": "sbr", "OMENATIVE_STATE_DIR": str(state)}
    before = host_state()
    started = await run("bash", str(SANDBOX), "--detach", "--real-node", "--in-cluster", "--with-prometheus", env=env,
                        timeout=900)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        export = next(line.strip() for line in started.stdout.splitlines() if "export KUBECONFIG=" in line)
        pods = await run("bash", "-c", f"{export} && kubectl get pods -n omenative-system -o "
                                       "jsonpath='{.items[*].spec.nodeName}'", env=env)
        assert pods.stdout.split() == ["real-node-1", "real-node-1"], pods.stdout + pods.stderr
        # Step 4 of the multi-node guide, with its port-forward left running in the background.
        step4 = (f"{export} && {{ kubectl port-forward svc/qwen3-multi-node-engine 8080:8080 -n qwen3-multi-node "
                 ">/dev/null 2>&1 & pf=$!; } && sleep 3 && curl -s http://localhost:8080/v1/chat/completions "
                 "-H 'Content-Type: application/json' -d '{\"model\": \"Qwen/Qwen3-0.6B\", \"messages\": "
                 "[{\"role\": \"user\", \"content\": \"Hello\"}]}'; kill $pf")
        answer = await run("bash", "-c", step4, env=env)
        assert "stand-in engine qwen3-multi-node-engine-0-leader-0 answered (rank 0 of 2; workers connected: " \
               "qwen3-multi-node-engine-0-worker-0)" in answer.stdout, answer.stdout + answer.stderr
        # Prometheus finds both controller pods through the API and scrapes them at their pod addresses.
        url = next(word for word in started.stdout.split() if word.endswith("/api/v1/query"))
        up = await run("curl", "-s", url, "--data-urlencode", 'query=up{job="omenative-metrics"}', env=env)
        assert sorted(float(r["value"][1]) for r in json.loads(up.stdout)["data"]["result"]) == [1.0, 1.0], up.stdout
    finally:
        stopped = await run("bash", str(SANDBOX), "down", env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert processes_under(state) == []
    assert host_state() == before
    shutil.rmtree(state)
