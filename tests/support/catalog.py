"""OME's catalog of runtimes and models and the two seed guides, read from ../shared (never copied here); tests that
need them are skipped, with the reason, in a clone without it, except under .ci/run."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("OMENATIVE_SHARED", REPO.parent / "shared"))
CATALOG = SHARED / "thirdparty" / "ome" / "config"
SEEDS = SHARED / "seeds"


def _require(path: Path) -> Path:
    """The path, when it exists. A clone that does not sit beside ../shared skips the tests that read OME's catalog
    or the guides (with the reason), except under .ci/run (OMENATIVE_REQUIRE_CATALOG=1), where that is a failure."""
    if not path.exists():
        why = (f"{path} is missing: these tests read OME's catalog and the guides from ../shared "
               "(set OMENATIVE_SHARED to its folder)")
        if os.environ.get("OMENATIVE_REQUIRE_CATALOG") == "1":
            raise FileNotFoundError(why)
        pytest.skip(why, allow_module_level=True)
    return path


@cache
def catalog(kind: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    """(relative path, object) of every catalog object under config/runtimes or config/models."""
    folder = _require(CATALOG / kind)
    out = []
    for path in sorted(folder.rglob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.load_all(path.read_text(), Loader=Loader):
            if doc and "spec" in doc:
                out.append((str(path.relative_to(CATALOG)), doc))
    return tuple(out)


def runtimes() -> tuple[tuple[str, dict[str, Any]], ...]:
    return catalog("runtimes")


def models() -> tuple[tuple[str, dict[str, Any]], ...]:
    return catalog("models")


def load(relative: str) -> dict[str, Any]:
    return dict(yaml.safe_load(_require(CATALOG / relative).read_text()))


def seed_text(name: str) -> str:
    return _require(SEEDS / name).read_text()


MULTI_NODE_SEED = "000_8502d896559d33e7.txt"
PD_SEED = "003_816e9764a7e4e549.txt"


def seed_yaml_blocks(name: str) -> list[dict[str, Any]]:
    """The YAML documents (apiVersion ... ) embedded in a seed guide, in order."""
    lines = seed_text(name).splitlines()
    blocks: list[dict[str, Any]] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("apiVersion: "):
            j = i + 1
            while j < len(lines) and (lines[j].startswith((" ", "-")) or lines[j].split(":")[0] in
                                      ("kind", "metadata", "spec", "status")):
                j += 1
            blocks.append(yaml.safe_load("\n".join(lines[i:j])))
            i = j
        else:
            i += 1
    return blocks
