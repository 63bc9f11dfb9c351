"""Each import-linter contract in pyproject.toml breaks on a deliberate violation: a copy of src/ gets one import that
the contract forbids, and lint-imports, run on the copy, must name that contract BROKEN (and fail). A contract that
cannot fail would keep nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# (contract name as pyproject.toml gives it, module to change, the violating line)
VIOLATIONS = [
    ("Only omenative.kube talks to the API (kubernetes_asyncio)", "omenative/controllers/fleet_metrics.py",
     "import kubernetes_asyncio"),
    ("Data flows down: entry points -> controllers -> kube -> pure render/observe -> api",
     "omenative/controllers/fleet_metrics.py", "import omenative.manager"),
    ("The three controllers are independent: what they share lives in omenative.controllers' own modules or below",
     "omenative/controllers/inferencereplica/requests.py", "import omenative.controllers.instance.plan"),
    ("The webhook needs no controller: it reads the caches through its own narrow protocol",
     "omenative/webhook/certs.py", "import omenative.controllers.context"),
    ("kube is a generic runtime: it knows no OME name (its callers pass them)", "omenative/kube/queue.py",
     "import omenative.api.constants"),
    ("The controllers' planners are pure: facts in, decisions out", "omenative/controllers/instance/plan.py",
     "import asyncio"),
    ("render, observe and api are pure: no I/O, no event loop, no clock of their own", "omenative/api/naming.py",
     "import time"),
]


def _contract_names() -> list[str]:
    import tomllib

    with (REPO / "pyproject.toml").open("rb") as f:
        return [c["name"] for c in tomllib.load(f)["tool"]["importlinter"]["contracts"]]


def test_every_contract_has_a_violation_here() -> None:
    assert sorted(_contract_names()) == sorted(name for name, _, _ in VIOLATIONS)


@pytest.mark.parametrize(("contract", "module", "line"), VIOLATIONS, ids=[v[1] for v in VIOLATIONS])
def test_a_violation_breaks_its_contract(tmp_path: Path, contract: str, module: str, line: str) -> None:
    shutil.copytree(REPO / "src", tmp_path / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "src" / module
    text = target.read_text()
    # After `from __future__ import annotations`, which must stay first.
    head, sep, rest = text.partition("from __future__ import annotations\n")
    target.write_text(f"{head}{sep}{line}  # deliberate violation\n{rest}" if sep else f"{line}\n{text}")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    out = " ".join(done.stdout.split())  # lint-imports wraps long names over lines
    assert done.returncode != 0, out
    assert f"{contract} BROKEN" in out, out
