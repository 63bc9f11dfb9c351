"""Runtime selection: whether a runtime supports a model, and which runtime to use when none is named.

The rules and the reason texts follow OME's matching pages (reference/matching/*): a format entry matches when the
format, framework, architecture and quantization agree (a value set on one side only is a mismatch) and the entry's
operators accept the model's versions; a runtime must also cover the model's size.
"""

from __future__ import annotations

import re

import attrs

from omenative.api.types import BaseModelSpec, ModelFormat, ServingRuntimeSpec, SupportedModelFormat
from omenative.api.units import InvalidValue, parse_model_size

_VERSION = re.compile(r"^(v)?(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*))?(?:\.(0|[1-9][0-9]*))?"
                      r"((?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?|\.[0-9A-Za-z][0-9A-Za-z.]*)?$")


@attrs.frozen
class Version:
    prefixed: bool
    numbers: tuple[int, ...]
    suffix: str  # pre-release, build or dev part, as written

    @classmethod
    def parse(cls, text: str) -> Version | None:
        match = _VERSION.match(text)
        if not match:
            return None
        numbers = tuple(int(g) for g in match.group(2, 3, 4) if g is not None)
        suffix = match.group(5) or ""
        if suffix and len(numbers) < 3:
            return None  # a suffix is allowed only after the third number
        if suffix in ("-", "+"):
            return None
        return cls(bool(match.group(1)), numbers, suffix)

    def padded(self) -> tuple[int, int, int]:
        n = (*self.numbers, 0, 0, 0)
        return n[0], n[1], n[2]


def model_scopes(kind: str | None) -> tuple[bool, ...]:
    """Where `spec.model` is looked up, in order (True: the InferenceService's namespace). OME's kind defaults to
    ClusterBaseModel, which is needed even when a BaseModel in the namespace has the name; BaseModel looks only
    there."""
    return (True,) if kind == "BaseModel" else (False,)


def runtime_scopes(kind: str | None) -> tuple[bool, ...]:
    """Where `spec.runtime` is looked up, in order: ClusterServingRuntime (the default) first and then a
    ServingRuntime in the namespace; ServingRuntime only there."""
    return (True,) if kind == "ServingRuntime" else (False, True)


def version_accepts(runtime: str, model: str, operator: str | None) -> bool:
    """Whether a runtime entry's version (on the left) accepts the model's, under the entry's operator."""
    rv, mv = Version.parse(runtime), Version.parse(model)
    if rv is None or mv is None:
        return False
    operator = operator or "Equal"
    if operator == "Equal" or rv.suffix or mv.suffix:
        return rv.padded() == mv.padded() and rv.suffix == mv.suffix
    if len(rv.numbers) != len(mv.numbers) or rv.prefixed != mv.prefixed:
        return False
    if operator == "GreaterThan":
        return rv.numbers > mv.numbers
    if operator == "GreaterThanOrEqual":
        return rv.numbers >= mv.numbers
    return rv.numbers == mv.numbers  # an unknown operator behaves as a strict Equal


def model_label(model: BaseModelSpec) -> str:
    """The `mt:` label naming a model's format in mismatch reasons."""
    fmt = model.model_format or ModelFormat()
    fw = model.model_framework or ModelFormat()
    parts = [fmt.name, fmt.version, model.model_architecture, model.quantization, fw.name, fw.version]
    return "mt:" + ":".join(p for p in parts if p)


def _versions(kind: str, model: ModelFormat, entry: ModelFormat) -> list[str]:
    if model.version is None and entry.version is None:
        return []
    if model.version is None:
        return [f"model has no {kind} version but runtime requires {entry.version}"]
    if entry.version is None:
        return [f"model has {kind} version but runtime has no version requirement"]
    if not version_accepts(entry.version, model.version, entry.operator):
        return [f"{kind} version mismatch (model={model.version}, runtime={entry.version})"]
    return []


def _same(kind: str, model: str | None, runtime: str | None) -> list[str]:
    if (model or "") == (runtime or ""):
        return []
    return [f"{kind} mismatch (model={model or ''}, runtime={runtime or ''})"]


def entry_differences(model: BaseModelSpec, entry: SupportedModelFormat) -> list[str]:
    """Every way a supportedModelFormats entry differs from the model (empty: it matches)."""
    out: list[str] = []
    model_fmt = model.model_format or ModelFormat()
    entry_fmt = entry.model_format or ModelFormat(name=entry.name, version=entry.version)
    if (model_fmt.name or "") != (entry_fmt.name or ""):
        out.append(f"format name mismatch (model={model_fmt.name or ''}, runtime={entry_fmt.name or ''})")
    else:
        out += _versions("format", model_fmt, entry_fmt)
    out += _same("architecture", model.model_architecture, entry.model_architecture)
    out += _same("quantization", model.quantization, entry.quantization)
    model_fw, entry_fw = model.model_framework, entry.model_framework
    if entry_fw is not None and entry_fw.name:
        if model_fw is None or not model_fw.name:
            out.append(f"model has no framework but runtime requires {entry_fw.name}")
        elif model_fw.name != entry_fw.name:
            out.append(f"framework name mismatch (model={model_fw.name}, runtime={entry_fw.name})")
        else:
            out += _versions("framework", model_fw, entry_fw)
    elif model_fw is not None and model_fw.name:
        out.append(f"framework name mismatch (model={model_fw.name}, runtime=)")
    return out


