"""The production overlay's PrometheusRule: promtool accepts its rules, and each alert's unit test passes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.support import monitoring


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is missing: hack/test.sh installs Debian's prometheus package (hack/lib/prometheus.sh)"
    return path


def test_promtool_checks_the_rules_and_every_alert_has_a_passing_unit_test(tmp_path: Path) -> None:
    test = monitoring.write_rule_files(tmp_path)
    checked = subprocess.run([promtool(), "check", "rules", "omenative-alerts.rules.yaml"], cwd=tmp_path,
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([promtool(), "test", "rules", test.name], cwd=tmp_path, capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    alerts = {rule["alert"] for group in monitoring.alert_groups()["groups"] for rule in group["rules"]}
    cases = [case for test in yaml.safe_load(monitoring.ALERT_TESTS.read_text())["tests"]
             for case in test["alert_rule_test"]]
    fired = {case["alertname"] for case in cases if case["exp_alerts"]}
    quiet = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert (alerts - fired, alerts - quiet) == (set(), set()), "alerts without a firing and a quiet test case"


def test_the_alerts_and_dashboard_read_metrics_by_name() -> None:
    names = monitoring.metric_names()
    assert {"controller_runtime_reconcile_errors_total", "workqueue_depth", "leader_election_master_status",
            "workqueue_queue_duration_seconds"} <= names, names
