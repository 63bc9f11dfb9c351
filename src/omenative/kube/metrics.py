"""Prometheus metrics under controller-runtime's and client-go's names and labels, so existing dashboards work.

prometheus_client appends `_total` to counters itself, so counters are declared without the suffix.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import Protocol

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

# controller-runtime: 40 exponential-ish buckets from 5 ms to 60 s.
RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)
# client-go workqueue: 1e-8 s to 1e3 s, by factors of ten.
WORKQUEUE_BUCKETS = tuple(10.0**e for e in range(-8, 4))

reconcile_total = Counter(
    "controller_runtime_reconcile", "Total number of reconciliations per controller", ["controller", "result"]
)
reconcile_errors_total = Counter(
    "controller_runtime_reconcile_errors", "Total number of reconciliation errors per controller", ["controller"]
)
terminal_reconcile_errors_total = Counter(
    "controller_runtime_terminal_reconcile_errors",
    "Total number of terminal reconciliation errors per controller", ["controller"],
)
reconcile_panics_total = Counter(
    "controller_runtime_reconcile_panics", "Total number of reconciliation panics per controller", ["controller"]
)
reconcile_time_seconds = Histogram(
    "controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
    ["controller"], buckets=RECONCILE_BUCKETS,
)
active_workers = Gauge(
    "controller_runtime_active_workers", "Number of currently used workers per controller", ["controller"]
)
max_concurrent_reconciles = Gauge(
    "controller_runtime_max_concurrent_reconciles", "Maximum number of concurrent reconciles per controller",
    ["controller"],
)

workqueue_depth = Gauge("workqueue_depth", "Current depth of workqueue", ["name", "controller"])
workqueue_adds_total = Counter("workqueue_adds", "Total number of adds handled by workqueue", ["name", "controller"])
workqueue_queue_duration_seconds = Histogram(
    "workqueue_queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested",
    ["name", "controller"], buckets=WORKQUEUE_BUCKETS,
)
workqueue_work_duration_seconds = Histogram(
    "workqueue_work_duration_seconds", "How long in seconds processing an item from workqueue takes",
    ["name", "controller"], buckets=WORKQUEUE_BUCKETS,
)
workqueue_retries_total = Counter(
    "workqueue_retries", "Total number of retries handled by workqueue", ["name", "controller"]
)

rest_client_requests_total = Counter(
    "rest_client_requests", "Number of HTTP requests, partitioned by status code, method, and host",
    ["code", "method", "host"],
)
rest_client_request_duration_seconds = Histogram(
    "rest_client_request_duration_seconds", "Request latency in seconds, by verb", ["verb"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
)

leader_election_master_status = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.",
    ["name"],
)
leader_election_slowpath_total = Counter(
    "leader_election_slowpath", "Total number of slow path exercised in renewing leader leases", ["name"]
)

informer_objects = Gauge("omenative_informer_objects", "Objects held in an informer cache", ["resource"])
informer_relists_total = Counter("omenative_informer_relists", "Full lists made by a reflector", ["resource"])
informer_watch_restarts_total = Counter(
    "omenative_informer_watch_restarts", "Watches a reflector opened again, by reason", ["resource", "reason"]
)
apply_skipped_total = Counter(
    "omenative_apply_skipped", "Applies not sent because the cache already held the desired fields", ["kind"]
)


webhook_requests_total = Counter(
    "controller_runtime_webhook_requests", "Total number of admission requests by HTTP status code.",
    ["webhook", "code"],
)
webhook_latency_seconds = Histogram(
    "controller_runtime_webhook_latency_seconds", "Histogram of the latency of processing admission requests",
    ["webhook"],
)
webhook_requests_in_flight = Gauge(
    "controller_runtime_webhook_requests_in_flight", "Current number of admission requests being served.", ["webhook"]
)


def init_webhook_series(webhook: str) -> None:
    """As controller-runtime does for each webhook path: codes 200 and 500 at 0, latency and in-flight."""
    for code in ("200", "500"):
        webhook_requests_total.labels(webhook=webhook, code=code)
    webhook_latency_seconds.labels(webhook=webhook)
    webhook_requests_in_flight.labels(webhook=webhook).set(0)


RECONCILE_RESULTS = ("error", "requeue", "requeue_after", "success")


def init_controller_series(controller: str) -> None:
    """Creates a controller's series at 0 before its first reconcile, as controller-runtime and client-go do, so
    rate() and absence alerts see a series from the first scrape (on a standby too)."""
    for result in RECONCILE_RESULTS:
        reconcile_total.labels(controller=controller, result=result)
    for counter in (reconcile_errors_total, terminal_reconcile_errors_total, reconcile_panics_total):
        counter.labels(controller=controller)
    reconcile_time_seconds.labels(controller=controller)
    active_workers.labels(controller=controller).set(0)
    max_concurrent_reconciles.labels(controller=controller)


def init_queue_series(name: str, controller: str) -> None:
    workqueue_depth.labels(name=name, controller=controller).set(0)
    for series in (workqueue_adds_total, workqueue_retries_total, workqueue_queue_duration_seconds,
                   workqueue_work_duration_seconds):
        series.labels(name=name, controller=controller)


class UnfinishedWork(Protocol):
    """What a work queue tells the scrape-time collector about the items its workers hold."""

    name: str
    controller: str

    def unfinished_work_seconds(self) -> float: ...

    def longest_running_processor_seconds(self) -> float: ...


class _InFlightCollector(Collector):
    """Reports, at scrape time, how long the items workers hold have been processing (client-go's two gauges)."""

    def __init__(self) -> None:
        self._queues: weakref.WeakSet[UnfinishedWork] = weakref.WeakSet()

    def track(self, queue: UnfinishedWork) -> None:
        self._queues.add(queue)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
            labels=["name", "controller"],
        )
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels=["name", "controller"],
        )
        for queue in list(self._queues):
            unfinished.add_metric([queue.name, queue.controller], queue.unfinished_work_seconds())
            longest.add_metric([queue.name, queue.controller], queue.longest_running_processor_seconds())
        yield unfinished
        yield longest

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []


in_flight = _InFlightCollector()
REGISTRY.register(in_flight)
