"""Every rejection and warning of the rollout pages' admission tables, from the pure checks
(api/rollout_validation.py); tests/e2e/test_rollouts.py applies the same specs through kubectl."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from omenative.api.rollout_validation import validate_rollout
from tests.support.rollout_specs import EDITS, REJECTED, WARNED, spec

REASON = re.compile(r"\((\w+)\)$")


@pytest.mark.parametrize(("reason", "body", "annotations"), REJECTED, ids=[r for r, _, _ in REJECTED])
def test_each_rejection_gives_its_reason(reason: str, body: dict[str, Any], annotations: dict[str, str]) -> None:
    errors, _ = validate_rollout(body, annotations)
    assert errors and all(REASON.search(e) for e in errors), errors
    assert reason in {REASON.search(e).group(1) for e in errors}, errors  # type: ignore[union-attr]


@pytest.mark.parametrize(("reason", "body", "annotations"), WARNED, ids=[r for r, _, _ in WARNED])
def test_each_warning_admits_with_its_reason(reason: str, body: dict[str, Any], annotations: dict[str, str]) -> None:
    errors, warnings = validate_rollout(body, annotations)
    assert errors == [] and any(w.endswith(f"({reason})") for w in warnings), warnings


@pytest.mark.parametrize(("reason", "old", "new"), EDITS, ids=[r for r, _, _ in EDITS])
def test_each_edit_rule(reason: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    assert validate_rollout(old, {}) == ([], [])
    assert validate_rollout(new, {}) == ([], [])  # fine as a create: only the edit breaks the rule
    errors, _ = validate_rollout(new, {}, old_spec=old)
    assert [REASON.search(e).group(1) for e in errors] == [reason], errors  # type: ignore[union-attr]


def test_the_pages_examples_are_admitted() -> None:
    examples = [
        spec([{"components": ["engine", "decoder"]}]),
        spec([{"components": ["engine", "decoder"], "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
               "maintainRatio": {"tolerance": 25}}]),
        spec([{"components": ["decoder"], "soak": "10m"}, {"components": ["engine"]}]),
        spec([{"components": ["engine", "decoder"], "canary": {"steps": [
            {"capacity": "50%", "traffic": 50, "pause": {}}, {"capacity": "100%", "traffic": 100}]}}]),
        spec([{"components": ["engine"], "canary": {"scaleDownDelaySeconds": 60, "readyTimeout": "20m", "steps": [
            {"capacity": "25%", "traffic": 10, "pause": {"duration": "10m"}},
            {"capacity": "50%", "traffic": 50, "pause": {}}, {"capacity": "100%", "traffic": 100}]}}],
             components=("engine",)),
        spec([{"components": ["engine", "decoder"], "blueGreen": {}}], pairingProtocol="kv-v2"),
    ]
    for body in examples:
        assert validate_rollout(body, {}) == ([], []), body


def test_a_blue_green_pairing_change_and_a_first_token_are_admitted() -> None:
    old = spec([{"components": ["engine", "decoder"]}], pairingProtocol="kv-v1")
    new = copy.deepcopy(old)
    new["rollout"]["pairingProtocol"] = "kv-v2"
    assert validate_rollout(new, {}, old_spec=old) == ([], [])
    separate = spec([{"components": ["decoder"]}, {"components": ["engine"]}])
    first = copy.deepcopy(separate)
    first["rollout"]["pairingProtocol"] = "kv-v1"
    assert validate_rollout(first, {}, old_spec=separate) == ([], [])
