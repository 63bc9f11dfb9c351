"""Which nodes a pod template can run on at all, when it names them: `nodeName`, the `kubernetes.io/hostname`
node selector, or required node-affinity terms on the hostname label or the node's name. A migration that must
leave the only node its source may use cannot be met (OME's MigrationNodeAffinityConflict). Pure."""

from __future__ import annotations

from typing import Any

JSONDict = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"


def _term_nodes(term: Any) -> set[str] | None:
    """The nodes one required term allows, or None when it does not name nodes."""
    if not isinstance(term, dict):
        return None
    allowed: set[str] | None = None
    for key, items in (("key", term.get("matchExpressions")), ("key", term.get("matchFields"))):
        for item in items or []:
            if not isinstance(item, dict) or item.get("operator") != "In":
                continue
            if item.get(key) in (HOSTNAME, "metadata.name"):
                values = {str(v) for v in item.get("values") or []}
                allowed = values if allowed is None else allowed & values
    return allowed


def allowed_nodes(runners: list[JSONDict] | None) -> frozenset[str] | None:
    """The nodes every pod of an Instance may run on (each pod must have one), or None when any node may do."""
    out: set[str] | None = None
    for runner in runners or []:
        spec = ((runner.get("template") or {}).get("spec") or {}) if isinstance(runner, dict) else {}
        allowed: set[str] | None = None
        if spec.get("nodeName"):
            allowed = {str(spec["nodeName"])}
        host = (spec.get("nodeSelector") or {}).get(HOSTNAME) if isinstance(spec.get("nodeSelector"), dict) else None
        if host:
            allowed = {str(host)} if allowed is None else allowed & {str(host)}
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        terms = required.get("nodeSelectorTerms") or [] if isinstance(required, dict) else []
        named = [_term_nodes(t) for t in terms]
        if named and all(n is not None for n in named):
            union = set().union(*[n for n in named if n is not None])
            allowed = union if allowed is None else allowed & union
        if allowed is not None:
            out = allowed if out is None else out | allowed
    return frozenset(out) if out is not None else None
