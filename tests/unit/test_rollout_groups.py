"""The rollout groups' planner (controllers/inferenceservice/rollout.py), table-tested against the examples of OME's
rollout pages: blue-green, the pairing gate, rolling update with maintainRatio, a sequence with soak, canaries with
manual and timed gates, promote, rollback and the ready timeout, and the pause."""

from __future__ import annotations

import copy
from typing import Any

import attrs
import pytest

from omenative.controllers.inferenceservice import rollout as r
from omenative.controllers.inferenceservice.rollout.planner import member_phase

OLD, NEW = "aaaa1111", "bbbb2222"
NOW = 1_000_000.0


def member(name: str, desired: int, *, new: int = 0, new_ready: int | None = None, failed: int = 0,
           target: str = NEW, stable: str | None = OLD, pairing: str | None = None,
           stable_pairing: str | None = None, strategy: str = r.SURGE_THEN_DRAIN) -> r.Member:
    """`desired` Instances, `new` of them on the target (`new_ready` of those ready, all by default), the rest on
    the old revision and ready."""
    ready = new if new_ready is None else new_ready
    rows = [(target, i < ready, i >= new - failed) for i in range(new)]
    rows += [(OLD, True, False) for _ in range(max(desired - new, 0))]
    return r.Member(name=name, desired=desired, target=target, stable=stable, revisions=tuple(rows),
                    strategy=strategy, pairing=pairing, pairings={target: pairing, OLD: stable_pairing})


def plan(groups: list[dict[str, Any]], *members: r.Member, annotations: dict[str, str] | None = None,
         previous: dict[str, Any] | None = None, now: float = NOW, **kw: Any) -> r.Outcome:
    return r.plan(r.Inputs(groups=groups, members={m.name: m for m in members}, annotations=annotations or {},
                           previous=previous or {}, now=now, **kw), "mistral-pd")


