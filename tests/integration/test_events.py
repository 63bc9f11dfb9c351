"""The event recorder aggregates repeats into one Event with a count, and a flood from one object is cut."""

from __future__ import annotations

from omenative.kube.client import KubeClient
from omenative.kube.events import SPAM_BURST, EventRecorder
from omenative.kube.resources import CONFIG_MAPS, EVENTS


async def test_repeats_are_counted_on_one_event_and_floods_are_dropped(kube: KubeClient, namespace: str) -> None:
    subject = await kube.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                              "metadata": {"name": "subject", "namespace": namespace}}, namespace)
    subject |= {"apiVersion": "v1", "kind": "ConfigMap"}
    recorder = EventRecorder(kube)
    recorder.start()
    for _ in range(3):
        recorder.warning(subject, "Repeated", "the same thing happened")
    recorder.normal(subject, "Other", "something else")
    for i in range(SPAM_BURST + 10):
        recorder.normal(subject, "Flood", f"message {i}")
    await recorder.stop()
    events = (await kube.list(EVENTS, namespace))["items"]
    by_reason: dict[str, list[dict[str, object]]] = {}
    for event in events:
        by_reason.setdefault(str(event["reason"]), []).append(event)
    assert [(e["count"], e["type"], e["message"]) for e in by_reason["Repeated"]] == \
        [(3, "Warning", "the same thing happened")]
    assert by_reason["Repeated"][0]["involvedObject"]["uid"] == subject["metadata"]["uid"]
    assert len(by_reason["Other"]) == 1
    # 25 events per object at once, then one every five minutes: the rest of the flood was dropped.
    assert len(by_reason["Flood"]) == SPAM_BURST - 4
    assert recorder.dropped == 14
