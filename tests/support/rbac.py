"""omenative under its deployed ServiceAccount, and what it asked the API server for, against what RBAC grants it.

The test cluster's audit policy (hack/sim/audit-omenative.yaml) writes one line per request of that account. The
e2e controller runs with a token of the account, so RBAC itself refuses what deploy/base/rbac.yaml does not grant;
these helpers then show that nothing was refused and that every rule granted was used, both ways.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import yaml

from tests.support.cluster import REPO, ControlPlane

BASE = REPO / "deploy" / "base"
NAMESPACE = "omenative-system"
ACCOUNT = "omenative"
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
# Objects that are omenative's own, named by it: the rules on them must name them.
OWN_OBJECTS = {
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    ("coordination.k8s.io", "leases"),
    ("", "secrets"),
}
# RBAC cannot name an object that does not exist yet or a collection.
_UNNAMED_VERBS = {"create", "list", "watch", "deletecollection"}


# Permissions the code needs that the audit log cannot show, with why. The unused check skips them.
UNAUDITED = {
    ("ome.io", "inferenceservices/finalizers", "update"):
        "OwnerReferencesPermissionEnforcement (enabled on the test cluster) checks it when omenative sets "
        "blockOwnerDeletion on an InferenceService's children; admission checks are not audited",
    ("ome.io", "inferencereplicas/finalizers", "update"): "the same, for an InferenceReplica's pods and PodGroups",
    ("", "pods", "get"): "the router's discovery Role grants it, and RBAC lets omenative write a Role only with "
                         "permissions it holds itself; that check is not audited either",
    ("", "secrets", "create"): "the webhook's certificate Secret, behind --webhook-service: tests/realnode/"
                               "test_in_cluster.py checks it on its own cluster",
    ("", "secrets", "get"): "the same",
    ("", "secrets", "patch"): "renewing the certificate (webhook/server.py), which no test waits for",
}


@attrs.frozen
class Request:
    verb: str
    group: str
    resource: str  # with its subresource: "pods/status"
    namespace: str
    name: str
    code: int
    decision: str = ""  # the authorizer's: allow or forbid

    @property
    def authorized_name(self) -> str:
        return "" if self.verb in _UNNAMED_VERBS else self.name


@attrs.frozen
class Grant:
    """One (group, resource, verb) of a rule, with the rule's names and namespace ("" for a ClusterRole)."""

    group: str
    resource: str
    verb: str
    names: frozenset[str]
    namespace: str

    def allows(self, request: Request) -> bool:
        return (request.group == self.group and request.resource == self.resource and request.verb == self.verb
                and (not self.namespace or request.namespace == self.namespace)
                and (not self.names or request.authorized_name in self.names))


def deployed_rbac() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((BASE / "rbac.yaml").read_text()) if doc]


def grants(kind: str) -> list[Grant]:
    """The grants of deploy/base/rbac.yaml's ClusterRole or Role named omenative."""
    out = []
    for doc in deployed_rbac():
        if doc["kind"] != kind or doc["metadata"]["name"] != ACCOUNT:
            continue
        namespace = doc["metadata"].get("namespace", "")
        for rule in doc["rules"]:
            out += [Grant(group, resource, verb, frozenset(rule.get("resourceNames", [])), namespace)
                    for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]]
    return out


def wildcards() -> list[dict[str, Any]]:
    return [rule for doc in deployed_rbac() for rule in doc.get("rules", [])
            if "*" in [*rule.get("apiGroups", []), *rule["resources"], *rule["verbs"]]]


def unnamed_own_grants(all_grants: Iterable[Grant]) -> list[Grant]:
    """Grants on omenative's own objects that would reach every such object in the cluster."""
    return [g for g in all_grants if (g.group, g.resource) in OWN_OBJECTS and g.verb not in _UNNAMED_VERBS
            and not g.names]


async def service_account_kubeconfig(control_plane: ControlPlane) -> Path:
    """The ServiceAccount and its RBAC from deploy/base, and a kubeconfig that authenticates with its token."""
    for manifest in ("namespace.yaml", "rbac.yaml"):
        await control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(BASE / manifest))
    token = (await control_plane.kubectl("create", "token", ACCOUNT, "-n", NAMESPACE, "--duration=12h")).stdout
    admin = yaml.safe_load(control_plane.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    config = {
        "apiVersion": "v1", "kind": "Config", "clusters": [cluster],
        "users": [{"name": ACCOUNT, "user": {"token": token.strip()}}],
        "contexts": [{"name": ACCOUNT, "context": {"cluster": cluster["name"], "user": ACCOUNT}}],
        "current-context": ACCOUNT,
    }
    path = Path(tempfile.mkstemp(prefix="omenative-sa-", suffix=".kubeconfig")[1])
    path.write_text(yaml.safe_dump(config))
    return path


def audit_log(control_plane: ControlPlane) -> Path:
    return control_plane.log_dir / "audit.log"


def audit_offset(control_plane: ControlPlane) -> int:
    path = audit_log(control_plane)
    return path.stat().st_size if path.exists() else 0


def requests_since(control_plane: ControlPlane, offset: int) -> list[Request]:
    """The ServiceAccount's requests in the audit log from `offset` on."""
    out = []
    with audit_log(control_plane).open("rb") as f:
        f.seek(offset)
        for line in f:
            event = json.loads(line)
            ref = event.get("objectRef")
            if event["user"]["username"] != USER or ref is None:
                continue
            resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            request = Request(event["verb"], ref.get("apiGroup", ""), resource, ref.get("namespace", ""),
                              ref.get("name", ""), event.get("responseStatus", {}).get("code", 0),
                              (event.get("annotations") or {}).get("authorization.k8s.io/decision", ""))
            out.append(request)
            if request.verb == "patch" and request.code == 201:
                # A server-side apply that created the object: the API server also authorized a create.
                out.append(attrs.evolve(request, verb="create"))
    return out


def denied(requests: Iterable[Request]) -> list[Request]:
    """Requests the authorizer refused (a 403 from admission, such as a namespace being deleted, is not one)."""
    return sorted({r for r in requests if r.decision == "forbid"}, key=str)


def not_granted(requests: Iterable[Request], all_grants: list[Grant]) -> list[Request]:
    return sorted({r for r in requests if not any(g.allows(r) for g in all_grants)}, key=str)


def unused(requests: Iterable[Request], all_grants: list[Grant],
           skip: Iterable[tuple[str, str, str]] = tuple(UNAUDITED)) -> list[Grant]:
    """Grants no request used, other than those skipped (by default the ones the audit log cannot show)."""
    seen, skipped = list(requests), set(skip)
    return [g for g in all_grants if (g.group, g.resource, g.verb) not in skipped
            and not any(g.allows(r) for r in seen)]
