"""An event to record: what a pure planner says, and the controller records on an object.

One shape for every planner (the replica's rows, the operators' requests, the rollout, the Instance's pods), so the
controllers pass events on without translating them. A named tuple: read by field, unpacked as (type, reason,
message).
"""

from __future__ import annotations

from typing import NamedTuple

NORMAL = "Normal"
WARNING = "Warning"


class Event(NamedTuple):
    type: str  # Normal or Warning
    reason: str  # UpperCamelCase, a contract users' alerts match on
    message: str
