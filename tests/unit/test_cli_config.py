"""The controller configuration file and flags: durations are checked at start, not found wrong mid-reconcile."""

from __future__ import annotations

from pathlib import Path

import pytest

from omenative.cli import load_config

pytestmark = pytest.mark.unit


def test_a_config_file_sets_fields_in_camel_case_and_flags_win(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("teardownDeadline: 5m\nstuckPodGracePeriod: 2m\nclaimUnmoded: true\n")
    config = load_config(str(path), {"stuck_pod_grace_period": "30s"})
    assert (config.teardown_deadline, config.stuck_pod_grace_period, config.claim_unmoded) == ("5m", "30s", True)


@pytest.mark.parametrize(("text", "message"), [
    ("teardownDeadline: soon\n", "omenative: teardown-deadline: invalid duration 'soon'"),
    ("instanceReadyTimeout: 10 minutes\n", "omenative: instance-ready-timeout: invalid duration '10 minutes'"),
    ("readyTimeout: 5m\n", "omenative: unknown setting 'readyTimeout'"),
])
def test_a_bad_setting_stops_the_controller_with_its_name(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit) as stopped:
        load_config(str(path), {})
    assert str(stopped.value).startswith(message)


def test_an_empty_or_zero_duration_turns_the_deadline_off(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text('teardownDeadline: ""\ninstanceReadyTimeout: "0"\n')
    config = load_config(str(path), {})
    assert (config.teardown_deadline, config.instance_ready_timeout) == (None, None)