def _bound(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return parse_model_size(text)
    except InvalidValue:
        return 0.0  # as OME: an unparsable bound reads as 0


def size_reason(model: BaseModelSpec, runtime: ServingRuntimeSpec) -> str | None:
    rng = runtime.model_size_range
    if not model.model_parameter_size or rng is None or (not rng.min and not rng.max):
        return None
    try:
        size = parse_model_size(model.model_parameter_size)
    except InvalidValue:
        size = 0.0
    low, high = _bound(rng.min), _bound(rng.max)
    if (low is not None and size < low) or (high is not None and size > high):
        left = f"[{rng.min}" if rng.min else "(-inf"
        right = f"{rng.max}]" if rng.max else "inf)"
        return f"model size {model.model_parameter_size} is outside supported range {left}, {right}"
    return None


def incompatibility(model: BaseModelSpec, runtime: ServingRuntimeSpec) -> str | None:
    """Why the runtime does not support the model, in OME's words; None when it does."""
    entries = runtime.supported_model_formats or []
    differences = [entry_differences(model, e) for e in entries]
    if not any(not d for d in differences):
        detail = "; ".join(", ".join(d) for d in differences) if differences else "the runtime lists no formats"
        return f"model format '{model_label(model)}' not in supported formats: {detail}"
    return size_reason(model, runtime)


def format_name(model: BaseModelSpec, fallback: str) -> str:
    return (model.model_format.name if model.model_format and model.model_format.name else None) or fallback


def named_runtime_warning(runtime_name: str, model_name: str, model: BaseModelSpec,
                          runtime: ServingRuntimeSpec) -> str | None:
    """The admission warning for a runtime named explicitly that does not declare support for the model."""
    reason = incompatibility(model, runtime)
    if reason is None:
        return None
    return (f'runtime "{runtime_name}" does not declare support for model "{model_name}" '
            f"(runtime {runtime_name} does not support model {format_name(model, model_name)}: {reason}); "
            "proceeding because the runtime was named explicitly")


# -- automatic selection

DEFAULT_FORMAT_WEIGHT = 10
DEFAULT_FRAMEWORK_WEIGHT = 5


@attrs.frozen
class Candidate:
    name: str
    namespaced: bool
    spec: ServingRuntimeSpec


@attrs.frozen
class Selection:
    runtime: Candidate | None
    excluded: tuple[tuple[str, str], ...]  # (runtime, reason)
    checked_namespaced: int
    checked_cluster: int


def score(model: BaseModelSpec, runtime: ServingRuntimeSpec) -> int:
    best = 0
    for entry in runtime.supported_model_formats or []:
        if entry.auto_select is False or entry_differences(model, entry):
            continue
        priority = entry.priority or 1
        fmt_weight = (entry.model_format.weight if entry.model_format else None) or DEFAULT_FORMAT_WEIGHT
        fw_weight = (entry.model_framework.weight if entry.model_framework else None) or DEFAULT_FRAMEWORK_WEIGHT
        total = fmt_weight * priority + (fw_weight * priority if entry.model_framework else 0)
        best = max(best, total)
    return best


def _size_distance(model: BaseModelSpec, runtime: ServingRuntimeSpec) -> float:
    rng = runtime.model_size_range
    if not model.model_parameter_size or rng is None:
        return 0.0
    try:
        size = parse_model_size(model.model_parameter_size)
    except InvalidValue:
        return 0.0
    low, high = _bound(rng.min), _bound(rng.max)
    return abs((low if low is not None else size) - size) + abs((high if high is not None else size) - size)


def select_runtime(model: BaseModelSpec, candidates: list[Candidate]) -> Selection:
    """The best runtime for the model among namespaced and cluster runtimes, with why each other was left out."""
    excluded: list[tuple[str, str]] = []
    fitting: list[tuple[int, float, bool, str, Candidate]] = []
    for cand in candidates:
        scope = "namespace" if cand.namespaced else "cluster"
        if cand.spec.disabled:
            excluded.append((cand.name, f"{scope}-scoped runtime {cand.name} is disabled"))
            continue
        reason = incompatibility(model, cand.spec)
        if reason is not None:
            excluded.append((cand.name, reason))
            continue
        if not any(e.auto_select for e in cand.spec.supported_model_formats or []):
            excluded.append((cand.name, "supports the model but has no supportedModelFormats[].autoSelect=true "
                                        "entry, so automatic selection skips it"))
            continue
        value = score(model, cand.spec)
        if value <= 0:
            excluded.append((cand.name, "no autoSelect entry matches the model"))
            continue
        fitting.append((value, _size_distance(model, cand.spec), cand.namespaced, cand.name, cand))
    fitting.sort(key=lambda f: (not f[2], -f[0], f[1], f[3]))
    return Selection(
        runtime=fitting[0][4] if fitting else None,
        excluded=tuple(excluded),
        checked_namespaced=sum(1 for c in candidates if c.namespaced),
        checked_cluster=sum(1 for c in candidates if not c.namespaced),
    )


def no_runtime_message(model_name: str, model: BaseModelSpec, namespace: str, selection: Selection) -> str:
    fmt = format_name(model, model_name)
    checked = selection.checked_namespaced + selection.checked_cluster
    reasons = "; ".join(f"{name} ({reason})" for name, reason in selection.excluded)
    return (f"no runtime found to support model {fmt} with format {fmt} in namespace {namespace}. "
            f"Checked {checked} runtimes ({selection.checked_namespaced} namespace-scoped, "
            f"{selection.checked_cluster} cluster-scoped). Excluded runtimes: {reasons}")
