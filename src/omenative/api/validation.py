"""Admission checks of an InferenceService: errors refuse it with a message that says why; warnings admit it and are
shown by kubectl. The same functions serve the webhook and the controllers (which report errors as conditions)."""

from __future__ import annotations

import re
from typing import Any

import attrs

from omenative.api import constants as c
from omenative.api import ingress, naming, unsupported
from omenative.api.config import ControllerConfig
from omenative.api.defaults import is_multi_pod, replica_bounds, worker_size
from omenative.api.merge import merge_component
from omenative.api.modes import resolve_mode
from omenative.api.pod_fields import InvalidSpec, component_problems, size_problems
from omenative.api.rollout_validation import validate_rollout
from omenative.api.selection import named_runtime_warning
from omenative.api.types import BaseModelSpec, ServingRuntimeSpec
from omenative.api.units import InvalidValue, parse_duration, resolve_int_or_percent

JSONDict = dict[str, Any]
NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
_LWS_VAR = re.compile(r"\$\(?\{?(LWS_[A-Z_]+)")


@attrs.frozen
class Findings:
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.errors


@attrs.frozen
class Admission:
    """What admission knows besides the object: the runtime and model it names, when they exist."""

    runtime_name: str | None = None
    runtime: ServingRuntimeSpec | None = None
    runtime_raw: JSONDict | None = None
    model_name: str | None = None
    model: BaseModelSpec | None = None
    config: ControllerConfig = attrs.field(factory=ControllerConfig)


def _lifecycle_errors(component: str, lifecycle: JSONDict | None) -> list[str]:
    errors: list[str] = []
    lifecycle = lifecycle or {}
    timeout = lifecycle.get("instanceReadyTimeout")
    if timeout is not None:
        try:
            parse_duration(str(timeout))
        except InvalidValue as exc:
            errors.append(f"{component}.lifecycle.instanceReadyTimeout: {exc}")
    rolling = ((lifecycle.get("updateStrategy") or {}).get("rollingUpdate")) or {}
    budgets = {}
    for key in ("maxSurge", "maxUnavailable"):
        if rolling.get(key) is not None:
            try:
                budgets[key] = resolve_int_or_percent(rolling[key], 100)
            except InvalidValue as exc:
                errors.append(f"{component}.lifecycle.updateStrategy.rollingUpdate.{key}: {exc}")
    if budgets.get("maxSurge") == 0 and budgets.get("maxUnavailable") == 0:
        errors.append(f"ZeroBudgetPacingUnstartable: {component}.lifecycle.updateStrategy.rollingUpdate sets both "
                      "maxSurge and maxUnavailable to 0, so no update could ever start")
    return errors


def _keda_errors(component: str, autoscaler: Any, min_replicas: Any) -> list[str]:
    """OME's admission rules for a KEDA autoscaler block, in its words."""
    if not isinstance(autoscaler, dict) or autoscaler.get("class") != "KEDA":
        return []
    keda = autoscaler.get("keda")
    if not isinstance(keda, dict) or not keda.get("triggers"):
        return [f"{component}: KedaTriggersRequired: class=keda requires at least 1 trigger"]
    idle = keda.get("idleReplicaCount")
    if isinstance(idle, int) and isinstance(min_replicas, int) and idle >= min_replicas:
        return [f"{component}: KedaIdleBelowMin: keda.idleReplicaCount ({idle}) must be lower than minReplicas "
                f"({min_replicas})"]
    return []


def _topology_warnings(component: str, merged: JSONDict, multi: bool) -> list[str]:
    """Topology fields that would do nothing as written, said at admission instead of found out later."""
    out = []
    if merged.get("topologyKey") and not multi:
        out.append(f"{component}.topologyKey has no effect on a single-pod {component}: it keeps workers in their "
                   "leader's domain; to spread single-pod Instances set topologySpread and topologySpreadKey")
    if merged.get("topologySpread") and not (merged.get("topologySpreadKey") or
                                             (merged.get("topologyKey") if multi else None)):
        out.append(f"{component}.topologySpread is set but no key names the domains: set {component}."
                   "topologySpreadKey (or, with a leader and workers, topologyKey); the Instances are not spread")
    return out


def _pod_specs(merged: JSONDict) -> list[tuple[str, JSONDict]]:
    """(where, pod spec fields) of each pod shape of a merged component."""
    shapes = [("", merged)]
    for role in ("leader", "worker"):
        if isinstance(merged.get(role), dict):
            shapes.append((f".{role}", {**merged, **merged[role]}))
    return shapes