def carry(outcome: r.Outcome, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The status the next pass reads: what this one wrote."""
    out = dict(previous or {})
    out.update(outcome.status)
    for key in ("rollout", "rolloutCoordination"):
        if key not in outcome.status:
            out.pop(key, None)
    components = dict(out.get("components") or {})
    for name, fields in outcome.components.items():
        components[name] = {**components.get(name, {}), **fields}
    out["components"] = components
    return out


def test_no_change_leaves_every_component_alone() -> None:
    groups = [{"components": ["engine", "decoder"]}]
    out = plan(groups, member("engine", 1, target=OLD), member("decoder", 1, target=OLD))
    assert {n: d.pacing() for n, d in out.directives.items()} == {}
    assert "rollout" not in out.status
    assert out.status["rolloutCoordination"]["groups"][0]["phase"] == "Idle"
    assert ("RolloutPlanReady", True, "NoActiveRun", "no rollout is in progress") in out.conditions


def test_blue_green_moves_both_a_quarter_at_a_time_and_pins_the_run() -> None:
    out = plan([{"components": ["engine", "decoder"]}], member("engine", 4), member("decoder", 4))
    assert out.directives["engine"].pacing() == {"maxUnavailable": "25%"}
    assert out.directives["decoder"].pacing() == {"maxUnavailable": "25%"}
    run = out.status["rollout"]["activeRun"]
    assert [(t["component"], t["revision"], t["stableRevision"]) for t in run["targetRevisions"]] == [
        ("engine", NEW, OLD), ("decoder", NEW, OLD)]
    assert out.status["rolloutCoordination"]["groups"][0]["phase"] == "Surging"
    assert any(cond[:3] == ("RolloutPlanReady", True, "Pinned") for cond in out.conditions)


def test_a_finished_run_closes_completed() -> None:
    first = plan([{"components": ["engine", "decoder"]}], member("engine", 2), member("decoder", 2))
    done = plan([{"components": ["engine", "decoder"]}], member("engine", 2, new=2), member("decoder", 2, new=2),
                previous=carry(first))
    assert "activeRun" not in done.status["rollout"]
    assert done.status["rollout"]["lastRun"]["outcome"] == "Completed"
    assert {n: d.pacing() for n, d in done.directives.items() if d.pacing()} == {}


@pytest.mark.parametrize(("engine_new", "decoder_ready", "engine_partition", "engine_gate"), [
    (0, 0, 1, None),        # nothing moved: the engine may move all but its last old Instance
    (1, 0, 1, "Pairing"),   # all but one moved, no decoder on the new token ready: the last one waits
    (1, 1, 0, None),        # a new-token decoder is ready: the last old engine may go
])
def test_pairing_keeps_one_pair_of_the_same_token(engine_new: int, decoder_ready: int, engine_partition: int,
                                                   engine_gate: str | None) -> None:
    token = {"pairing": "kv-v2", "stable_pairing": "kv-v1"}
    out = plan([{"components": ["engine", "decoder"], "blueGreen": {}}],
               member("engine", 2, new=engine_new, **token),
               member("decoder", 2, new=decoder_ready, **token))
    engine = out.directives["engine"]
    assert (engine.partition or 0) == engine_partition  # None: the component's own partition, unset
    assert (engine.hold[0] if engine.hold else None) == engine_gate
    if engine_gate:
        assert engine.hold == ("Pairing", "keeping one engine Instance on pairing protocol kv-v1 until a decoder "
                                          "Instance on kv-v2 is ready")


def test_pairing_exempts_a_side_of_one() -> None:
    token = {"pairing": "kv-v2", "stable_pairing": "kv-v1"}
    out = plan([{"components": ["engine", "decoder"]}], member("engine", 1, **token), member("decoder", 1, **token))
    assert out.directives["engine"].partition is None and out.directives["decoder"].partition is None


def test_maintain_ratio_keeps_the_components_within_the_tolerance_to_the_end() -> None:
    """The rollout-groups page's example: four engines, two decoders, maxSurge 1, tolerance 25. Each pass moves
    every component to what its partition allows (one at a time); progress never drifts more than 25 points."""
    group = {"components": ["engine", "decoder"], "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
             "maintainRatio": {"tolerance": 25}}
    moved = {"engine": 0, "decoder": 0}
    desired = {"engine": 4, "decoder": 2}
    previous: dict[str, Any] = {}
    ratio_held = set()
    for _ in range(20):
        out = plan([group], member("engine", 4, new=moved["engine"]), member("decoder", 2, new=moved["decoder"]),
                   previous=previous)
        previous = carry(out, previous)
        if moved == desired:
            break
        for name in moved:
            directive = out.directives.get(name, r.Directive())
            if moved[name] == desired[name]:
                continue
            assert directive.max_unavailable == 1
            if directive.hold and directive.hold[0] == "Ratio":
                ratio_held.add(name)
            allowed = desired[name] - (directive.partition or 0)
            moved[name] = min(desired[name], moved[name] + 1, max(allowed, moved[name]))
        assert abs(moved["engine"] / 4 - moved["decoder"] / 2) <= 0.25 + 1e-9, moved
    assert moved == desired
    assert "decoder" in ratio_held  # held first: one engine of four is 25%, one decoder of two is 50%
    assert previous["rollout"]["lastRun"]["outcome"] == "Completed"


def test_maintain_ratio_with_no_tolerance_still_finishes() -> None:
    group = {"components": ["engine", "decoder"], "rollingUpdate": {"maxSurge": 1},
             "maintainRatio": {"tolerance": 0}}
    moved = {"engine": 0, "decoder": 0}
    for _ in range(20):
        out = plan([group], member("engine", 4, new=moved["engine"]), member("decoder", 2, new=moved["decoder"]))
        advanced = False
        for name, total in (("engine", 4), ("decoder", 2)):
            allowed = total - (out.directives.get(name, r.Directive()).partition or 0)
            if moved[name] < min(allowed, total):
                moved[name] += 1
                advanced = True
        if not advanced:
            break
    assert moved == {"engine": 4, "decoder": 2}


def test_maintain_ratio_holds_an_update_that_would_skew_the_serving_ratio() -> None:
    """OME: maintainRatio also holds an update that would move the serving ratio more than the tolerance from the
    desired one (4:2 here). Under RecreatePod an engine already out of rotation (3 of 4 serving) may not take a second
    one out (2:2 is 50% from 2:1); with every Instance serving, one may always go, so the rollout never stops; a
    SurgeThenDrain component keeps serving while it moves and is never held for it."""
    group = {"components": ["engine", "decoder"], "rollingUpdate": {"maxUnavailable": 1},
             "maintainRatio": {"tolerance": 25}}

    def engine(serving: int, strategy: str = "RecreatePod") -> r.Member:
        return attrs.evolve(member("engine", 4, new=1, strategy=strategy), serving=serving)

    decoder = attrs.evolve(member("decoder", 2, new=1, strategy="RecreatePod"), serving=2)
    held = plan([group], engine(3), decoder).directives["engine"]
    assert held.hold is not None and held.hold[0] == "Ratio", held
    assert held.hold[1] == ("engine: another Instance out of rotation would move the serving ratio to 2:2 decoder, "
                            "more than 25% from 4:2")
    assert held.partition == 3  # the three Instances still on the old revision stay
    free = plan([group], engine(4), attrs.evolve(decoder, serving=2)).directives["engine"]
    assert free.hold is None or free.hold[0] != "Ratio" or "serving ratio" not in free.hold[1]
    surging = plan([group], engine(3, r.SURGE_THEN_DRAIN), decoder).directives["engine"]
    assert surging.hold is None or "serving ratio" not in surging.hold[1]


def test_sequence_waits_then_soaks_then_starts_the_engine() -> None:
    groups = [{"components": ["decoder"], "soak": "10m"}, {"components": ["engine"]}]
    first = plan(groups, member("decoder", 1), member("engine", 1))
    assert first.directives["engine"].partition == 1
    assert first.directives["engine"].hold == ("Sequential", "Sequential waiting on decoder")
    assert first.directives["decoder"].pacing() == {"maxUnavailable": "25%"}
    seq = first.status["rolloutCoordination"]["groups"][0]
    assert (seq["policy"], seq["phase"], seq["currentComponent"]) == ("Sequential", "Surging", "decoder")

    finished = plan(groups, member("decoder", 1, new=1), member("engine", 1), previous=carry(first), now=NOW + 60)
    assert finished.directives["engine"].hold == (
        "Sequential", "Sequential.Soak: engine waiting out the 10m0s soak after decoder")
    assert finished.wake_in == pytest.approx(600)
    soaking = plan(groups, member("decoder", 1, new=1), member("engine", 1), previous=carry(finished),
                   now=NOW + 60 + 300)
    assert soaking.directives["engine"].partition == 1 and soaking.wake_in == pytest.approx(300)

    after = plan(groups, member("decoder", 1, new=1), member("engine", 1), previous=carry(soaking),
                 now=NOW + 60 + 601)
    assert after.directives["engine"].hold is None
    assert after.directives["engine"].pacing() == {"maxUnavailable": "25%"}


def test_sequence_skips_a_component_the_change_leaves_alone() -> None:
    groups = [{"components": ["decoder"], "soak": "10m"}, {"components": ["engine"]}]
    out = plan(groups, member("decoder", 1, target=OLD), member("engine", 1))
    assert out.directives["engine"].hold is None
    assert out.directives["engine"].pacing() == {"maxUnavailable": "25%"}


def test_a_failed_sequence_member_holds_the_rest_and_tells_once() -> None:
    groups = [{"components": ["decoder"]}, {"components": ["engine"]}]
    first = plan(groups, member("decoder", 2, new=1, new_ready=0, failed=1), member("engine", 1))
    assert [e[1] for e in first.events] == ["CoordinationGroupFailed"]
    assert first.directives["engine"].hold == ("Sequential", "Sequential waiting on decoder")
    again = plan(groups, member("decoder", 2, new=1, new_ready=0, failed=1), member("engine", 1),
                 previous=carry(first))
    assert again.events == []


CANARY = [{"components": ["engine"], "canary": {"steps": [
    {"capacity": "25%", "traffic": 10, "pause": {}},
    {"capacity": "100%", "traffic": 100}]}}]


def test_canary_stops_at_its_manual_gate_and_a_promote_moves_it_on() -> None:
    start = plan(CANARY, member("engine", 4))
    assert start.directives["engine"].partition == 3
    assert start.components["engine"]["rolloutPhase"] == "Pending"
    canary = start.components["engine"]["canary"]
    assert (canary["canaryRevisionHash"], canary["stableRevisionHash"], canary["currentStep"]) == (NEW, OLD, 0)

    gated = plan(CANARY, member("engine", 4, new=1), previous=carry(start), now=NOW + 30)
    engine = gated.components["engine"]
    assert engine["rolloutPhase"] == "Paused" and engine["canary"]["gate"] == "Manual"
    assert engine["canary"]["observedTrafficWeight"] == 10
    assert engine["traffic"] == [
        {"revisionName": f"mistral-pd-engine-rev-{NEW}", "percent": 10, "tag": "canary", "latestRevision": True},
        {"revisionName": f"mistral-pd-engine-rev-{OLD}", "percent": 90, "tag": "stable", "latestRevision": False}]
    assert gated.directives["engine"].partition == 3

    wrong = plan(CANARY, member("engine", 4, new=1), annotations={r.PROMOTE_ANNOTATION: "deadbeef"},
                 previous=carry(gated), now=NOW + 40)
    assert wrong.components["engine"]["canary"]["currentStep"] == 0 and wrong.consume == []

    promoted = plan(CANARY, member("engine", 4, new=1), annotations={r.PROMOTE_ANNOTATION: NEW},
                    previous=carry(gated), now=NOW + 60)
    assert promoted.components["engine"]["canary"]["currentStep"] == 1
    assert promoted.components["engine"]["canary"]["promotedThrough"] == NEW
    assert promoted.consume == [r.PROMOTE_ANNOTATION]
    assert promoted.directives["engine"].partition == 0
    # The same request seen again (the annotation not removed yet) is inert.
    again = plan(CANARY, member("engine", 4, new=2), annotations={r.PROMOTE_ANNOTATION: NEW},
                 previous=carry(promoted), now=NOW + 70)
    assert again.components["engine"]["canary"]["currentStep"] == 1

    finished = plan(CANARY, member("engine", 4, new=4), previous=carry(again), now=NOW + 120)
    assert finished.components["engine"]["rolloutPhase"] == "Stable"
    assert finished.status["rollout"]["lastRun"]["outcome"] == "Completed"
    settled = plan(CANARY, member("engine", 4, new=4, target=NEW, stable=NEW), previous=carry(finished),
                   now=NOW + 130)
    assert settled.components["engine"] == finished.components["engine"]


def test_canary_prefill_and_decode_move_their_own_share() -> None:
    group = [{"components": ["engine", "decoder"], "canary": {"steps": [
        {"capacity": "50%", "traffic": 50, "pause": {}}, {"capacity": "100%", "traffic": 100}]}}]
    out = plan(group, member("engine", 4), member("decoder", 2))
    assert (out.directives["engine"].partition, out.directives["decoder"].partition) == (2, 1)
    half = plan(group, member("engine", 4, new=2), member("decoder", 2, new=0), previous=carry(out))
    assert half.components["engine"]["rolloutPhase"] == "Pending"  # waits for the decoder's too
    assert half.directives["decoder"].hold is not None


def test_canary_timed_gate_advances_after_its_duration() -> None:
    group = [{"components": ["engine"], "canary": {"steps": [
        {"capacity": 1, "traffic": 10, "pause": {"duration": "10m"}}, {"capacity": "100%", "traffic": 100}]}}]
    start = plan(group, member("engine", 4))
    ready = plan(group, member("engine", 4, new=1), previous=carry(start), now=NOW + 10)
    assert ready.components["engine"]["rolloutPhase"] == "Canarying"
    assert ready.wake_in == pytest.approx(600)
    later = plan(group, member("engine", 4, new=1), previous=carry(ready), now=NOW + 611)
    assert later.components["engine"]["canary"]["currentStep"] == 1


def test_canary_rollback_returns_every_instance_and_holds_the_rejected_revision() -> None:
    start = plan(CANARY, member("engine", 4))
    gated = plan(CANARY, member("engine", 4, new=1), previous=carry(start))
    back = plan(CANARY, member("engine", 4, new=1), annotations={r.ROLLBACK_ANNOTATION: "true"},
                previous=carry(gated))
    assert back.components["engine"]["rolloutPhase"] == "RollingBack"
    assert back.components["engine"]["canary"]["rolledBackRevisionHash"] == NEW
    assert back.directives["engine"].rollback_to == OLD
    done = plan(CANARY, member("engine", 4, new=0, stable=OLD), annotations={r.ROLLBACK_ANNOTATION: "true"},
                previous=carry(back))
    assert done.components["engine"]["rolloutPhase"] == "RolledBack"
    assert done.status["rollout"]["lastRun"]["outcome"] == "RolledBack"
    assert done.directives["engine"].rollback_to == OLD
    # Held while the target is the rejected revision, even without the annotation; no run reopens.
    still = plan(CANARY, member("engine", 4, stable=OLD), previous=carry(done))
    assert still.directives["engine"].rollback_to == OLD and "activeRun" not in still.status["rollout"]
    assert still.components == done.components
    # A different revision starts a fresh canary and spends the lingering request.
    fresh = plan(CANARY, member("engine", 4, target="cccc3333", stable=OLD),
                 annotations={r.ROLLBACK_ANNOTATION: "true"}, previous=carry(still))
    assert fresh.consume == [r.ROLLBACK_ANNOTATION]
    assert fresh.components["engine"]["canary"]["canaryRevisionHash"] == "cccc3333"
    assert fresh.directives["engine"].rollback_to is None and fresh.directives["engine"].partition == 3


def test_canary_step_past_its_ready_timeout_fails() -> None:
    start = plan(CANARY, member("engine", 4), annotations={r.READY_TIMEOUT_ANNOTATION: "20m"})
    assert start.wake_in == pytest.approx(1200)
    failed = plan(CANARY, member("engine", 4, new=1, new_ready=0), annotations={r.READY_TIMEOUT_ANNOTATION: "20m"},
                  previous=carry(start), now=NOW + 1201)
    assert failed.components["engine"]["rolloutPhase"] == "Failed"
    assert [e[1] for e in failed.events] == ["CanaryFailed"]


def test_rollback_without_a_canary_is_spent_with_a_warning() -> None:
    out = plan(CANARY, member("engine", 4, target=OLD), annotations={r.ROLLBACK_ANNOTATION: "true"})
    assert out.consume == [r.ROLLBACK_ANNOTATION]
    assert [e[1] for e in out.events] == ["CanaryRollbackIgnored"]


@pytest.mark.parametrize(("value", "paused", "freeze"), [("true", True, False), ("freeze", True, True),
                                                          ("True", False, False)])
def test_the_pause_reaches_every_component(value: str, paused: bool, freeze: bool) -> None:
    out = plan([{"components": ["engine", "decoder"], "rollingUpdate": {}}], member("engine", 2),
               member("decoder", 2), annotations={r.PAUSED_ANNOTATION: value})
    for name in ("engine", "decoder"):
        assert out.directives[name].paused is paused and out.directives[name].freeze is freeze
    assert out.status["rolloutCoordination"]["groups"][0]["phase"] == ("Paused" if paused else "Surging")


def test_a_paused_canary_does_not_take_a_promote() -> None:
    start = plan(CANARY, member("engine", 4))
    gated = plan(CANARY, member("engine", 4, new=1), previous=carry(start))
    held = plan(CANARY, member("engine", 4, new=1), previous=carry(gated),
                annotations={r.PROMOTE_ANNOTATION: NEW, r.PAUSED_ANNOTATION: "true"})
    assert held.components["engine"]["canary"]["currentStep"] == 0 and held.consume == []


def test_a_retarget_supersedes_the_run_and_keeps_the_stable_revision() -> None:
    start = plan(CANARY, member("engine", 4))
    moved = plan(CANARY, member("engine", 4, target="cccc3333", stable=OLD), previous=carry(start))
    assert moved.status["rollout"]["lastRun"]["outcome"] == "Superseded"
    canary = moved.components["engine"]["canary"]
    assert (canary["canaryRevisionHash"], canary["stableRevisionHash"], canary["currentStep"]) == (
        "cccc3333", OLD, 0)


def test_pairing_follows_the_revision_the_run_pinned_as_stable() -> None:
    """Once half the engines moved, the replica's own currentRevision may name the new revision; the gate still
    compares against the token of the revision the run started from."""
    token = {"pairing": "kv-v2", "stable_pairing": "kv-v1"}
    groups = [{"components": ["engine", "decoder"]}]
    first = plan(groups, member("engine", 2, **token), member("decoder", 2, **token))
    later = plan(groups, member("engine", 2, new=1, stable=NEW, **token),
                 member("decoder", 2, new=1, new_ready=0, **token), previous=carry(first))
    assert later.directives["engine"].partition == 1
    assert later.directives["engine"].hold is not None and later.directives["engine"].hold[0] == "Pairing"


ANALYSED = [{"components": ["engine"], "canary": {"readyTimeout": "10m", "steps": [
    {"capacity": "25%", "traffic": 10, "analysis": {
        "interval": "1m", "initialDelay": "30s", "failureLimit": 2, "metrics": [
            {"name": "errors", "operator": "LT", "threshold": "0.5",
             "query": 'max(errors{inferenceservice="{{.ISVCName}}", revision_hash="{{ .CanaryRevision }}"})'}]}},
    {"capacity": "100%", "traffic": 100}]}}]


def at_analysis_gate(groups: list[dict[str, Any]] = ANALYSED) -> dict[str, Any]:
    start = plan(groups, member("engine", 4))
    ready = plan(groups, member("engine", 4, new=1), previous=carry(start), now=NOW + 10)
    assert ready.components["engine"]["rolloutPhase"] == "Paused"
    assert ready.components["engine"]["canary"]["gate"] == "Analysis"
    assert ready.wake_in == pytest.approx(30)  # the warm-up
    return carry(ready)


def sample_of(value: float | None, error: str | None = None) -> list[dict[str, Any]]:
    metric = ANALYSED[0]["canary"]["steps"][0]["analysis"]["metrics"][0]
    return [r.judge(metric, None if value is None else [value], error, NOW)]


def analysed(previous: dict[str, Any], sample: list[dict[str, Any]], now: float,
             groups: list[dict[str, Any]] = ANALYSED) -> r.Outcome:
    inputs = r.Inputs(groups=groups, members={"engine": member("engine", 4, new=1)}, annotations={},
                      previous=previous, now=now)
    requests = r.analysis_requests(inputs, "mistral-pd", "prod")
    assert [q.group for q in requests] == [0]
    return r.plan(attrs.evolve(inputs, samples={0: sample}), "mistral-pd")


def test_analysis_is_due_after_the_warm_up_with_its_variables_rendered() -> None:
    previous = at_analysis_gate()
    early = r.Inputs(groups=ANALYSED, members={"engine": member("engine", 4, new=1)}, annotations={},
                     previous=previous, now=NOW + 20)
    assert r.analysis_requests(early, "mistral-pd", "prod") == []
    due = attrs.evolve(early, now=NOW + 41)
    (request,) = r.analysis_requests(due, "mistral-pd", "prod")
    assert request.metrics[0]["query"] == f'max(errors{{inferenceservice="mistral-pd", revision_hash="{NEW}"}})'
    assert request.component == "engine"


def test_a_passing_sample_advances_the_step() -> None:
    out = analysed(at_analysis_gate(), sample_of(0.1), NOW + 41)
    assert out.components["engine"]["canary"]["currentStep"] == 1
    assert "analysisFailedChecks" not in out.components["engine"]["canary"]
    assert out.components["engine"]["canary"]["metricResults"][0]["passed"] is True


def test_failing_samples_roll_back_at_the_failure_limit() -> None:
    first = analysed(at_analysis_gate(), sample_of(0.9), NOW + 41)
    assert first.components["engine"]["canary"]["analysisFailedChecks"] == 1
    assert first.components["engine"]["rolloutPhase"] == "Paused"
    assert first.components["engine"]["canary"]["metricResults"][0]["value"] == "0.9"
    assert first.wake_in == pytest.approx(60)
    second = analysed(carry(first, at_analysis_gate()), sample_of(0.7), NOW + 102)
    assert second.components["engine"]["rolloutPhase"] == "RollingBack"
    assert second.directives["engine"].rollback_to == OLD
    assert [e[1] for e in second.events] == ["CanaryRollingBack"] and second.events[0][2].endswith("(analysis)")


def test_an_inconclusive_sample_holds_then_fails_the_stalled_step() -> None:
    held = analysed(at_analysis_gate(), sample_of(None, "query failed: connection refused"), NOW + 41)
    assert held.components["engine"]["rolloutPhase"] == "Paused"
    result = held.components["engine"]["canary"]["metricResults"][0]
    assert result["passed"] is False and result["message"] == "query failed: connection refused"
    stalled = analysed(carry(held), sample_of(None), NOW + 10 + 601)
    assert stalled.components["engine"]["rolloutPhase"] == "Failed"


def test_on_inconclusive_rollback_rolls_back_at_the_first_inconclusive_sample() -> None:
    groups = copy.deepcopy(ANALYSED)
    groups[0]["canary"]["steps"][0]["analysis"]["onInconclusive"] = "Rollback"
    out = analysed(at_analysis_gate(groups), sample_of(None), NOW + 41, groups)
    assert out.components["engine"]["rolloutPhase"] == "RollingBack"


@pytest.mark.parametrize(("operator", "values", "passed"), [
    ("LT", [0.1, 0.6], False),   # the highest value is judged for LT
    ("GT", [0.6, 0.1], False),   # the lowest for GT
    ("GTE", [0.5, 0.9], True),
    ("LTE", [float("nan")], None),  # a ratio over zero requests: no data
])
def test_the_worst_value_is_judged(operator: str, values: list[float], passed: bool | None) -> None:
    result = r.judge({"name": "m", "operator": operator, "threshold": "0.5"}, values, None, NOW)
    if passed is None:
        assert result["message"] == "no data" and "value" not in result
    else:
        assert result["passed"] is passed


def test_an_unknown_template_variable_is_a_template_error() -> None:
    assert r.render_query("x{{.Nope}}", {"ISVCName": "a"}) == (None, "template error: unknown variable .Nope")


def test_a_stalled_group_rollout_is_rolled_back_after_the_progress_deadline() -> None:
    groups = [{"components": ["engine", "decoder"]}]
    stuck = (member("engine", 2, new=1, new_ready=0), member("decoder", 2))
    first = plan(groups, *stuck, progress_deadline=300)
    assert first.status["rollout"]["activeRun"]["lastProgressTime"]
    waiting = plan(groups, *stuck, previous=carry(first), now=NOW + 200, progress_deadline=300)
    assert waiting.wake_in == pytest.approx(100) and "activeRun" in waiting.status["rollout"]
    # Paused: the clock holds.
    paused = plan(groups, *stuck, previous=carry(waiting), now=NOW + 400, progress_deadline=300,
                  annotations={r.PAUSED_ANNOTATION: "true"})
    assert "activeRun" in paused.status["rollout"]
    late = plan(groups, *stuck, previous=carry(paused), now=NOW + 701, progress_deadline=300)
    assert [e[1] for e in late.events] == ["RolloutProgressDeadlineExceeded"]
    assert late.status["rollout"]["lastRun"]["outcome"] == "RolledBack"
    assert late.directives["engine"].rollback_to == OLD and late.directives["decoder"].rollback_to == OLD
    assert late.directives["engine"].hold is not None and late.directives["engine"].hold[0] == "Held"
    assert next(c[:2] for c in late.conditions if c[0] == "RolloutProgressing") == ("RolloutProgressing", False)
    # Held while the target is the rejected one; a new revision starts a fresh run.
    held = plan(groups, member("engine", 2, new=0), member("decoder", 2), previous=carry(late), now=NOW + 800,
                progress_deadline=300)
    assert held.directives["engine"].rollback_to == OLD and "activeRun" not in held.status["rollout"]
    fresh = plan(groups, member("engine", 2, target="cccc3333"), member("decoder", 2, target="cccc3333"),
                 previous=carry(held), now=NOW + 900, progress_deadline=300)
    assert fresh.directives["engine"].rollback_to is None and "activeRun" in fresh.status["rollout"]
    assert "rejectedRevisions" not in fresh.status["rollout"]


def test_progress_resets_the_deadline() -> None:
    groups = [{"components": ["engine", "decoder"]}]
    first = plan(groups, member("engine", 4), member("decoder", 4), progress_deadline=300)
    moved = plan(groups, member("engine", 4, new=1), member("decoder", 4), previous=carry(first), now=NOW + 299,
                 progress_deadline=300)
    later = plan(groups, member("engine", 4, new=1), member("decoder", 4), previous=carry(moved), now=NOW + 500,
                 progress_deadline=300)
    assert later.events == [] and "activeRun" in later.status["rollout"]


def test_a_spec_back_on_the_stable_revision_abandons_the_canary() -> None:
    start = plan(CANARY, member("engine", 4))
    gated = plan(CANARY, member("engine", 4, new=1), previous=carry(start))
    # The spec returns to OLD: the IR's current revision is still OLD, its target OLD again.
    reverted = r.Member(name="engine", desired=4, target=OLD, stable=OLD,
                        revisions=((NEW, True, False), *((OLD, True, False),) * 3))
    back = plan(CANARY, reverted, previous=carry(gated))
    assert back.directives.get("engine", r.Directive()).partition is None  # the component's own partition again
    assert back.components["engine"]["rolloutPhase"] == "Stable"
    assert [e[1] for e in back.events] == ["CanaryAbandoned"]


def drift_of(outcome: r.Outcome) -> tuple[str, bool, str]:
    return next((c[0], c[1], c[2]) for c in outcome.conditions if c[0] == "RolloutPlanDrift")


def test_a_repin_moves_the_run_to_the_current_plan_keeping_its_identity() -> None:
    groups = [{"components": ["engine", "decoder"], "rollingUpdate": {"maxSurge": 1}}]
    first = plan(groups, member("engine", 4), member("decoder", 4))
    run_id = first.status["rollout"]["activeRun"]["runID"]
    edited = [{"components": ["engine", "decoder"], "rollingUpdate": {"maxSurge": 2}}]
    drift = plan(edited, member("engine", 4), member("decoder", 4), previous=carry(first))
    assert drift_of(drift) == ("RolloutPlanDrift", True, "SpecNewerThanRun")
    assert drift.directives["engine"].max_unavailable == 1  # the pinned plan still rules
    stale = plan(edited, member("engine", 4), member("decoder", 4), previous=carry(drift),
                 annotations={r.REPIN_ANNOTATION: r.plan_digest(groups)})
    assert [e[1] for e in stale.events] == ["RolloutRepinRejected"] and stale.consume == [r.REPIN_ANNOTATION]
    repinned = plan(edited, member("engine", 4), member("decoder", 4), previous=carry(drift),
                    annotations={r.REPIN_ANNOTATION: r.plan_digest(edited)})
    assert [e[1] for e in repinned.events] == ["RolloutPlanRepinned"]
    assert repinned.status["rollout"]["activeRun"]["runID"] == run_id
    assert repinned.directives["engine"].max_unavailable == 2
    assert drift_of(repinned) == ("RolloutPlanDrift", False, "InSync")


def test_a_repin_to_more_traffic_holds_before_the_step_until_a_promote() -> None:
    start = plan(CANARY, member("engine", 4))
    gated = plan(CANARY, member("engine", 4, new=1), previous=carry(start))
    edited = copy.deepcopy(CANARY)
    edited[0]["canary"]["steps"][0]["traffic"] = 20
    repinned = plan(edited, member("engine", 4, new=1), previous=carry(gated),
                    annotations={r.REPIN_ANNOTATION: r.plan_digest(edited)})
    canary = repinned.components["engine"]["canary"]
    assert canary["preStepHold"] is True and canary["observedTrafficWeight"] == 10
    assert repinned.components["engine"]["rolloutPhase"] == "Paused"
    held = plan(edited, member("engine", 4, new=1), previous=carry(repinned))
    assert held.components["engine"]["canary"]["observedTrafficWeight"] == 10
    released = plan(edited, member("engine", 4, new=1), previous=carry(held),
                    annotations={r.PROMOTE_ANNOTATION: NEW})
    canary = released.components["engine"]["canary"]
    assert "preStepHold" not in canary and canary["observedTrafficWeight"] == 20 and canary["currentStep"] == 0
    assert released.consume == [r.PROMOTE_ANNOTATION]


# -- the coordination phases (OME's CoordinationPhase)

def rows(*spec: tuple[str, bool]) -> tuple[tuple[str, bool, bool], ...]:
    return tuple((rev, ready, False) for rev, ready in spec)


@pytest.mark.parametrize(("revisions", "extra", "held", "phase"), [
    (rows((OLD, True), (OLD, True)), {}, False, "Surging"),  # nothing moved yet: the first surge starts
    (rows((NEW, False), (OLD, True)), {}, False, "Surging"),  # a new Instance is coming up
    (rows((NEW, True), (OLD, True)), {}, False, "Shifting"),  # both revisions serve between batches
    (rows((NEW, True), (OLD, True)), {"draining": 1}, False, "Draining"),  # a replaced Instance drains
    (rows((NEW, True), (OLD, True)), {}, True, "Waiting"),  # a gate (ratio, pairing, sequence) holds the next
    (rows((NEW, True), (OLD, True)), {"partition": 1}, False, "Staged"),  # only the user's partition holds it
    (rows((NEW, True), (NEW, True), (NEW, True)), {}, False, "ScalingDown"),  # a surplus Instance goes
    (rows((NEW, True)), {}, False, "Surging"),  # an Instance still to create on the target
    (rows((NEW, True), (NEW, True)), {}, False, "Idle"),
    (rows((NEW, True), (NEW, True)), {"draining": 1}, False, "Draining"),  # the last old Instance still drains
])
def test_each_component_phase(revisions: tuple[tuple[str, bool, bool], ...], extra: dict[str, int], held: bool,
                              phase: str) -> None:
    m = r.Member(name="engine", desired=2, target=NEW, stable=OLD, revisions=revisions, **extra)
    assert member_phase(m, held) == phase


def test_a_group_shows_its_most_active_component_and_names_it_alone() -> None:
    group = [{"components": ["engine", "decoder"], "rollingUpdate": {}}]
    engine = r.Member(name="engine", desired=2, target=NEW, stable=OLD, revisions=rows((NEW, True), (OLD, True)))
    decoder = r.Member(name="decoder", desired=2, target=NEW, stable=OLD, revisions=rows((NEW, False), (OLD, True)))
    entry = plan(group, engine, decoder).status["rolloutCoordination"]["groups"][0]
    assert (entry["phase"], entry["compositePhase"]) == ("Surging", "Surging")
    staged = attrs.evolve(engine, partition=1)
    done = attrs.evolve(decoder, revisions=rows((NEW, True), (NEW, True)))
    out = plan(group, staged, done)
    entry = out.status["rolloutCoordination"]["groups"][0]
    assert (entry["phase"], entry["compositePhase"]) == ("Staged", "engine.Staged")
    assert ("RolloutCoordinationReady", False, "Progressing", "group 0 (engine, decoder) engine.Staged") in \
        out.conditions


def test_a_stalled_rollout_shows_rolling_back_then_failed() -> None:
    group = [{"components": ["engine"]}]
    rejected = {"rollout": {"rejectedRevisions": [{"component": "engine", "revision": NEW, "stableRevision": OLD}]}}
    going_back = r.Member(name="engine", desired=2, target=NEW, stable=OLD, revisions=rows((NEW, True), (OLD, False)))
    out = plan(group, going_back, previous=rejected)
    entry = out.status["rolloutCoordination"]["groups"][0]
    assert (entry["phase"], entry["compositePhase"]) == ("RollingBack", "engine.RollingBack")
    assert entry["message"] == (f"engine: revision {NEW} rolled back to {OLD}: its rollout made no progress within "
                                "the progress deadline")
    assert any(cond[:3] == ("RolloutCoordinationReady", False, "RollingBack") for cond in out.conditions)
    back = attrs.evolve(going_back, revisions=rows((OLD, True), (OLD, True)))
    out = plan(group, back, previous={**rejected, **carry(out)})
    entry = out.status["rolloutCoordination"]["groups"][0]
    assert entry["phase"] == "Failed" and entry["lastTransitionTime"] == "1970-01-12T13:46:40Z"
    assert any(cond[:3] == ("RolloutCoordinationReady", False, "CoordinationGroupFailed") for cond in out.conditions)


def test_a_single_pods_surge_draining_its_old_pod_is_draining_not_surging() -> None:
    m = r.Member(name="engine", desired=2, target=NEW, stable=OLD, revisions=rows((NEW, False), (OLD, True)),
                 surge_draining=1)
    assert member_phase(m, False) == "Draining"
    assert member_phase(attrs.evolve(m, revisions=rows((NEW, False), (NEW, False))), False) == "Surging"
