"""The simulated node shapes of hack/sim/nodes.py, for tests that create their own nodes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_path = Path(__file__).resolve().parents[2] / "hack" / "sim" / "nodes.py"
_spec = importlib.util.spec_from_file_location("omenative_sim_nodes", _path)
assert _spec and _spec.loader
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

node_manifest = _module.node_manifest
model_label = _module.model_label
GPU_RESOURCE: str = _module.GPU_RESOURCE
