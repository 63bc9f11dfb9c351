"""--log-format=json: every line the process writes is one JSON object, library lines and crashes included."""

from __future__ import annotations

import json
import logging
import sys
import warnings
from collections.abc import Iterator

import pytest
import structlog

from omenative import logs


@pytest.fixture
def restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level, hook = root.handlers[:], root.level, sys.excepthook
    yield
    root.handlers, sys.excepthook = handlers, hook
    root.setLevel(level)
    logging.captureWarnings(False)
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def test_library_lines_warnings_and_crashes_are_json_with_the_reconcile_key(
    restored: None, capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("info", "json")
    structlog.contextvars.bind_contextvars(controller="instance", namespace="ns", name="svc-engine-0",
                                           reconcile_id="abc123")
    structlog.get_logger().info("ours")
    logging.getLogger("aiohttp.client").warning("connection reset")
    logging.getLogger("kubernetes_asyncio.client.rest").info("not shown: below WARNING")
    structlog.contextvars.clear_contextvars()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("deprecated thing", DeprecationWarning, stacklevel=1)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        sys.excepthook(*sys.exc_info())  # type: ignore[arg-type]
    lines = capsys.readouterr().err.splitlines()
    parsed = [json.loads(line) for line in lines]  # raises on any line that is not JSON
    assert [p["event"] for p in parsed][:2] == ["ours", "connection reset"]
    library = parsed[1]
    assert library["logger"] == "aiohttp.client" and library["level"] == "warning"
    assert (library["controller"], library["name"], library["reconcile_id"]) == ("instance", "svc-engine-0", "abc123")
    assert "deprecated thing" in parsed[2]["event"] and parsed[2]["logger"] == "py.warnings"
    assert parsed[3]["event"] == "uncaught exception" and "RuntimeError: boom" in parsed[3]["exception"]
    assert len(parsed) == 4
