"""The real node's image archives (hack/realnode/image.py): what `ctr images import` reads from a docker-archive."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

_path = Path(__file__).resolve().parents[2] / "hack" / "realnode" / "image.py"
_spec = importlib.util.spec_from_file_location("omenative_realnode_image", _path)
assert _spec and _spec.loader
image = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(image)

TAGS = ["docker.io/lmsysorg/sglang:v0.5.5.post3-cu129-amd64", "fra.ocir.io/idqj093njucb/smg:v0.2.4.post1-dev"]


def _read(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_the_archive_tags_one_layer_holding_the_binary_where_the_runtime_calls_it() -> None:
    binary = b"\x7fELF stand-in"
    files = _read(image.archive(binary, "/usr/local/bin/python3", TAGS, None))
    (manifest,) = json.loads(files["manifest.json"])
    assert manifest["RepoTags"] == TAGS
    config = json.loads(files[manifest["Config"]])
    (layer_name,) = manifest["Layers"]
    layer = files[layer_name]
    # The config names the layer by the digest of its bytes, and itself by the digest of the config.
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    assert manifest["Config"] == hashlib.sha256(files[manifest["Config"]]).hexdigest() + ".json"
    assert config["config"]["Entrypoint"] == ["/usr/local/bin/python3"]
    assert "PATH=/usr/local/bin:/usr/bin:/bin" in config["config"]["Env"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert members["usr/local/bin/python3"].mode == 0o755
        assert tar.extractfile(members["usr/local/bin/python3"]).read() == binary  # type: ignore[union-attr]
        assert members["tmp"].isdir() and members["tmp"].mode == 0o1777
        assert {"usr", "usr/local", "usr/local/bin"} <= set(members)


def test_the_same_binary_gives_the_same_image() -> None:
    one = image.archive(b"x", "/pause", ["omenative.local/pause:standin"], None)
    assert one == image.archive(b"x", "/pause", ["omenative.local/pause:standin"], None)
    assert one != image.archive(b"y", "/pause", ["omenative.local/pause:standin"], None)
