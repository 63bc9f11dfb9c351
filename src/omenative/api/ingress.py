"""Ingress as OME turns it on (the `ingress` entry of its inferenceservice-config, overridden per InferenceService
by the ome.io/ingress-* annotations): one Gateway API HTTPRoute `{isvc}` on the configured Gateway, for the host the
domain template makes, and `IngressReady` from what the Gateway says of it. Pure."""

from __future__ import annotations

import re
from typing import Any

import attrs

from omenative.api import constants as c
from omenative.api.config import ControllerConfig
from omenative.obj import Obj

TEMPLATE_FIELD = re.compile(r"\{\{\s*\.(\w+)\s*\}\}")
TEMPLATE_FIELDS = ("Name", "Namespace", "IngressDomain")
DNS_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$")
SCHEMES = ("http", "https")

# IngressReady's reasons besides OME's IngressDisabled.
ACCEPTED = "HTTPRouteAccepted"
PENDING = "HTTPRoutePending"
NOT_ACCEPTED = "HTTPRouteNotAccepted"
REFS_NOT_RESOLVED = "HTTPRouteRefsNotResolved"
NO_GATEWAY_API = "GatewayAPINotInstalled"
NO_GATEWAY = "IngressGatewayNotSet"
BAD_HOST = "IngressHostInvalid"


@attrs.frozen(kw_only=True)
class IngressSettings:
    enabled: bool
    gateway: tuple[str, str] | None  # (namespace, name)
    domain: str
    template: str
    scheme: str
    ignored: tuple[str, ...] = ()  # annotation values that could not be used, and why (admission warns of them)


def parse_gateway(value: str) -> tuple[str, str] | None:
    namespace, _, name = value.partition("/")
    if not namespace or not name or "/" in name or not DNS_NAME.match(namespace) or not DNS_NAME.match(name):
        return None
    return namespace, name


def settings(config: ControllerConfig, annotations: Any) -> IngressSettings:
    """The InferenceService's ingress: the controller's settings, each overridden by its annotation as OME reads
    them (`ome.io/ingress-disable-creation`: "true" turns creation off, any other value on; the others are ignored
    when empty)."""
    ann = annotations if isinstance(annotations, dict) else {}
    ignored = []
    enabled = config.ingress_creation
    if c.ANN_INGRESS_DISABLE_CREATION in ann:
        enabled = str(ann[c.ANN_INGRESS_DISABLE_CREATION]) != "true"
    domain = str(ann.get(c.ANN_INGRESS_DOMAIN) or "") or config.ingress_domain
    template = str(ann.get(c.ANN_INGRESS_DOMAIN_TEMPLATE) or "") or config.ingress_domain_template
    scheme = config.ingress_url_scheme
    wanted_scheme = str(ann.get(c.ANN_INGRESS_URL_SCHEME) or "")
    if wanted_scheme in SCHEMES:
        scheme = wanted_scheme
    elif wanted_scheme:
        ignored.append(f"{c.ANN_INGRESS_URL_SCHEME}: {wanted_scheme!r} is neither http nor https; {scheme} is used")
    gateway_value = str(ann.get(c.ANN_INGRESS_GATEWAY) or "") or (config.ingress_gateway or "")
    gateway = parse_gateway(gateway_value) if gateway_value else None
    if gateway_value and gateway is None:
        ignored.append(f"{c.ANN_INGRESS_GATEWAY}: {gateway_value!r} is not <namespace>/<name>")
    return IngressSettings(enabled=enabled, gateway=gateway, domain=domain, template=template, scheme=scheme,
                           ignored=tuple(ignored))


def host(template: str, name: str, namespace: str, domain: str) -> str:
    """The host the domain template makes, as OME's Go template would (`{{ .Name }}`, `{{ .Namespace }}`,
    `{{ .IngressDomain }}`). ValueError names a field it does not know, or a result that is no DNS name."""
    values = {"Name": name, "Namespace": namespace, "IngressDomain": domain}

    def field(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise ValueError(f"the domain template {template!r} uses .{match.group(1)}; it may use "
                             + ", ".join(f".{f}" for f in TEMPLATE_FIELDS))
        return values[match.group(1)]

    made = TEMPLATE_FIELD.sub(field, template)
    if "{{" in made or not DNS_NAME.match(made):
        raise ValueError(f"the domain template {template!r} makes {made!r}, which is not a DNS name")
    return made


def _parent_status(route: Obj, gateway: tuple[str, str]) -> Obj | None:
    route_namespace = (route.get("metadata") or {}).get("namespace")
    for parent in ((route.get("status") or {}).get("parents") or []):
        ref = parent.get("parentRef") or {} if isinstance(parent, dict) else {}
        if (ref.get("namespace") or route_namespace, ref.get("name")) == gateway and \
                ref.get("kind", "Gateway") == "Gateway":
            return dict(parent)
    return None


def route_readiness(route: Obj | None, gateway: tuple[str, str]) -> tuple[bool, str, str]:
    """IngressReady from the HTTPRoute's status, as its Gateway wrote it for this generation: accepted and its
    backends resolved; else why not, in the Gateway's words."""
    where = f"Gateway {gateway[0]}/{gateway[1]}"
    if route is None:
        return False, PENDING, f"the HTTPRoute is being created on {where}"
    name = route["metadata"]["name"]
    parent = _parent_status(route, gateway)
    generation = (route.get("metadata") or {}).get("generation")
    conditions = {x.get("type"): x for x in (parent or {}).get("conditions") or [] if isinstance(x, dict)}
    accepted = conditions.get("Accepted")
    if accepted is None or (generation is not None and accepted.get("observedGeneration") not in (None, generation)):
        return False, PENDING, f"{where} has not answered for HTTPRoute {name} yet"
    if accepted.get("status") != "True":
        return False, NOT_ACCEPTED, (f"{where} did not accept HTTPRoute {name}: {accepted.get('reason')}: "
                                     f"{accepted.get('message') or ''}".rstrip(": "))
    resolved = conditions.get("ResolvedRefs")
    if resolved is not None and resolved.get("status") != "True":
        return False, REFS_NOT_RESOLVED, (f"{where} cannot resolve the backends of HTTPRoute {name}: "
                                          f"{resolved.get('reason')}: {resolved.get('message') or ''}".rstrip(": "))
    return True, ACCEPTED, f"{where} accepted HTTPRoute {name}"


def admission_warnings(config: ControllerConfig, meta: Obj) -> list[str]:
    """What admission says of an InferenceService's ingress: annotation values that are ignored, and a domain
    template that makes no host (the route is then not created, and IngressReady says so)."""
    found = settings(config, meta.get("annotations"))
    out = [f"ingress: {why}" for why in found.ignored]
    if found.enabled:
        try:
            host(found.template, str(meta.get("name") or "x"), str(meta.get("namespace") or "default"), found.domain)
        except ValueError as exc:
            out.append(f"ingress: {exc}; no HTTPRoute is created ({BAD_HOST})")
    return out
