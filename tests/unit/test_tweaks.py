"""The runtime tweaks `omenative run` applies (kube/tweaks.py) take effect, and `in_effect` reads them from the
runtime itself: checked in fresh interpreters, since they change the process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit


def run(code: str) -> dict[str, bool]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_applied_first_every_tweak_is_in_effect_and_a_client_still_connects_through_them() -> None:
    effect = run("import json; from omenative.kube import tweaks; applied = tweaks.apply();"
                 "from omenative.kube.client import KubeClient;"  # imports kubernetes_asyncio the lean way
                 "import sys; assert 'kubernetes_asyncio.client.models.v1_pod' not in sys.modules;"
                 "print(json.dumps({**tweaks.in_effect(), 'applied': all(applied.values())}))")
    assert effect == {"lean-imports": True, "shared-tls-read-buffer": True, "applied": True}


def test_without_them_or_too_late_the_check_says_so() -> None:
    stock = run("import json; from omenative.kube import tweaks; from omenative.kube.client import KubeClient;"
                "print(json.dumps(tweaks.in_effect()))")
    assert stock == {"lean-imports": False, "shared-tls-read-buffer": False}
    late = run("import json; import kubernetes_asyncio.client; from omenative.kube import tweaks;"
               "applied = tweaks.apply(); print(json.dumps({**tweaks.in_effect(), **{'applied-' + k: v for k, v in "
               "applied.items()}}))")
    assert late == {"lean-imports": False, "shared-tls-read-buffer": True, "applied-lean-imports": False,
                    "applied-shared-tls-read-buffer": True}