def _containers_text(merged: JSONDict) -> str:
    parts: list[str] = []
    for _, spec in _pod_specs(merged):
        for container in [*(spec.get("containers") or []), spec.get("runner") or {}]:
            if not isinstance(container, dict):
                continue
            parts += [str(x) for x in (container.get("command") or []) + (container.get("args") or [])]
            parts += [f"{e.get('name')}={e.get('value', '')}" for e in container.get("env") or []
                      if isinstance(e, dict)]
    return "\n".join(parts)


def validate_inference_service(obj: JSONDict, ctx: Admission | None = None, old: JSONDict | None = None) -> Findings:
    """`old`: the stored object on an update, for the checks of an edit."""
    ctx = ctx or Admission()
    errors: list[str] = []
    warnings: list[str] = []
    name = str((obj.get("metadata") or {}).get("name") or "")
    spec: JSONDict = obj.get("spec") or {}
    runtime_raw = ctx.runtime_raw or {}

    # Pod-template fields first: everything after reads them. One of the wrong type is refused with its path.
    wrong = size_problems(spec) or component_problems(spec, "spec", c.COMPONENTS)
    if ctx.runtime_name:
        wrong += component_problems(runtime_raw, f"runtime {ctx.runtime_name} spec",
                                    tuple(f"{comp}Config" for comp in c.COMPONENTS))
    if wrong:
        return Findings((str(InvalidSpec(wrong)),), ())
    if name and not re.match(NAME_PATTERN, name):
        errors.append(f"invalid InferenceService name {name!r}, must match {NAME_PATTERN!r}")
    if spec.get("decoder") is not None and spec.get("engine") is None:
        errors.append("decoder cannot be specified without engine")

    modes = {comp: resolve_mode(spec, runtime_raw, comp) for comp in c.COMPONENTS if spec.get(comp) is not None}
    if c.ENGINE in modes and c.DECODER in modes:
        declared = {comp: ((spec.get(comp) or {}).get("annotations") or {}).get(c.ANN_DEPLOYMENT_MODE)
                    or spec.get("deploymentMode") or "" for comp in (c.ENGINE, c.DECODER)}
        if c.MODE_OMENATIVE in declared.values() and declared[c.ENGINE] != declared[c.DECODER]:
            errors.append(
                f'InvalidDeploymentModeCombination: engine deploymentMode="{declared[c.ENGINE]}" does not match '
                f'decoder deploymentMode="{declared[c.DECODER]}"; when either is OMENative, both must use the same '
                "value")

    for comp in c.COMPONENTS:
        own = spec.get(comp)
        if own is None:
            continue
        if not isinstance(own, dict):
            errors.append(f"{comp} must be an object")
            continue
        if comp in (c.ENGINE, c.DECODER):
            has_leader, has_worker = own.get("leader") is not None, own.get("worker") is not None
            if has_leader != has_worker:
                given, missing = ("leader", "worker") if has_leader else ("worker", "leader")
                errors.append(
                    f"{comp} declares {given} without {missing}: a multi-node {comp} needs both leader and worker "
                    f"(leader: {{}} and worker: {{}} keep the runtime's settings)")
            size = (own.get("worker") or {}).get("size") if isinstance(own.get("worker"), dict) else None
            if size is not None and (not isinstance(size, int) or size < 1):
                errors.append(f"{comp}.worker.size must be at least 1, got {size!r}")
        low, high = own.get("minReplicas"), own.get("maxReplicas")
        if isinstance(low, int) and isinstance(high, int) and high and low > high:
            errors.append(f"{comp}.minReplicas ({low}) is greater than {comp}.maxReplicas ({high})")
        merged = merge_component(runtime_raw.get(f"{comp}Config"), own) or {}
        errors += _lifecycle_errors(comp, merged.get("lifecycle"))
        errors += _keda_errors(comp, merged.get("autoscaler"), own.get("minReplicas"))
        mode = modes[comp]
        if not mode.omenative:
            continue
        multi = is_multi_pod(merged)
        inherited_size = (merged.get("worker") or {}).get("size") if isinstance(merged.get("worker"), dict) else None
        if multi and (own.get("worker") or {}).get("size") is None and inherited_size is not None and \
                (not isinstance(inherited_size, int) or inherited_size < 1):
            errors.append(f"{comp}.worker.size from the runtime's {comp}Config.worker.size must be at least 1, got "
                          f"{inherited_size!r}: set {comp}.worker.size in the InferenceService")
        ready_policy = (merged.get("lifecycle") or {}).get("readyPolicy")
        if multi and ready_policy not in (None, "AllPodReady"):
            errors.append(f"{comp}.lifecycle.readyPolicy {ready_policy!r} is not allowed for a {comp} with a leader "
                          "and workers: use AllPodReady")
        if name:
            _, max_replicas = replica_bounds(merged, comp, ctx.config)
            # Indexes grow past maxReplicas during surges; the bound keeps room for twice as many Instances.
            pod = naming.longest_pod_name(name, comp, max(2 * max_replicas - 1, 9),
                                          worker_size(merged) if multi else 0)
            longest = max(pod, naming.headless_service_name(name, comp), key=len)
            if len(longest) > naming.MAX_DNS_LABEL:
                limit = naming.MAX_DNS_LABEL - (len(longest) - len(name))
                errors.append(
                    f"name {name!r} is too long: the {comp}'s names such as {longest!r} would be {len(longest)} "
                    f"characters, over the {naming.MAX_DNS_LABEL} a pod hostname or Service name allows; use at "
                    f"most {limit} characters for this InferenceService")
            revision = naming.revision_headless_service_name(name, comp, "0" * 8)
            if len(longest) <= naming.MAX_DNS_LABEL < len(revision):
                # A warning, not a refusal: an InferenceService admitted before the revision Services existed
                # must stay editable. It serves; only the per-revision pair is missing.
                warnings.append(
                    f"name {name!r} is too long for the {comp}'s revision Services, such as {revision!r} "
                    f"({len(revision)} characters, over {naming.MAX_DNS_LABEL}): omenative does not create them, so "
                    "a canary analysis that queries {{.CanaryService}} finds no series and "
                    f"OME_{comp.upper()}_REVISION_ENDPOINT is not set; use at most "
                    f"{naming.MAX_DNS_LABEL - (len(revision) - len(name))} characters")
        warnings += _topology_warnings(comp, merged, multi)
        warnings += unsupported.component_warnings(comp, own, f"spec.{comp}")
        if ctx.runtime_name:
            warnings += unsupported.component_warnings(comp, runtime_raw.get(f"{comp}Config"),
                                                       f"runtime {ctx.runtime_name} spec.{comp}Config")
        if own.get("deploymentStrategy") is not None:
            warnings.append(
                f'{comp}.deploymentStrategy is set but deploymentMode is "OMENative"; deploymentStrategy applies '
                f"only to RawDeployment and is ignored here — use {comp}.lifecycle.updateStrategy.rollingUpdate "
                "for rollout pacing")
        lws = sorted(set(_LWS_VAR.findall(_containers_text(merged))))
        if lws:
            warnings.append(
                f"{comp} uses {', '.join(lws)}, which only a LeaderWorkerSet sets; OMENative translates them to "
                "OME_LEADER_ADDRESS, OME_INSTANCE_POD_COUNT and OME_INSTANCE_POD_RANK, but make an OMENative copy "
                "of the runtime that uses those variables directly")
        for where, pod_spec in _pod_specs(merged):
            if pod_spec.get("hostNetwork") is True and pod_spec.get("dnsPolicy") != "ClusterFirstWithHostNet":
                warnings.append(
                    f"{comp}{where} runs with hostNetwork: true but dnsPolicy is not ClusterFirstWithHostNet, so its "
                    "pods use the node's DNS and cannot resolve the leader's name; set dnsPolicy: "
                    "ClusterFirstWithHostNet")
                break

    if any(mode.omenative for mode in modes.values()):
        warnings += unsupported.spec_warnings(spec)
        warnings += ingress.admission_warnings(ctx.config, obj.get("metadata") or {})
    rollout_errors, rollout_warnings = validate_rollout(
        spec, dict((obj.get("metadata") or {}).get("annotations") or {}),
        (old.get("spec") or {}) if old else None)
    errors += rollout_errors
    warnings += rollout_warnings
    if ctx.runtime is not None and ctx.model is not None and ctx.runtime_name and ctx.model_name \
            and (spec.get("runtime") or {}).get("name"):
        warning = named_runtime_warning(ctx.runtime_name, ctx.model_name, ctx.model, ctx.runtime)
        if warning:
            warnings.append(warning)
    return Findings(tuple(errors), tuple(warnings))
