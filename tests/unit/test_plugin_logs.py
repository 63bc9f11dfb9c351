"""`kubectl ome logs`: which pods and containers it reads, and how it prints them."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterable
from typing import Any

import pytest

from omenative.kubectl_ome import logs


@pytest.mark.parametrize(("component", "instance", "revision", "expected"), [
    (None, -1, None, "ome.io/inferenceservice=chat"),
    ("engine", -1, None, "ome.io/inferenceservice=chat,component=engine"),
    ("engine", 0, None, "ome.io/inferenceservice=chat,ome.io/managed-by=OMENative,ome.io/instance-index=0,"
                        "component=engine"),
    ("decoder", -1, "1a2b3c4d", "ome.io/inferenceservice=chat,ome.io/revision-hash=1a2b3c4d,"
                                "ome.io/managed-by=OMENative,component=decoder"),
    (None, 2, "chat-engine-1a2b3c4d", "ome.io/inferenceservice=chat,ome.io/revision-hash=1a2b3c4d,"
                                      "ome.io/managed-by=OMENative,ome.io/instance-index=2,component=engine"),
])
def test_the_selection_adds_the_documented_labels(component: str | None, instance: int, revision: str | None,
                                                  expected: str) -> None:
    assert logs.selector("chat", component, instance, revision) == expected


@pytest.mark.parametrize(("component", "instance", "revision"), [
    (None, 0, None), (None, -1, "1a2b3c4d"), ("engine", -1, "chat-decoder-1a2b3c4d"), ("gateway", -1, None),
])
def test_ambiguous_or_wrong_selections_are_refused(component: str | None, instance: int,
                                                   revision: str | None) -> None:
    with pytest.raises(logs.LogsError):
        logs.selector("chat", component, instance, revision)


def pod(name: str, containers: list[str], component: str = "engine", node: str | None = "n1") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"component": component}},
            "spec": {"containers": [{"name": n} for n in containers], "nodeName": node}}


def test_the_main_container_else_the_only_one_else_an_error() -> None:
    assert logs.container_of(pod("a", ["sidecar", "ome-container"]), None) == "ome-container"
    assert logs.container_of(pod("a", ["router"]), None) == "router"
    assert logs.container_of(pod("a", ["x", "y"]), "y") == "y"
    with pytest.raises(logs.LogsError):
        logs.container_of(pod("a", ["x", "y"]), None)


def test_one_shot_reads_pods_in_name_order_with_prefixes_and_skips_unplaced_ones() -> None:
    pods = [pod("chat-router-0-default-0", ["router"], "router"), pod("chat-engine-0-leader-0", ["ome-container"]),
            pod("chat-engine-1-leader-0", ["ome-container"], node=None)]
    containers = {p["metadata"]["name"]: logs.container_of(p, None) for p in pods}
    out = io.StringIO()
    logs.read_all(pods, containers, lambda p, c: [f"{c} line 1", f"{c} line 2"], out)
    assert out.getvalue().splitlines() == [
        "[engine/chat-engine-0-leader-0] ome-container line 1", "[engine/chat-engine-0-leader-0] ome-container line 2",
        "[router/chat-router-0-default-0] router line 1", "[router/chat-router-0-default-0] router line 2"]
    single = io.StringIO()
    logs.read_all(pods[:1], containers, lambda p, c: ["only"], single)
    assert single.getvalue() == "only\n"


def test_follow_interleaves_whole_lines_and_refuses_too_many_streams() -> None:
    pods = [pod(f"chat-engine-{i}-leader-0", ["ome-container"]) for i in range(3)]
    containers = {p["metadata"]["name"]: "ome-container" for p in pods}
    barrier = threading.Barrier(3)

    def stream(p: dict[str, Any], _: str) -> Iterable[str]:
        barrier.wait(timeout=5)  # all three streams are open at once
        yield from (f"{p['metadata']['name']} {i}" for i in range(50))

    out = io.StringIO()
    logs.follow_all(pods, containers, stream, max_requests=5, out=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 150 and all(line.startswith("[engine/chat-engine-") for line in lines)
    with pytest.raises(logs.LogsError, match="you are attempting to follow 3 log streams, but maximum allowed "
                                             "concurrency is 2, use --max-log-requests to increase the limit"):
        logs.follow_all(pods, containers, stream, max_requests=2, out=out)


def test_a_failed_stream_stops_the_follow() -> None:
    pods = [pod("a", ["ome-container"]), pod("b", ["ome-container"])]
    containers = {"a": "ome-container", "b": "ome-container"}
    forever = threading.Event()

    def stream(p: dict[str, Any], _: str) -> Iterable[str]:
        if p["metadata"]["name"] == "a":
            raise RuntimeError("log request refused")
        forever.wait(timeout=30)
        return []

    with pytest.raises(RuntimeError, match="log request refused"):
        logs.follow_all(pods, containers, stream, max_requests=5, out=io.StringIO())
    forever.set()
