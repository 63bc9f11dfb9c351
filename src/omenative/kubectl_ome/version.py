"""`kubectl ome version`: the plugin's version and the controller's, read from its Deployment's image
(reference/kubectl-ome/version.md)."""

from __future__ import annotations

import sys

from omenative import __version__
from omenative.kubectl_ome.cluster import KubeCluster
from omenative.kubectl_ome.common import print_table
from omenative.kubectl_ome.status import read_failure
from omenative.obj import Obj

OPERATOR_NAMESPACE = "omenative-system"


OPERATOR_DEPLOYMENT = "omenative"


# -- version ----------------------------------------------------------------------------------------------------------

def operator_version(deployment: Obj | None, error: str = "", *, container: str = "omenative") -> str:
    """The image tag (or tag@digest, or digest) of the controller's container, or `unknown (reason)`."""
    if deployment is None:
        return f"unknown ({error})"
    containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    chosen = next((x for x in containers if x.get("name") == container), containers[0] if len(containers) == 1
                  else None)
    if chosen is None:
        return f"unknown ({container} container unavailable)"
    image = str(chosen.get("image") or "")
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    if tag and digest:
        return f"{tag}@{digest}"
    if tag or digest:
        return tag or digest
    return "unknown (image has no tag or digest)"




def version(kubeconfig: str | None, context: str | None, namespace: str) -> int:
    """The plugin's version and the controller's, read from its Deployment's image (exit 0 even when unknown)."""
    client = f"{__version__} (commit unknown)"
    try:
        cluster = KubeCluster(kubeconfig, context)
    except BaseException:
        operator = "unknown (resolve kubernetes-client: Unavailable)"
    else:
        try:
            operator = operator_version(cluster.deployment(namespace, OPERATOR_DEPLOYMENT))
        except Exception as exc:
            reason = read_failure(getattr(exc, "status", None))
            reason = {"Unreadable": "ServerError" if (getattr(exc, "status", 0) or 0) >= 500 else "Unavailable",
                      "Timeout": "TimedOut"}.get(reason, reason)
            operator = operator_version(
                None, f"get deployments.apps {namespace}/{OPERATOR_DEPLOYMENT}: {reason}")
    if sys.stdout.isatty():
        print_table([["COMPONENT", "VERSION"], ["Client", client], ["Operator", operator]])
    else:
        print(f"Client Version: {client}")
        print(f"Operator Version: {operator}")
    return 0
