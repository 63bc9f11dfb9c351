#!/usr/bin/env python3
"""Kueue's webhook configurations, for a Kueue that runs as a local process beside the local control plane.

Reads the configurations of Kueue's module (config/components/webhook/manifests.yaml, as JSON from `kubectl create
--dry-run=client -o json`, one document per object) on stdin and writes them to stdout, changed so:
- only the webhooks of what this cluster runs with Kueue remain: plain pods (Kueue's `pod` integration) and
  Kueue's own objects (ClusterQueue, LocalQueue, ResourceFlavor, Cohort, Workload);
- each calls the process at https://127.0.0.1:PORT (there is no Service in front of it) with the CA given;
- the pod webhooks see only pods that name a queue, so a Kueue that is down never blocks other pods.

    kueue-webhooks.py PORT CA_FILE < manifests.json > webhooks.json
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def keep(webhook: dict[str, Any]) -> bool:
    for rule in webhook.get("rules") or []:
        groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
        if (groups == [""] and resources == ["pods"]) or groups == ["kueue.x-k8s.io"]:
            return True
    return False


def main() -> None:
    port, ca_file = sys.argv[1], sys.argv[2]
    ca = base64.b64encode(Path(ca_file).read_bytes()).decode()
    text, decoder, items, at = sys.stdin.read(), json.JSONDecoder(), [], 0
    while text[at:].strip():  # kubectl prints one JSON document per object, one after the other
        obj, end = decoder.raw_decode(text, at + len(text[at:]) - len(text[at:].lstrip()))
        items += obj.get("items", []) if obj.get("kind") == "List" else [obj]
        at = end
    out = []
    for config in items:
        hooks = []
        for webhook in config.get("webhooks") or []:
            if not keep(webhook):
                continue
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
            if any((rule.get("resources") or []) == ["pods"] for rule in webhook.get("rules") or []):
                webhook["objectSelector"] = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}
            hooks.append(webhook)
        config["metadata"] = {"name": f"kueue-{config['kind'].removesuffix('WebhookConfiguration').lower()}"}
        config["webhooks"] = hooks
        out.append(config)
    json.dump({"apiVersion": "v1", "kind": "List", "items": out}, sys.stdout)


if __name__ == "__main__":
    main()
