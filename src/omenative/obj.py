"""The one name for an object as the API server sends it (a decoded JSON mapping), and the fields of it the
server keeps for itself that no controller reads.

Every layer passes objects in this shape (the caches hold them, the planners read them, the applier writes them), so
it is defined once, outside the layers, where each of them may import it.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def strip_server_fields(obj: Obj) -> Obj:
    """The default transform: drops fields no controller reads and that only cost memory."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if annotations:
            annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return obj
