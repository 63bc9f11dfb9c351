#!/usr/bin/env python3
"""Writes a container image as a docker-archive tar, without a daemon or a registry.

The image is one layer holding a static binary (and an empty /tmp); `ctr -n k8s.io images import` loads the tar
into the real node's containerd under every tag given, so pods name the catalog's images and run the stand-in.

    python3 hack/realnode/image.py --binary standin --path /usr/local/bin/python3 \
        --tag docker.io/lmsysorg/sglang:v0.5.5.post3-cu129-amd64 --output sglang.tar
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

EPOCH = 0  # fixed times: the same binary gives the same image digest


def _dir(name: str, mode: int = 0o755) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, EPOCH
    return info


def layer(binary: bytes, path: str) -> bytes:
    """A layer tar: the binary at `path` (0755) with its parent folders, and /tmp."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            tar.addfile(_dir("/".join(parts[:i])))
        tar.addfile(_dir("tmp", 0o1777))
        info = tarfile.TarInfo(path.strip("/"))
        info.size, info.mode, info.mtime = len(binary), 0o755, EPOCH
        tar.addfile(info, io.BytesIO(binary))
    return out.getvalue()


def archive(binary: bytes, path: str, tags: list[str], entrypoint: list[str] | None) -> bytes:
    layer_tar = layer(binary, path)
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
        "config": {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"], "Entrypoint": entrypoint or [path]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "hack/realnode/image.py"}],
    }, sort_keys=True).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    layer_name = diff_id.removeprefix("sha256:") + "/layer.tar"
    manifest = json.dumps([{"Config": config_name, "RepoTags": tags, "Layers": [layer_name]}]).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in ((layer_name, layer_tar), (config_name, config), ("manifest.json", manifest)):
            if "/" in name:
                tar.addfile(_dir(name.split("/")[0]))
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), EPOCH
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, type=Path, help="the static binary to put in the image")
    parser.add_argument("--path", required=True, help="where it goes in the image, e.g. /usr/local/bin/python3")
    parser.add_argument("--tag", action="append", required=True, help="an image reference to tag (repeatable)")
    parser.add_argument("--entrypoint", action="append", default=None, help="the entrypoint (default: --path)")
    parser.add_argument("--output", required=True, type=Path)
    args = parser.parse_args(argv)
    args.output.write_bytes(archive(args.binary.read_bytes(), args.path, args.tag, args.entrypoint))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
