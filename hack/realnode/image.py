#!/usr/bin/env python3
"""Writes a container image as a docker-archive tar, without a daemon or a registry.

The image is one layer holding a static binary (and an empty /tmp); `ctr -n k8s.io images import` loads the tar
into the real node's containerd under every tag given, so pods name the catalog's images and run the stand-in.

    python3 hack/realnode/image.py --binary standin --path /usr/local/bin/python3 \
        --tag docker.io/lmsysorg/sglang:v0.5.5.post3-cu129-amd64 --output sglang.tar
    python3 hack/realnode/image.py --rootfs ROOT --entrypoint /opt/omenative/bin/omenative --entrypoint run \
        --user 65532:65532 --tag omenative:0.1.0 --output omenative.tar
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


def rootfs_layer(root: Path) -> bytes:
    """A layer tar of a whole root filesystem (a debootstrap folder), owners and modes kept."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(root)))
            info.mtime = EPOCH
            if info.isreg():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return out.getvalue()


def archive(binary: bytes, path: str, tags: list[str], entrypoint: list[str] | None, *,
            layer_tar: bytes | None = None, user: str | None = None) -> bytes:
    layer_tar = layer(binary, path) if layer_tar is None else layer_tar
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    image_config: dict[str, object] = {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"], "Entrypoint": entrypoint or [path]}
    if user:
        image_config["User"] = user
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
        "config": image_config,
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
    parser.add_argument("--binary", type=Path, help="the static binary to put in the image")
    parser.add_argument("--path", help="where it goes in the image, e.g. /usr/local/bin/python3")
    parser.add_argument("--rootfs", type=Path, help="instead of a binary: a whole root filesystem folder")
    parser.add_argument("--user", help="the image's user (uid:gid)")
    parser.add_argument("--tag", action="append", required=True, help="an image reference to tag (repeatable)")
    parser.add_argument("--entrypoint", action="append", default=None, help="the entrypoint (default: --path)")
    parser.add_argument("--output", required=True, type=Path)
    args = parser.parse_args(argv)
    if args.rootfs is not None:
        if not args.entrypoint:
            parser.error("--rootfs needs --entrypoint")
        data = archive(b"", "", args.tag, args.entrypoint, layer_tar=rootfs_layer(args.rootfs), user=args.user)
    elif args.binary is not None and args.path:
        data = archive(args.binary.read_bytes(), args.path, args.tag, args.entrypoint, user=args.user)
    else:
        parser.error("give --binary and --path, or --rootfs")
    args.output.write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
