"""deploy/base/rbac.yaml's shape: no wildcard, and every rule on omenative's own objects names them.

What the controller asks for against what the rules grant, both ways, is checked where it runs under the
ServiceAccount: tests/e2e/conftest.py (the audit log of the e2e run) and tests/realnode/test_in_cluster.py.
"""

from __future__ import annotations

from tests.support import rbac


def test_no_rule_holds_a_wildcard() -> None:
    assert rbac.wildcards() == []


def test_rules_on_its_own_objects_name_them() -> None:
    grants = rbac.grants("ClusterRole") + rbac.grants("Role")
    assert {(g.group, g.resource) for g in grants} >= rbac.OWN_OBJECTS
    assert rbac.unnamed_own_grants(grants) == []


def test_the_role_is_confined_to_its_namespace() -> None:
    assert {g.namespace for g in rbac.grants("Role")} == {rbac.NAMESPACE}
    assert {(g.group, g.resource) for g in rbac.grants("Role")} == {("coordination.k8s.io", "leases"), ("", "secrets")}
