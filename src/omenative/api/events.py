"""An event to record: what a pure planner says, and the controller records on an object.

One shape for every planner (the replica's rows, the operators' requests, the rollout, the Instance's pods), so the
controllers pass events on without translating them.
"""

from __future__ import annotations

import attrs

NORMAL = "Normal"
WARNING = "Warning"


@attrs.frozen
class Event:
    type: str  # Normal or Warning
    reason: str  # UpperCamelCase, a contract users' alerts match on
    message: str
