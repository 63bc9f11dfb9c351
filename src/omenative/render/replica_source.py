"""A standalone InferenceReplica's pod templates rendered from references (OME's "One template source"), in memory on
every pass and never stored in the replica's spec. Pure.

- `spec.runtimeRef` alone: the runtime's piece for the replica's component (its `engineConfig` for an engine) as
  it is, with no model mounted.
- `spec.modelRef`: the same piece of the named or selected runtime, with the model mounted as an InferenceService's
  component mounts it (model volume, `MODEL_PATH`, the model-ready node affinity); a router mounts no model, as on
  an InferenceService.
"""

from __future__ import annotations

from typing import Any

from omenative.api import constants as c
from omenative.api.config import ControllerConfig
from omenative.api.defaults import default_component
from omenative.api.merge import merge_component
from omenative.render.templates import ModelInfo, TemplateContext, runners

JSONDict = dict[str, Any]


class PieceMissing(ValueError):
    """The runtime declares no piece for the replica's component."""


def runtime_runners(*, replica: str, namespace: str, component: str, runtime_name: str, runtime_spec: JSONDict,
                    config: ControllerConfig, model: ModelInfo | None = None) -> list[JSONDict]:
    piece = runtime_spec.get(f"{component}Config")
    if not isinstance(piece, dict) or not piece:
        raise PieceMissing(f"runtime {runtime_name} declares no {component}Config for this {component} replica")
    merged = merge_component(piece, {}) or {}
    ctx = TemplateContext(isvc=replica, namespace=namespace, component=component, runtime_name=runtime_name,
                          runtime_scheduler=runtime_spec.get("schedulerName"),
                          model=model if component != c.ROUTER else None)
    return runners(ctx, default_component(merged, component, config))
