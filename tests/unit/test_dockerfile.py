"""deploy/Dockerfile, checked without a container daemon or registry (neither is reachable here): a lint of its
stages, and the runtime dependency set it installs, installed into a bare virtualenv."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.support.cluster import REPO

DOCKERFILE = REPO / "deploy" / "Dockerfile"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_every_stage_is_pinned_and_the_final_one_runs_the_controller_as_non_root() -> None:
    steps = instructions()
    args = dict(rest.split("=", 1) for word, rest in steps if word == "ARG" and "=" in rest)
    bases = [rest.split()[0] for word, rest in steps if word == "FROM"]
    resolved = [re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base) for base in bases]
    assert len(resolved) >= 2 and all(DIGEST.search(base) for base in resolved), resolved
    final = steps[max(i for i, (word, _) in enumerate(steps) if word == "FROM"):]
    users = [rest for word, rest in final if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root"), users
    entrypoint = [rest for word, rest in final if word == "ENTRYPOINT"]
    assert entrypoint and json.loads(entrypoint[-1])[-2:] == ["/opt/omenative/bin/omenative", "run"]
    # The final stage installs nothing itself: it copies the build stage's virtualenv.
    assert not [rest for word, rest in final if word == "RUN"]
    assert any(word == "COPY" and rest.startswith("--from=build /opt/omenative") for word, rest in final)
    # The build stage installs the package alone: no extras (test, lint, bench, plugin).
    installs = [rest for word, rest in steps if word == "RUN" and "pip install" in rest]
    assert installs and all("[" not in rest for rest in installs), installs


def test_the_runtime_set_installs_in_a_bare_virtualenv_without_the_plugins_client(tmp_path: Path) -> None:
    wheels, venv = tmp_path / "wheels", tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(wheels), str(REPO)], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    subprocess.run([*pip, "install", "-q", "--no-index", "--find-links", str(wheels), "omenative"], check=True)
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    installed = {json_row["name"].lower().replace("_", "-") for json_row in json.loads(subprocess.run(
        [*pip, "list", "--format", "json"], check=True, capture_output=True, text=True).stdout)}
    assert {"kubernetes-asyncio", "structlog", "prometheus-client", "aiohttp", "cryptography"} <= installed
    assert not installed & {"kubernetes", "pytest", "ruff", "mypy", "matplotlib", "hypothesis"}, installed
    help_text = subprocess.run([str(venv / "bin" / "omenative"), "run", "--help"], capture_output=True, text=True)
    assert help_text.returncode == 0 and "--webhook-service" in help_text.stdout, help_text.stderr
    plugin = subprocess.run([str(venv / "bin" / "kubectl-ome"), "instance", "list", "x"], capture_output=True,
                            text=True)
    assert plugin.returncode == 1 and "pip install 'omenative[plugin]'" in plugin.stderr, plugin.stderr
