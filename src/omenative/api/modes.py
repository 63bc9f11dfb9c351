"""Which deployment mode a component runs in (OME's deployment-modes page, "How OME resolves the mode")."""

from __future__ import annotations

from typing import Any

import attrs

from omenative.api import constants as c

JSONDict = dict[str, Any]


@attrs.frozen
class ModeResolution:
    mode: str
    source: str  # which rule decided: IsvcAnnotation, RuntimeAnnotation, DeploymentMode, LeaderWorker, Default

    @property
    def omenative(self) -> bool:
        return self.mode == c.MODE_OMENATIVE


def _annotation(component: JSONDict | None) -> str | None:
    value = ((component or {}).get("annotations") or {}).get(c.ANN_DEPLOYMENT_MODE)
    return value if value in c.KNOWN_MODES else None  # unknown values are skipped


def resolve_mode(isvc_spec: JSONDict, runtime_spec: JSONDict | None, component: str) -> ModeResolution:
    """The component's mode: its own annotation (InferenceService, then runtime), then spec.deploymentMode, then a
    leader or worker on the engine or decoder (OMENative), then RawDeployment."""
    isvc_component = isvc_spec.get(component)
    runtime_component = (runtime_spec or {}).get(f"{component}Config")
    if (mode := _annotation(isvc_component)) is not None:
        return ModeResolution(mode, "IsvcAnnotation")
    if (mode := _annotation(runtime_component)) is not None:
        return ModeResolution(mode, "RuntimeAnnotation")
    if isvc_spec.get("deploymentMode") in (c.MODE_OMENATIVE, c.MODE_RAW):
        return ModeResolution(isvc_spec["deploymentMode"], "DeploymentMode")
    if component in (c.ENGINE, c.DECODER):
        for part in (isvc_component, runtime_component):
            if isinstance(part, dict) and (part.get("leader") is not None or part.get("worker") is not None):
                return ModeResolution(c.MODE_OMENATIVE, "LeaderWorker")
    return ModeResolution(c.MODE_RAW, "Default")


def declared_components(isvc_spec: JSONDict) -> list[str]:
    """Components the InferenceService declares (only those are deployed), in OME's order."""
    return [comp for comp in c.COMPONENTS if isvc_spec.get(comp) is not None]
