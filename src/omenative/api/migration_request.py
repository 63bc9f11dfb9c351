"""Migration requests: the annotation `ome.io/migration-request-v1-<uuid>` on an InferenceService, whose value is a
JSON object (OME's concepts/omenative/migration-and-transient-scale.md). Pure: parsed and checked the same way by
the webhook, the controllers and kubectl-ome. Every error message starts with `migration request`, as OME's webhook's
do."""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from omenative.api.types import MigrationStatus

PREFIX = "ome.io/migration-request-v1-"
SCHEMA_VERSION = "v1"
COMPONENTS = ("engine", "decoder", "router")
# A record's phases (status.migrations[].phase), in the order a move goes through them.
ACCEPTED, SURGE_PENDING, SURGE_READY, DRAINING, COMPLETED, FAILED, RELOCATED = (
    "Accepted", "SurgePending", "SurgeReady", "Draining", "Completed", "Failed", "Relocated")
TERMINAL_PHASES = (COMPLETED, FAILED, RELOCATED)  # a record in one of these is history, never work
MANUAL, AUTO = "Manual", "Auto"  # who started it: a request, or the controller's relocation
MAX_HINTS = 8
MAX_REASON = 256
MAX_REQUESTED_BY = 128
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_NODE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_REQUESTED_BY = re.compile(r"^[A-Za-z0-9_.:/@+-]{1,128}$")
_FIELDS = {"schemaVersion", "component", "instance", "from_node", "hint_target_nodes", "reason", "requested_at",
           "requested_by"}


@attrs.frozen(kw_only=True)
class Request:
    uuid: str
    component: str
    instance: int
    from_node: str
    hints: tuple[str, ...] = ()
    reason: str | None = None
    requested_at: str | None = None
    requested_by: str | None = None

    def value(self) -> str:
        """The annotation's value, as kubectl-ome writes it."""
        body: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION, "component": self.component,
                                "instance": self.instance, "from_node": self.from_node}
        if self.hints:
            body["hint_target_nodes"] = list(self.hints)
        for key, value in (("reason", self.reason), ("requested_at", self.requested_at),
                           ("requested_by", self.requested_by)):
            if value is not None:
                body[key] = value
        return json.dumps(body, separators=(",", ":"))


def is_request(key: str) -> bool:
    return key.startswith(PREFIX)


def request_keys(annotations: dict[str, str] | None) -> list[str]:
    return sorted(k for k in (annotations or {}) if is_request(k))


def uuid_of(key: str) -> str:
    """The request ID an annotation key carries."""
    return key[len(PREFIX):]


def is_uuid(text: str | None) -> bool:
    """A request ID in canonical form (lowercase, hyphenated)."""
    return text is not None and bool(_UUID.match(text))


def valid_requested_by(text: Any) -> bool:
    return isinstance(text, str) and bool(_REQUESTED_BY.match(text))


def valid_node_name(name: Any) -> bool:
    return isinstance(name, str) and bool(_NODE.match(name))


def parse(key: str, value: str) -> Request | str:
    """The request an annotation holds, or why it is malformed."""
    uuid = uuid_of(key)
    if not is_uuid(uuid):
        return f"migration request {key}: the key must end in a lowercase canonical UUID"
    try:
        body = json.loads(value)
    except json.JSONDecodeError as exc:
        return f"migration request {uuid}: the value is not JSON ({exc.msg})"
    if not isinstance(body, dict):
        return f"migration request {uuid}: the value must be a JSON object"
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        return f"migration request {uuid}: unknown field(s) {', '.join(unknown)}"
    if body.get("schemaVersion") != SCHEMA_VERSION:
        return f'migration request {uuid}: schemaVersion must be "{SCHEMA_VERSION}"'
    component = body.get("component")
    if component not in COMPONENTS:
        return f"migration request {uuid}: component must be engine, decoder or router"
    instance = body.get("instance")
    if not isinstance(instance, int) or isinstance(instance, bool) or not 0 <= instance <= 2**31 - 1:
        return f"migration request {uuid}: instance must be an integer from 0 through 2147483647"
    from_node = body.get("from_node")
    if not isinstance(from_node, str) or not valid_node_name(from_node):
        return f"migration request {uuid}: from_node must be a node name"
    hints = body.get("hint_target_nodes")
    if hints is None:
        hints = []
    if not isinstance(hints, list) or len(hints) > MAX_HINTS or not all(valid_node_name(h) for h in hints):
        return f"migration request {uuid}: hint_target_nodes must be a list of at most {MAX_HINTS} node names"
    if len(set(hints)) != len(hints) or from_node in hints:
        return f"migration request {uuid}: hint_target_nodes must not repeat a node or name from_node"
    reason = body.get("reason")
    if reason is not None and (not isinstance(reason, str) or len(reason.encode()) > MAX_REASON):
        return f"migration request {uuid}: reason must be text of at most {MAX_REASON} bytes"
    requested_by = body.get("requested_by")
    if requested_by is not None and not valid_requested_by(requested_by):
        return (f"migration request {uuid}: requested_by must be at most {MAX_REQUESTED_BY} letters, digits and "
                "_.:/@+- characters")
    requested_at = body.get("requested_at")
    if requested_at is not None and not isinstance(requested_at, str):
        return f"migration request {uuid}: requested_at must be an RFC 3339 time"
    return Request(uuid=uuid, component=component, instance=instance, from_node=from_node, hints=tuple(hints),
                   reason=reason, requested_at=requested_at, requested_by=requested_by)


def check_annotations(annotations: dict[str, str] | None, components: set[str]) -> list[str]:
    """Errors for the malformed requests among an InferenceService's annotations, and for requests naming a component
    it does not declare."""
    errors = []
    for key in request_keys(annotations):
        parsed = parse(key, (annotations or {})[key])
        if isinstance(parsed, str):
            errors.append(parsed)
        elif parsed.component not in components:
            errors.append(f"migration request {parsed.uuid}: the InferenceService has no {parsed.component}")
    return errors


def active(records: list[MigrationStatus]) -> list[MigrationStatus]:
    """The records still at work (not history)."""
    return [r for r in records if r.phase not in TERMINAL_PHASES]


def placement(records: list[MigrationStatus], index: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The nodes a surge Instance must avoid and those it prefers, while its migration runs (read by the planner that
    allocates the surge and by the Instance controller that renders its pods)."""
    for record in active(records):
        if record.surge_instance == index and record.phase in (SURGE_PENDING, SURGE_READY, DRAINING):
            return ((record.from_node,) if record.from_node else ()), tuple(record.hint_target_nodes or ())
    return relocated_from(records, index), ()


def relocated_from(records: list[MigrationStatus], index: int) -> tuple[str, ...]:
    """The nodes an Instance's relocations left since it was last Ready: its rebuilds avoid all of them."""
    return tuple(sorted({r.from_node for r in records if r.trigger == AUTO and r.source_instance == index
                         and r.phase == RELOCATED and r.succeeded is None and r.from_node}))
