"""What an API server's refusal of a write means for the Instance that needed it. Pure: an answer in, a cause out.

The API server answers a create it will not make with a status and a message, and that answer exists only in the
reply to the request: a later pass cannot read it off the cluster. So the writer classifies it at once and records
it (see `controllers/refusals.py`); the planners then act on the cause:

- `QuotaExceeded`: a ResourceQuota has no room. It clears by itself when the quota allows, so the Instance's
  readiness clock stops while it lasts (OME's `waiting: QuotaExceeded`) and nothing fails.
- `InvalidPodSpec`: the object can never be made as written: the API server found it invalid (422, 400), Pod
  Security refused it, an admission webhook denied it, or a quota demands a field the pod lacks. Only a new
  revision helps, so the Instance fails at once and the retry blocks pace it (held after their attempts).
- `NamespaceTerminating`: the namespace is being deleted; nothing created there will stay (OME fails the Instance).
- `Forbidden`: the controller itself may not write there (RBAC). An operator has to act; nothing the Instance does
  helps, but it is not the revision's fault either, so it waits with the cause named.

Throttling, timeouts and server errors are not refusals: the request is retried with the work queue's backoff.
"""

from __future__ import annotations

import re

import attrs

QUOTA_EXCEEDED = "QuotaExceeded"
INVALID_POD_SPEC = "InvalidPodSpec"
NAMESPACE_TERMINATING = "NamespaceTerminating"
FORBIDDEN = "Forbidden"
# Not an answer of the API server: the Instance's PodGroup name is taken by another owner (OME's gang-scheduling
# page: the Instance fails and none of its pods is created).
PODGROUP_OWNERSHIP_CONFLICT = "PodGroupOwnershipConflict"

# Causes that do not clear by themselves: the Instance fails and its revision's retry blocks take over.
LASTING = frozenset({INVALID_POD_SPEC, NAMESPACE_TERMINATING, PODGROUP_OWNERSHIP_CONFLICT})


def classify(status: int, reason: str, message: str) -> str | None:
    """The cause of a refused write, or None when the answer is not a refusal (retry it as any error)."""
    text = message or ""
    if status == 403:
        if "exceeded quota" in text:
            return QUOTA_EXCEEDED
        if "failed quota" in text or "must specify" in text:
            return INVALID_POD_SPEC  # the quota requires a field (limits.cpu, ...) the pod does not set
        if "violates PodSecurity" in text or "denied the request" in text:
            return INVALID_POD_SPEC
        if "because it is being terminated" in text:
            return NAMESPACE_TERMINATING
        return FORBIDDEN
    if status in (400, 422):
        return INVALID_POD_SPEC  # invalid (including a name too long), or an admission webhook's denial
    return None


_VOLATILE = re.compile(r'"[^"]*"|\d+')


def cause_key(cause: str, kind: str, message: str) -> str:
    """Refusals that are the same cause for a user: the object's quoted name and the numbers (a quota's usage)
    change from one attempt to the next; what is left says which rule refused which kind of object."""
    return f"{cause}/{kind}/{_VOLATILE.sub('', message)}"


@attrs.frozen(kw_only=True)
class Refusal:
    """One refused write of an Instance's object, as the writer saw it."""

    cause: str  # QUOTA_EXCEEDED, INVALID_POD_SPEC, ...
    verb: str  # "create"
    kind: str  # "Pod", "PodGroup"
    name: str
    message: str  # the API server's own words
    at: float  # when the last refusal of this cause came
    since: float  # when this cause first refused the Instance (continuously since)
    incarnation: int  # the attempt it refused: a later attempt is not judged by an earlier one's refusal

    @property
    def lasting(self) -> bool:
        return self.cause in LASTING

    def summary(self) -> str:
        """One line for a user: `pod create refused: exceeded quota: q, ...`."""
        text = self.message
        # The API server prefixes its reason with the object: `pods "x" is forbidden: exceeded quota: ...`.
        _, sep, rest = text.partition(" is forbidden: ")
        if sep:
            text = rest
        return f"{self.kind.lower()} {self.verb} refused: {text}"
