"""What the production overlay's alerts and dashboard read: their PromQL, and the metric names in it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tests.support.cluster import REPO

PRODUCTION = REPO / "deploy" / "overlays" / "production"
ALERT_TESTS = REPO / "tests" / "alerts" / "omenative-alerts.test.yaml"
# Series Prometheus makes itself, and the routers' own router_pool_healthy_count and router_pool_total_count (OME's
# OMEServiceUnavailable reads them; named here as metric_names gives them, with _count taken as a histogram's part),
# not the controller's.
_NOT_THE_CONTROLLERS = {"up", "router_pool_healthy", "router_pool_total"}
_HISTOGRAM_PARTS = ("_bucket", "_count", "_sum")
# Counters of events per InferenceService (labelled by its name): a series exists from the first event, since no
# InferenceService is known at start. An alert on them reads nothing, and stays quiet, until then.
PER_SERVICE = {"ome_omenative_rollout_group_transition_total"}


def alert_groups() -> dict[str, Any]:
    """The PrometheusRule's spec, which is a Prometheus rule file as it stands."""
    rule = yaml.safe_load((PRODUCTION / "prometheusrule.yaml").read_text())
    return dict(rule["spec"])


def write_rule_files(folder: Path) -> Path:
    """The rules and their promtool tests side by side in `folder`; returns the test file."""
    (folder / "omenative-alerts.rules.yaml").write_text(yaml.safe_dump(alert_groups()))
    test = folder / ALERT_TESTS.name
    test.write_text(ALERT_TESTS.read_text())
    return test


def expressions() -> list[str]:
    exprs = [rule["expr"] for group in alert_groups()["groups"] for rule in group["rules"]]
    dashboard = json.loads((PRODUCTION / "dashboard.json").read_text())
    exprs += [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    return exprs


def metric_names() -> set[str]:
    """Metric names (histograms by their family name) that the expressions select."""
    names = set()
    for expr in expressions():
        for name in re.findall(r"\b([a-z_][a-z0-9_]*)\s*\{", expr):
            for part in _HISTOGRAM_PARTS:
                if name.endswith(part):
                    name = name[: -len(part)]
            names.add(name)
    return names - _NOT_THE_CONTROLLERS
