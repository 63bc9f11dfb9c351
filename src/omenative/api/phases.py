"""Instance phases (an InferenceReplica status row's `phase`), as OME's concepts/omenative/instances.md names them.

Defined once: the planners set them, the Instance controller, the InferenceService status, the fleet metrics, the
CRD schema and `kubectl ome` read them.
"""

from __future__ import annotations

PENDING = "Pending"  # not yet started (its create waits for the operation budget)
CREATING = "Creating"  # its pods are being made for the first time
READY = "Ready"  # every pod serves, for minReadySeconds
UPDATING = "Updating"  # moving to another revision
RESTARTING = "Restarting"  # rebuilt one incarnation higher
MIGRATING = "Migrating"  # the source of a migration, serving until its surge is Ready
FAILED = "Failed"  # an operation failed; retried or held
DELETING = "Deleting"  # draining before its pods go

INSTANCE_PHASES = (PENDING, CREATING, READY, UPDATING, RESTARTING, MIGRATING, FAILED, DELETING)
CREATING_PHASES = (CREATING, RESTARTING, UPDATING)  # phases in which the Instance controller makes pods
