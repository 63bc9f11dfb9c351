"""hack/sandbox.sh --detach brings the guides' examples to Ready, every command it prints works, and
hack/sandbox.sh down leaves no process behind."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

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
    started = await run("bash", str(SANDBOX), "--detach", env=env)
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
            result = await run("bash", "-c", f"{export} && {command}", env=env, timeout=360)
            assert result.returncode == 0, f"{command}\n{result.stdout}{result.stderr}"
            assert result.stdout.strip(), command
        printed = await run("bash", str(SANDBOX), "env", env=env)
        assert printed.stdout.startswith("export KUBECONFIG=") and printed.stdout.split()[1] in export
    finally:
        stopped = await run("bash", str(SANDBOX), "down", env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert processes_under(tmp_path) == []
