"""Retry blocks: failed attempts at a revision, retried on a backoff and then held. Pure.

OME's rules (guides/roll-out-changes/release-a-held-revision.md):
- only failures the revision causes count (an image that cannot be pulled, a missing Secret, a pod the API server
  rejects); a crash loop, a deadline or a full cluster never holds a revision, since a node can cause those too;
- a revision gets `attempts` attempts, the second `backoff` after the first failure and each next one twice as long
  after the last; then it is Held until a new revision replaces it or an operator releases it;
- without a retry policy (`attempts` 0), the first counted failure holds it.
One block per target revision lives in the InferenceReplica's status, so a restarted controller carries it on.
"""

from __future__ import annotations

import attrs

from omenative.api.times import format_time, parse_time
from omenative.api.types import RetryBlock

BACKOFF, RUNNING, HELD = "Backoff", "RetryInProgress", "Held"
REVISION_CAUSED = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError",
                             "InvalidPodSpec"})


@attrs.frozen(kw_only=True)
class RetryPolicy:
    attempts: int = 3  # 0: no retries, the first counted failure holds the revision
    backoff: float = 60.0  # seconds before the second attempt; doubled for each next one


@attrs.define
class RetryBlocks:
    """The blocks of one component, changed in place by a planning pass."""

    policy: RetryPolicy
    blocks: dict[str, RetryBlock]
    now: float
    held: list[RetryBlock] = attrs.field(factory=list)  # blocks that became Held in this pass

    @classmethod
    def of(cls, blocks: list[RetryBlock], policy: RetryPolicy, now: float, live: set[str]) -> RetryBlocks:
        """Blocks of revisions that are still targeted; a block whose revision was replaced goes."""
        kept = {b.target_revision: b for b in blocks if b.target_revision in live}
        return cls(policy, {k: v for k, v in kept.items() if k is not None}, now)

    def state(self, revision: str) -> str | None:
        block = self.blocks.get(revision)
        return block.state if block is not None else None

    def wait_until(self, revision: str) -> float | None:
        """When an attempt at the revision may start: None if it may now, inf while held or another runs."""
        block = self.blocks.get(revision)
        if block is None:
            return None
        if block.state in (HELD, RUNNING):
            return float("inf")
        at = parse_time(block.next_retry_at)
        return at if at is not None and at > self.now else None

    def start_attempt(self, revision: str) -> None:
        block = self.blocks.get(revision)
        if block is not None:
            self.blocks[revision] = attrs.evolve(block, state=RUNNING, next_retry_at=None,
                                                 attempts_started=(block.attempts_started or 0) + 1)

    def record_failure(self, revision: str, reason: str) -> None:
        """A counted failure of an attempt at the revision (callers filter with `counts`)."""
        now = format_time(self.now)
        block = self.blocks.get(revision)
        if block is None:
            block = RetryBlock(target_revision=revision, attempts_started=1, first_failure_at=now)
        elif block.state == BACKOFF:
            # Another Instance of the same wave failed: the same attempt, one more piece of evidence.
            self.blocks[revision] = attrs.evolve(block, last_failure_at=now, reason=reason)
            return
        attempts = block.attempts_started or 1
        if attempts >= max(self.policy.attempts, 1):
            held = attrs.evolve(block, state=HELD, next_retry_at=None, last_failure_at=now, reason=reason)
            if block.state != HELD:
                self.held.append(held)
            self.blocks[revision] = held
            return
        delay = self.policy.backoff * 2 ** (attempts - 1)
        self.blocks[revision] = attrs.evolve(block, state=BACKOFF, next_retry_at=format_time(self.now + delay),
                                             last_failure_at=now, reason=reason)

    def succeeded(self, revision: str) -> None:
        self.blocks.pop(revision, None)

    def release(self, revision: str) -> RetryBlock | None:
        """Removes a Held block (an operator's release); the block as it was, or None when none was Held."""
        block = self.blocks.get(revision)
        if block is None or block.state != HELD:
            return None
        return self.blocks.pop(revision)

    def to_list(self) -> list[RetryBlock]:
        return [self.blocks[k] for k in sorted(self.blocks)]


def counts(reason: str | None) -> bool:
    """Whether a failure with this reason counts against the revision."""
    return reason in REVISION_CAUSED
