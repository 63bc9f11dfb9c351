"""The one name for an object as the API server sends it: a decoded JSON mapping.

Every layer passes objects in this shape (the caches hold them, the planners read them, the applier writes them), so
it is defined once, outside the layers, where each of them may import it.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
