"""`kubectl ome get RESOURCE [NAME]`: OME's resources with model-centric columns, or the objects as JSON or YAML."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from omenative.api.times import parse_datetime as parse_time
from omenative.kubectl_ome.cluster import Cluster
from omenative.kubectl_ome.common import CommandError, emit, now, print_table
from omenative.obj import Obj

# -- get --------------------------------------------------------------------------------------------------------------

# Resource name -> (plural, scope): Namespaced, Cluster, or Merged (the namespaced kind, then the cluster one).
GET_RESOURCES: dict[str, tuple[str, str]] = {}
for _names, _target in (
    (("inferenceservices", "inferenceservice", "isvc", "isvcs"), ("inferenceservices", "Namespaced")),
    (("inferencereplicas", "inferencereplica", "ir"), ("inferencereplicas", "Namespaced")),
    (("models", "model"), ("models", "Merged")),
    (("basemodels", "basemodel", "bm"), ("basemodels", "Namespaced")),
    (("clusterbasemodels", "clusterbasemodel", "cbm"), ("clusterbasemodels", "Cluster")),
    (("runtimes", "runtime"), ("runtimes", "Merged")),
    (("servingruntimes", "servingruntime", "srt"), ("servingruntimes", "Namespaced")),
    (("clusterservingruntimes", "clusterservingruntime", "csrt"), ("clusterservingruntimes", "Cluster")),
):
    for _name in _names:
        GET_RESOURCES[_name] = _target
# The reference's other kinds, which omenative does not serve.
NOT_SERVED_KINDS = ("finetunedweights", "finetunedweight", "ftw", "acceleratorclasses", "acceleratorclass", "ac",
                    "acceleratorquotas", "acceleratorquota", "aq", "benchmarkjobs", "benchmarkjob", "bj",
                    "rolloutpolicies", "rolloutpolicy", "rp", "autoscalerpolicies", "autoscalerpolicy", "ap",
                    "workloadclusters", "workloadcluster", "wc", "trafficmaps", "trafficmap", "tm", "tmap")
MERGED_PARTS = {"models": ("basemodels", "clusterbasemodels"),
                "runtimes": ("servingruntimes", "clusterservingruntimes")}


def age(created: str | None, now: dt.datetime) -> str:
    when = parse_time(created)
    if when is None:
        return "-"
    seconds = max(0, int((now - when).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _condition(obj: Obj, kind: str) -> Obj | None:
    return next((x for x in (obj.get("status") or {}).get("conditions") or []
                 if isinstance(x, dict) and x.get("type") == kind), None)


def _dash(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def get_table(plural: str, objects: list[tuple[str, Obj]], *, wide: bool, all_namespaces: bool,
              now: dt.datetime) -> list[list[str]]:
    """The rows of `kubectl ome get`: `objects` are (scope, object), scope Namespaced or Cluster."""
    merged = plural in MERGED_PARTS
    head: list[str] = ["NAME"]
    if plural == "inferenceservices":
        head += ["MODEL", "RUNTIME", "READY", "URL"]
    elif plural == "inferencereplicas":
        head += ["COMPONENT", "PARENT", "DESIRED", "CURRENT", "READY"] + (["AVAILABLE"] if wide else []) + \
            ["LIFECYCLE"] + (["REASON", "SERVING", "UPDATED", "ENCODING", "CURRENT-REVISION", "UPDATE-REVISION"]
                             if wide else [])
    elif plural in ("models", "basemodels", "clusterbasemodels"):
        head += (["SCOPE"] if merged else []) + ["ARCH", "PARAMS", "FORMAT", "STATE"]
    else:
        head += (["SCOPE"] if merged else []) + ["DISABLED", "FORMATS"]
    head.append("AGE")
    namespaced = plural not in ("clusterbasemodels", "clusterservingruntimes")
    if all_namespaces and namespaced:
        head.insert(0, "NAMESPACE")
    rows = [head]
    for scope, obj in objects:
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        row = [meta.get("name", "")]
        if plural == "inferenceservices":
            ready = _condition(obj, "Ready")
            row += [_dash((spec.get("model") or {}).get("name")), _dash((spec.get("runtime") or {}).get("name")),
                    (ready or {}).get("status") or "Unknown", _dash(status.get("url"))]
        elif plural == "inferencereplicas":
            stalled, ready = _condition(obj, "RolloutStalled"), _condition(obj, "Ready")
            main = stalled if stalled is not None and stalled.get("status") == "True" else (ready or stalled)
            lifecycle = f"{main['type']}={main.get('status')}" if main else "Unavailable"
            row += [_dash(spec.get("component")), _dash((spec.get("parentRef") or {}).get("name")),
                    _dash(spec.get("replicas")), str(status.get("replicas") or 0),
                    str(status.get("readyReplicas") or 0)]
            if wide:
                row.append(str(status.get("availableReplicas") or 0))
            row.append(lifecycle)
            if wide:
                row += [_dash((main or {}).get("reason")), str(status.get("servingReplicas") or 0),
                        str(status.get("updatedReplicas") or 0), status.get("instanceStatusEncoding") or "DenseV1",
                        _dash(status.get("currentRevision")), _dash(status.get("updateRevision"))]
        elif plural in ("models", "basemodels", "clusterbasemodels"):
            row += ([scope] if merged else []) + [
                _dash(spec.get("modelArchitecture")), _dash(spec.get("modelParameterSize")),
                _dash((spec.get("modelFormat") or {}).get("name")), _dash(status.get("state"))]
        else:
            formats = [f.get("name") or (f.get("modelFormat") or {}).get("name")
                       for f in spec.get("supportedModelFormats") or [] if isinstance(f, dict)]
            formats = list(dict.fromkeys(str(f) for f in formats if f))
            shown = ",".join(str(f) for f in formats[:3]) + (f",+{len(formats) - 3}" if len(formats) > 3 else "")
            row += ([scope] if merged else []) + ["true" if spec.get("disabled") is True else "false", _dash(shown)]
        row.append(age(meta.get("creationTimestamp"), now))
        if all_namespaces and namespaced:
            row.insert(0, meta.get("namespace") or "-")
        rows.append(row)
    return rows



def get(cluster: Cluster, namespace: str, args: argparse.Namespace) -> int:
    """`kubectl ome get RESOURCE [NAME]`: a table with each kind's columns, or the objects as JSON or YAML."""
    resource = args.resource.lower()
    if resource in NOT_SERVED_KINDS:
        raise CommandError(f"omenative does not serve {resource}: it runs InferenceServices, InferenceReplicas, "
                           "models and runtimes")
    if resource not in GET_RESOURCES:
        raise CommandError(f"unknown resource {args.resource!r}")
    if args.name and (args.all_namespaces or args.selector):
        raise CommandError("a NAME can't be combined with -A or -l")
    plural, scope = GET_RESOURCES[resource]
    parts = MERGED_PARTS.get(plural, (plural,))
    if scope == "Cluster" and args.all_namespaces:
        print(f"warning: {plural} are cluster-scoped; -A is ignored", file=sys.stderr)
    where = None if args.all_namespaces else namespace
    objects: list[tuple[str, Obj]] = []
    if args.name:
        for part in parts:
            found = cluster.get_ome(part, namespace, args.name)
            if found is not None:
                objects.append(("Cluster" if part.startswith("cluster") else "Namespaced", found))
                break
        if not objects:
            raise CommandError(f'{plural} "{args.name}" not found')
    else:
        for part in parts:
            kind_scope = "Cluster" if part.startswith("cluster") else "Namespaced"
            objects += [(kind_scope, obj) for obj in cluster.list_ome(part, where, args.selector)]
    if args.output in ("json", "yaml"):
        items = [obj for _, obj in objects]
        emit(items[0] if args.name else {"apiVersion": "v1", "kind": "List", "items": items}, args.output)
        return 0
    if not objects:
        print(f"No resources found{'' if args.all_namespaces or scope == 'Cluster' else f' in {namespace} namespace'}.",
              file=sys.stderr)
        return 0
    print_table(get_table(plural, objects, wide=args.output == "wide",
                                  all_namespaces=bool(args.all_namespaces), now=now()))
    return 0
